"""df.write.format("seglog") and the streaming sink: Spark's rows as messages of a topic.

Columns taken, by name (others are ignored, as Spark's Kafka sink does): value (binary or string,
required; a null is a message without a value, as Kafka's tombstones and Pulsar's null values), key
(binary or string), partition (an integer; null or absent: by key hash, or in turn without a key),
timestamp (null or absent: the time of the send) and properties (map<string,string>).

Tasks stage their rows (seglog.storage.staged_writes: a file per task attempt in the data directory, written
here with `path`, by the server's Flight port with `serviceUrl`: flight_writes.py); the driver's commit()
publishes the committed attempts (seglog.storage.publication, here or on the server), abort() drops them. The
streaming sink publishes each micro-batch once: a batch Spark commits again after a restart is skipped, and one
whose publishing the driver's death cut short is completed, not repeated, when Spark replays it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from hashlib import sha256
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from pyspark_seglog.flight_writes import RemoteWrites
from pyspark_seglog.options import SinkOptions, lowered
from pyspark_seglog.sessions import connect, open_log
from pyspark_seglog.staging import StagedFile, committed_attempts, new_write_id, stage
from seglog.storage.publication import SinkJournal, send_arguments
from seglog.storage.publication import publish as publish_staged
from seglog.storage.staged_writes import (
    STAGED,
    attempt_file,
    micro_batch_write_id,
    remove,
    staged_batches,
    write_directory,
)

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


def publish(path: str, topic_name: str, batches: Iterable[pa.RecordBatch], journal: SinkJournal | None = None,
            batch_id: int = -1) -> None:
    """Send the staged rows to the topic of the data directory `path` (created with one partition if it does not
    exist, as Pulsar's and Kafka's brokers do by default), as seglog.storage.publication.publish says: with a
    journal, micro-batch `batch_id` once."""
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
            publish_staged(_InProcessTarget(topic, producer, log.clock), batches, journal, batch_id)


class _InProcessTarget:
    """A topic of a data directory opened here, and the producer holding its partitions' writers
    (publication.PublishTarget)."""

    def __init__(self, topic: Any, producer: Any, clock: Callable[[], int]) -> None:
        self.topic = topic
        self.producer = producer
        self.clock = clock

    @property
    def partitions(self) -> int:
        return self.topic.partitions

    def end_offset(self, partition: int) -> int:
        return self.topic.end_offset(partition)

    def read(self, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        return self.topic.read_range(partition, start, end)

    def append(self, rows: pa.RecordBatch, partition: int) -> None:
        _send(self.producer, rows, partition, self.clock())


def topic_partitions(options: SinkOptions) -> int:
    """The partitions the rows may name: the topic's, or 1 for a topic the write will create."""
    from seglog.errors import TopicNotFoundError
    with connect(options.location) as session:
        try:
            return len(session.admin.topics.offsets(options.topic))
        except TopicNotFoundError:
            return 1


def checked(partitions: int, iterator: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A task's rows, checked and in the staged form."""
    return (staged_rows(batch, partitions) for batch in iterator)


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


def _send(producer: Any, rows: pa.RecordBatch, partition: int, now: int) -> None:
    """Staged rows as one send_batch call (a null timestamp: `now`, the time of the send)."""
    values, keys, timestamps, properties = send_arguments(rows, now)
    producer.send_batch(values, partition=partition, keys=keys, timestamps=timestamps, properties=properties)


class _LocalWrites:
    """Writes to a data directory this machine sees: tasks stage to files there, the driver publishes here."""

    def __init__(self, path: str) -> None:
        self.path = path

    def stage(self, write_id: str, topic: str, task: int, attempt: int,
              batches: Iterator[pa.RecordBatch]) -> StagedFile:
        return stage(str(write_directory(self.path, write_id)), task, attempt, batches, STAGED)

    def publish(self, write_id: str, topic: str, attempts: list[StagedFile], sink: str | None,
                batch_id: int) -> None:
        directory = write_directory(self.path, write_id)
        try:
            batches = staged_batches((a.task, attempt_file(directory, a.task, a.attempt)) for a in attempts)
            publish(self.path, topic, batches, None if sink is None else SinkJournal(self.path, sink), batch_id)
        finally:
            self.abort(write_id)

    def abort(self, write_id: str) -> None:
        remove(write_directory(self.path, write_id))


def _writes(options: SinkOptions) -> _LocalWrites | RemoteWrites:
    """Where the sink's tasks stage and its driver publishes: the data directory, or the server."""
    if options.location.remote:
        return RemoteWrites(options.location.resolved())
    assert options.location.path is not None
    return _LocalWrites(options.location.path)


class SeglogWriter(DataSourceArrowWriter):
    """A batch write: append only, as to any log."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.writes = _writes(options)
        self.partitions = topic_partitions(options)
        self.write_id = new_write_id()

    # pyspark declares the Arrow writers' write() with Arrow batches, narrowing its base's Rows
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:  # type: ignore[override]
        context = _task_context()
        return self.writes.stage(self.write_id, self.options.topic, context.partitionId(), context.attemptNumber(),
                                 checked(self.partitions, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.writes.publish(self.write_id, self.options.topic, committed_attempts(messages), None, -1)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.writes.abort(self.write_id)


class SeglogStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink: each micro-batch staged by its tasks and published once by the driver."""

    def __init__(self, options: SinkOptions, sink_id: str) -> None:
        self.options = options
        self.sink_id = sink_id
        self.writes = _writes(options)
        self.partitions = topic_partitions(options)

    # pyspark declares the Arrow writers' write() with Arrow batches, narrowing its base's Rows
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:  # type: ignore[override]
        context = _task_context()
        return self.writes.stage(micro_batch_write_id(self.sink_id, _micro_batch_id()), self.options.topic,
                                 context.partitionId(), context.attemptNumber(), checked(self.partitions, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        self.writes.publish(micro_batch_write_id(self.sink_id, batchId), self.options.topic,
                            committed_attempts(messages), self.sink_id, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self.writes.abort(micro_batch_write_id(self.sink_id, batchId))


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
