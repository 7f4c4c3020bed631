"""df.write.format("seglog") and the streaming sink: Spark's rows as messages of a topic.

Columns taken, by name (others are ignored, as Spark's Kafka sink does): value (binary or string,
required; a null is a message without a value, as Kafka's tombstones and Pulsar's null values), key
(binary or string), partition (an integer; null or absent: by key hash, or in turn without a key),
timestamp (null or absent: the time of the send) and properties (map<string,string>).

Tasks stage their rows (staging.py); the driver's commit() publishes them, abort() drops them. The streaming
sink remembers the last batch id it published per query (the id in its checkpoint), and skips a batch id it
has already published: Spark commits a batch again after a restart that followed a crash between its
offset and commit logs. It also notes where each partition ended before it publishes a batch, so that a
batch whose publishing the driver's death cut short is completed, not repeated, when Spark replays it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from hashlib import sha256
from pathlib import Path
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from pyspark_seglog.options import SinkOptions, lowered
from pyspark_seglog.sessions import open_log
from pyspark_seglog.staging import StagedFile, micro_batch_directory, new_write, remove, stage, staged_batches

_STAGED_FIELDS: list[pa.Field] = [  # a list of Fields: each pa.field() call is typed by its own type
    pa.field("value", pa.binary()),
    pa.field("key", pa.binary()),
    pa.field("partition", pa.int32()),
    pa.field("timestamp", pa.int64()),  # ms since the epoch
    pa.field("properties", pa.map_(pa.string(), pa.string())),
]
STAGED = pa.schema(_STAGED_FIELDS)
SINK_STATE_DIRECTORY = "spark-sinks"
_ACCEPTED = {
    "value": "binary or string",
    "key": "binary or string",
    "partition": "an integer type",
    "timestamp": "timestamp",
    "properties": "map<string,string>",
}


def check_columns(schema) -> None:
    """Refuse, before any task runs, a DataFrame the sink cannot take (a Spark StructType)."""
    from pyspark.sql.types import BinaryType, IntegralType, MapType, StringType, TimestampType

    from seglog.errors import InvalidArgumentError
    fields = {field.name: field.dataType for field in schema.fields}
    if "value" not in fields:
        raise InvalidArgumentError("columns", ", ".join(fields) or "none",
                                   "a 'value' column (binary or string), and optionally key, partition, timestamp, "
                                   "properties")
    fits = {"value": lambda t: isinstance(t, (BinaryType, StringType)),
            "key": lambda t: isinstance(t, (BinaryType, StringType)),
            "partition": lambda t: isinstance(t, IntegralType),
            "timestamp": lambda t: isinstance(t, TimestampType),
            "properties": lambda t: isinstance(t, MapType) and isinstance(t.keyType, StringType)
            and isinstance(t.valueType, StringType)}
    for name, fit in fits.items():
        if name in fields and not fit(fields[name]):
            raise InvalidArgumentError(f"{name} column", fields[name].simpleString(), _ACCEPTED[name])


def staged_rows(batch: pa.RecordBatch, partitions: int) -> pa.RecordBatch:
    """Spark's Arrow rows in the staged form, checked in the task, so that the driver's publishing does not
    stop halfway: InvalidArgumentError names a column that cannot be sent."""
    from seglog.errors import InvalidArgumentError
    n = batch.num_rows
    names = batch.schema.names
    value = batch.column("value")
    if "partition" in names:
        given = batch.column("partition").cast(pa.int64())
        outside = pc.or_(pc.less(given, pa.scalar(0)), pc.greater_equal(given, pa.scalar(partitions))).true_count
        if outside:
            raise InvalidArgumentError("partition column", f"{outside} values outside 0..{partitions - 1}",
                                       f"partitions of the topic, from 0 to {partitions - 1}, or null")
    if "properties" in names and batch.column("properties").null_count != n:
        properties = cast(pa.MapArray, batch.column("properties"))  # check_columns() took only a map
        first, last = properties.offsets[0].as_py(), properties.offsets[-1].as_py()
        items = properties.items.slice(first, last - first)  # the values of these rows' entries
        if items.null_count:
            raise InvalidArgumentError("properties column", f"{items.null_count} null property values",
                                       _ACCEPTED["properties"] + " without null values")

    def column(name: str, arrow_type: pa.DataType) -> pa.Array:
        if name in names:
            return batch.column(name).cast(arrow_type)
        return pa.nulls(n, arrow_type)  # type: ignore[call-overload]  # pyarrow-stubs: nulls() of any DataType

    timestamp: pa.Array = pa.nulls(n, pa.int64())
    if "timestamp" in names:  # Spark's µs, in the session's zone, as ms since the epoch
        stamps = batch.column("timestamp")
        timestamp = stamps.cast(pa.timestamp("ms", tz=stamps.type.tz), safe=False).cast(pa.int64())
    return pa.RecordBatch.from_arrays(
        [value.cast(pa.binary()), column("key", pa.binary()), column("partition", pa.int32()), timestamp,
         column("properties", STAGED.field("properties").type)], schema=STAGED)


def publish(path: str, topic_name: str, batches: Iterator[pa.RecordBatch], journal: _SinkJournal | None = None,
            batch_id: int = -1) -> None:
    """Send the staged rows to the topic (created with one partition if it does not exist, as Pulsar's and
    Kafka's brokers do by default).

    Each row's partition is decided here, the same way every time (routed()), so the same staged rows go
    to the same partitions in the same order. With a journal (the streaming sink), the partitions' end
    offsets are noted before the first row is sent; if the driver died while publishing, the replay of
    the batch leaves out the rows it finds there already."""
    from seglog.errors import TopicNotFoundError
    with open_log(path) as log:
        try:
            topic = log.topic(topic_name)
        except TopicNotFoundError:
            topic = log.create_topic(topic_name)
        # The producer takes every partition's writer lock here, before the end offsets are noted (a producer
        # takes a partition's lock with its first message unless told which partitions it writes): nothing
        # else appends meanwhile, so what this publishing sends lies right after the end offsets noted.
        with topic.producer(partitions=range(topic.partitions)) as producer:
            resumed = _AlreadyPublished(topic, journal.begin(batch_id, topic) if journal else {})
            for index, batch in enumerate(batches):
                for rows, partition in routed(batch, index, topic.partitions):
                    rows = resumed.left_out(rows, partition)
                    if rows.num_rows:
                        _send(producer, rows, partition, log.clock())
    if journal:
        journal.published(batch_id)


def routed(batch: pa.RecordBatch, index: int, partitions: int) -> Iterator[tuple[pa.RecordBatch, int]]:
    """The rows of staged batch number `index` for each partition: the row's partition column, else its
    key's partition (Kafka's murmur2, as a producer's), else the batch's turn (index % partitions, as
    keyless send_batch calls take turns)."""
    import numpy as np

    from seglog.storage.partitioning import partitions_for_keys
    n = batch.num_rows
    targets = np.full(n, index % partitions, dtype=np.int64)
    keys, given = batch.column("key"), batch.column("partition")
    if keys.null_count < n:
        keyed = np.asarray(pc.is_valid(keys))
        targets[keyed] = partitions_for_keys(keys, partitions)[keyed]
    if given.null_count < n:
        named = np.asarray(pc.is_valid(given))
        targets[named] = np.asarray(given.fill_null(0), dtype=np.int64)[named]
    for partition in np.unique(targets):
        yield batch.filter(pa.array(targets == partition)), int(partition)


class _AlreadyPublished:
    """For a batch whose publishing was cut short: the rows of each partition found right after the end
    offset noted before it began (the same values and keys in the same order) are left out."""

    def __init__(self, topic, ends: dict[int, int]) -> None:
        self.topic = topic
        self.positions = dict(ends)  # partitions still being compared, and where

    def left_out(self, rows: pa.RecordBatch, partition: int) -> pa.RecordBatch:
        position = self.positions.get(partition)
        if position is None:
            return rows
        found = self._matching_prefix(rows, partition, position)
        if found < rows.num_rows:
            del self.positions[partition]  # from here on, nothing of this batch was published
        else:
            self.positions[partition] = position + found
        return rows.slice(found)

    def _matching_prefix(self, rows: pa.RecordBatch, partition: int, position: int) -> int:
        found = 0
        with self.topic.reader(position, partition) as reader:
            while found < rows.num_rows:
                stored = reader.read_batch(max_messages=rows.num_rows - found)
                if stored is None:
                    break
                expected = rows.slice(found, stored.num_rows)
                same = pc.and_(_equal(stored.column("value"), expected.column("value")),
                               _equal(stored.column("key"), expected.column("key")))
                run = len(same) if pc.all(same).as_py() else pc.index(same, False).as_py()
                found += run
                if run < len(same):
                    break
        return found


def _equal(left: pa.Array, right: pa.Array) -> pa.Array:
    """Row by row: both null, or equal."""
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    # pyarrow-stubs type fill_null's result as the join of the array and the Python fill value: object
    return pc.or_(pc.fill_null(pc.equal(left, right), False), both_null)  # type: ignore[call-overload, type-var]


def topic_partitions(options: SinkOptions) -> int:
    """The partitions the rows may name: the topic's, or 1 for a topic the write will create."""
    from seglog.errors import TopicNotFoundError
    with open_log(_data_directory(options)) as log:
        try:
            return log.topic(options.topic).partitions
        except TopicNotFoundError:
            return 1


def stage_task(directory: str, partitions: int, iterator: Iterator[pa.RecordBatch]) -> StagedFile:
    """A task's rows, checked and staged in a file of this attempt's own."""
    context = _task_context()
    return stage(directory, context.partitionId(), context.attemptNumber(),
                 (staged_rows(batch, partitions) for batch in iterator), STAGED)


def _task_context() -> TaskContext:
    """The context of the Spark task running a writer's write(): Spark runs it nowhere else."""
    context = TaskContext.get()
    assert context is not None, "a sink's write() runs in a Spark task"
    return context


def _micro_batch_id() -> int:
    """The id of the micro-batch a streaming sink's task writes: Spark sets it on every such task."""
    batch_id = _task_context().getLocalProperty("streaming.sql.batchId")
    assert batch_id is not None, "a streaming sink's write() runs in a micro-batch's task"
    return int(batch_id)


def _send(producer, rows: pa.RecordBatch, partition: int, now: int) -> None:
    keys = rows.column("key")
    timestamps = rows.column("timestamp")
    properties = rows.column("properties")
    producer.send_batch(rows.column("value"), partition=partition,
                        keys=keys if keys.null_count != len(keys) else None,
                        timestamps=None if timestamps.null_count == len(timestamps)
                        else pc.fill_null(timestamps, now),  # type: ignore[type-var]  # as in _equal()
                        properties=properties if properties.null_count != len(properties) else None)


class SeglogWriter(DataSourceArrowWriter):
    """A batch write: append only, as to any log."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.partitions = topic_partitions(options)
        self.directory = new_write(_data_directory(options))

    # pyspark declares the Arrow writers' write() with Arrow batches, narrowing its base's Rows
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:  # type: ignore[override]
        return stage_task(self.directory, self.partitions, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        try:
            publish(_data_directory(self.options), self.options.topic, staged_batches(messages))
        finally:
            remove(self.directory)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        remove(self.directory)


class SeglogStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink: each micro-batch staged by its tasks and published once by the driver."""

    def __init__(self, options: SinkOptions, sink_id: str) -> None:
        self.options = options
        self.sink_id = sink_id
        self.partitions = topic_partitions(options)

    # pyspark declares the Arrow writers' write() with Arrow batches, narrowing its base's Rows
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:  # type: ignore[override]
        directory = micro_batch_directory(_data_directory(self.options), self.sink_id, _micro_batch_id())
        return stage_task(directory, self.partitions, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        journal = _SinkJournal(_data_directory(self.options), self.sink_id)
        try:
            if batchId > journal.last_batch_id():
                publish(_data_directory(self.options), self.options.topic, staged_batches(messages), journal, batchId)
        finally:
            self.abort(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        remove(micro_batch_directory(_data_directory(self.options), self.sink_id, batchId))


def _data_directory(options: SinkOptions) -> str:
    if options.location.path is None:
        from seglog.errors import InvalidArgumentError
        raise InvalidArgumentError("serviceUrl", options.location.service_url, "path, for writes: a write through "
                                   "seglog serve is not yet taken")
    return options.location.path


def sink_id(options: Mapping[str, str]) -> str:
    """The identity of a streaming query writing to seglog: the id Spark keeps in its checkpoint's
    metadata file (a checkpoint deleted and made again is a new query), else the checkpoint's path."""
    from seglog.errors import InvalidArgumentError
    location = lowered(options).get("checkpointlocation")
    if not location:
        raise InvalidArgumentError("checkpointLocation", None,
                                   "the option .option('checkpointLocation', DIR) on writeStream: the seglog sink "
                                   "remembers the batches it published per query")
    try:
        identity = json.loads(Path(location, "metadata").read_text())["id"]
    except (OSError, ValueError, KeyError):
        identity = os.path.abspath(location)
    return sha256(identity.encode()).hexdigest()[:16]


class _SinkJournal:
    """What a streaming query published: DATA/spark-sinks/ID.json, replaced atomically, holding the last
    batch id published and, while a batch is being published, its id and the partitions' end offsets
    before it."""

    def __init__(self, data_directory: str, sink: str) -> None:
        self.path = Path(data_directory, SINK_STATE_DIRECTORY, f"{sink}.json")

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"batchId": -1}

    def last_batch_id(self) -> int:
        return self._read()["batchId"]

    def begin(self, batch_id: int, topic) -> dict[int, int]:
        """Note that `batch_id` is being published; returns, if its publishing was begun before and cut
        short, the end offsets noted then ({} otherwise)."""
        state = self._read()
        publishing = state.get("publishing")
        if publishing is not None and publishing["batchId"] == batch_id:
            return {int(p): offset for p, offset in publishing["ends"].items()}
        ends = {str(p): topic.end_offset(p) for p in range(topic.partitions)}
        self._write({"batchId": state["batchId"], "publishing": {"batchId": batch_id, "ends": ends}})
        return {}

    def published(self, batch_id: int) -> None:
        self._write({"batchId": batch_id})

    def _write(self, state: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_suffix(".tmp")
        staging.write_text(json.dumps(state))
        os.replace(staging, self.path)
