"""spark.read.format("seglog"): one snapshot of a topic's offsets, read in parallel by offset range."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from pyspark_seglog.offset_ranges import OffsetRange, end_offsets, plan, read_range, snapshot, start_offsets
from pyspark_seglog.options import SourceOptions
from pyspark_seglog.pushdown import PushedFilters, push
from pyspark_seglog.sessions import connect
from pyspark_seglog.value_schema import TopicValueSchema


class SeglogBatchReader(DataSourceReader):
    """Plans in a driver-side worker; read() runs on the executors, on a pickled copy."""

    def __init__(self, options: SourceOptions, value_schema: TopicValueSchema | None = None) -> None:
        self.options = options
        self.value_schema = value_schema  # valueSchema 'topic': the version of the topic's schema read with
        self.pushed = PushedFilters()  # what filters pushed down leave out (FilteringBatchReader)

    def partitions(self) -> list[OffsetRange]:
        """Runs once, when Spark plans the read: the end offsets are taken here, in one snapshot of each topic,
        so the read is consistent while producers go on writing. With readCompacted, the snapshot takes each
        partition's compaction horizon before its end offset: a compaction after the end offsets were taken is
        then one the executors notice."""
        options = self.options
        location = options.location.resolved()
        with connect(location) as session:
            admin = session.admin
            now = snapshot(admin, options.selection.resolve(admin), read_compacted=options.read_compacted,
                           timestamp=self.pushed.timestamp_from)
            horizons = {topic: offsets.horizon for topic, offsets in now.items()} if options.read_compacted else None
            return plan(now, location, start_offsets(admin, options, now),
                        end_offsets(admin, options, now, options.ending), options, horizons, self.pushed)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition, self.value_schema)


class FilteringBatchReader(SeglogBatchReader):
    """A batch reader that takes the filters Spark pushes down (pushdown.py). A reader of its own, because
    PySpark refuses a reader that has pushFilters when spark.sql.python.filterPushdown.enabled is false (its
    default): SeglogDataSource.reader() gives this one only when Spark plans with pushdown."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.pushed, left = push(filters)
        return left
