"""The data source Spark sees: its name, its schema, and the reader or writer for each kind of query."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from pyspark_seglog.arrow_rows import SPARK_SCHEMA
from pyspark_seglog.options import SinkOptions, SourceOptions


class SeglogDataSource(DataSource):
    """format("seglog"): a topic of a seglog data directory (options: see pyspark_seglog.options)."""

    @classmethod
    def name(cls) -> str:
        return "seglog"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema):
        from pyspark_seglog.batch_reader import SeglogBatchReader
        return SeglogBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema):
        from pyspark_seglog.stream_reader import SeglogStreamReader
        return SeglogStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema, overwrite: bool):
        from pyspark_seglog.writer import SeglogWriter, check_columns
        _append_only(overwrite)
        check_columns(schema)
        return SeglogWriter(SinkOptions.parse(self.options))

    def streamWriter(self, schema, overwrite: bool):
        from pyspark_seglog.writer import SeglogStreamWriter, check_columns, sink_id
        _append_only(overwrite)
        check_columns(schema)
        return SeglogStreamWriter(SinkOptions.parse(self.options), sink_id(self.options))


def _append_only(overwrite: bool) -> None:
    if overwrite:
        from seglog.errors import InvalidArgumentError
        raise InvalidArgumentError("mode", "overwrite", "'append': a seglog topic is a log, written only at its end")
