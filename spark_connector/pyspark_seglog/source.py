"""The data source Spark sees: its name, its schema, and the reader or writer for each kind of query."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from pyspark_seglog.arrow_rows import READ_SCHEMA, SPARK_SCHEMA
from pyspark_seglog.options import SinkOptions, SourceOptions


class SeglogDataSource(DataSource):
    """format("seglog"): a topic of a seglog data directory (options: see pyspark_seglog.options).

    Thread safety: Spark pickles the source to its executors, whose Python workers open the data directory
    themselves, read only (background=False), so the driver and its executors share one machine or file system.
    A write's tasks stage their rows and the driver publishes them through a producer, which holds the writer
    locks of the partitions it writes: no other process may write them meanwhile.
    """

    @classmethod
    def name(cls) -> str:
        return "seglog"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema):
        from pyspark_seglog.batch_reader import SeglogBatchReader
        _own_schema(schema)
        return SeglogBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema):
        from pyspark_seglog.stream_reader import SeglogStreamReader
        _own_schema(schema)
        return SeglogStreamReader(SourceOptions.parse(self.options, streaming=True))

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


def _own_schema(schema) -> None:
    """A schema given with .schema(...) must be the source's own: the rows come as they are stored."""
    if schema.simpleString() != READ_SCHEMA:
        from seglog.errors import InvalidArgumentError
        raise InvalidArgumentError("schema", schema.simpleString(), f"the source's own, {SPARK_SCHEMA} (leave "
                                   ".schema() out)")


def _append_only(overwrite: bool, option: str, given: str) -> None:
    if overwrite:
        from seglog.errors import InvalidArgumentError
        raise InvalidArgumentError(option, given, "'append': a seglog topic is a log, written only at its end")
