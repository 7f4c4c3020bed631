"""The data source Spark sees: its name, its schema, and the reader or writer for each kind of query."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from pyspark_seglog.arrow_rows import READ_SCHEMA, SPARK_SCHEMA
from pyspark_seglog.options import VALUE_BINARY, SinkOptions, SourceOptions, lowered, parse_value_schema


class SeglogDataSource(DataSource):
    """format("seglog"): topics of a seglog data directory or server (options: see pyspark_seglog.options).

    Thread safety: Spark pickles the source to its executors. With `path`, their Python workers open the data
    directory themselves, read only (background=False), so the driver and its executors share one machine or file
    system; a write's tasks stage their rows there and the driver publishes them through a producer, which holds
    the writer locks of the partitions it writes: no other process may write them meanwhile. With `serviceUrl`,
    the executors read and stage through the server's Flight port and the server publishes (sessions.py).
    """

    @classmethod
    def name(cls) -> str:
        return "seglog"

    def schema(self):
        """The rows' schema: SPARK_SCHEMA, whose value column is typed by the topic's latest schema with
        valueSchema 'topic'."""
        if parse_value_schema(self.options) == VALUE_BINARY:
            return SPARK_SCHEMA
        from pyspark_seglog.options import parse_location, value_schema_topic
        from pyspark_seglog.sessions import connect
        from pyspark_seglog.topic_selection import TopicSelection
        from pyspark_seglog.value_schema import TopicValueSchema
        given = lowered(self.options)
        topic = value_schema_topic(TopicSelection.parse(given))
        with connect(parse_location(given)) as session:
            return _rows_with_value(TopicValueSchema.latest(session.admin.schemas, topic).value_type())

    def reader(self, schema):
        """The batch reader; one that takes pushed filters when Spark plans with filter pushdown."""
        from pyspark_seglog.batch_reader import FilteringBatchReader, SeglogBatchReader
        options = SourceOptions.parse(self.options, streaming=False)
        kind = FilteringBatchReader if _planned_with_pushdown() else SeglogBatchReader
        return kind(options, _value_schema(schema, options))

    def streamReader(self, schema):
        from pyspark_seglog.stream_reader import SeglogStreamReader
        options = SourceOptions.parse(self.options, streaming=True)
        return SeglogStreamReader(options, _value_schema(schema, options))

    def writer(self, schema, overwrite: bool):
        from pyspark_seglog.writer import SeglogWriter, check_columns
        _append_only(overwrite, "mode", "overwrite")
        check_columns(schema)
        return SeglogWriter(SinkOptions.parse(self.options))

    def streamWriter(self, schema, overwrite: bool):
        from pyspark_seglog.writer import SeglogStreamWriter, check_columns, sink_id
        _append_only(overwrite, "outputMode", "complete")
        check_columns(schema)
        return SeglogStreamWriter(SinkOptions.parse(self.options), sink_id(self.options))


def _planned_with_pushdown() -> bool:
    """Whether Spark asks for the reader to push filters to it: PySpark's pushdown planner
    (pyspark.sql.worker.data_source_pushdown_filters, run when spark.sql.python.filterPushdown.enabled is true)
    is the caller. The plain planner, run when it is false, refuses a reader with pushFilters, and no API tells
    a data source which planner runs; a PySpark that moved its planner gets readers without pushdown, which
    read the same rows."""
    import sys
    from types import FrameType
    frame: FrameType | None = sys._getframe(1)
    for _ in range(4):  # reader() is called by the planner itself
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == _PUSHDOWN_PLANNER:
            return True
        frame = frame.f_back
    return False


_PUSHDOWN_PLANNER = "pyspark.sql.worker.data_source_pushdown_filters"


def _value_schema(schema, options: SourceOptions):
    """The version of the topic's schema the query reads values with (valueSchema 'topic'), the one whose type
    the planned value column has; None for binary values. A schema given with .schema(...) must be the
    source's own: the rows come as they are stored."""
    from seglog.errors import InvalidArgumentError
    if options.value_schema == VALUE_BINARY:
        if schema.simpleString() != READ_SCHEMA:
            raise InvalidArgumentError("schema", schema.simpleString(), f"the source's own, {SPARK_SCHEMA} (leave "
                                       ".schema() out)")
        return None
    from pyspark_seglog.sessions import connect
    from pyspark_seglog.value_schema import TopicValueSchema
    value_type = schema["value"].dataType if "value" in schema.names else None
    with connect(options.location) as session:
        schemas = session.admin.schemas
        if value_type is None or _rows_with_value(value_type).simpleString() != schema.simpleString():
            latest = _rows_with_value(TopicValueSchema.latest(schemas, options.topic).value_type())
            raise InvalidArgumentError("schema", schema.simpleString(), f"the source's own, {latest.simpleString()} "
                                       "(leave .schema() out)")
        return TopicValueSchema.matching(schemas, options.topic, value_type)


def _rows_with_value(value_type):
    """SPARK_SCHEMA's columns as a StructType, the value column of type `value_type`."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
    return StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                       StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                       StructField("key", BinaryType()), StructField("value", value_type),
                       StructField("properties", MapType(StringType(), StringType()))])


def _append_only(overwrite: bool, option: str, given: str) -> None:
    if overwrite:
        from seglog.errors import InvalidArgumentError
        raise InvalidArgumentError(option, given, "'append': a seglog topic is a log, written only at its end")
