"""Rows written by Spark tasks, staged in the data directory until the driver publishes them.

A seglog partition has one writer, while Spark writes from many tasks in several processes, and retries a
failed task: so each task attempt writes its rows to a file of its own (Arrow IPC, in
DATA/spark-staging/WRITE/), and only the attempts Spark reports as committed are published, by the
driver, in task order; the others' files are removed with the directory."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

STAGING_DIRECTORY = "spark-staging"


@dataclass(frozen=True)
class StagedFile(WriterCommitMessage):
    """What one task attempt staged."""
    task: int
    path: str


def new_write(data_directory: str) -> str:
    """The staging directory of one batch write, a fresh name (made by the first task that stages)."""
    return str(Path(data_directory, STAGING_DIRECTORY, uuid.uuid4().hex))


def micro_batch_directory(data_directory: str, sink: str, batch_id: int) -> str:
    """The staging directory of one micro-batch of a streaming query (the same when Spark replays it)."""
    return os.path.join(data_directory, STAGING_DIRECTORY, f"{sink}-{batch_id}")


def stage(directory: str, task: int, attempt: int, batches: Iterable[pa.RecordBatch],
          schema: pa.Schema) -> StagedFile:
    """Write one task attempt's batches to a file of its own in `directory`."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{task:06d}-{attempt}.arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return StagedFile(task, path)


def staged_batches(messages: Iterable[WriterCommitMessage | None]) -> Iterator[pa.RecordBatch]:
    """The committed attempts' rows, in task order (Spark passes None for a task that failed; the others
    are the StagedFiles the tasks' write() returned)."""
    for message in sorted((m for m in messages if isinstance(m, StagedFile)), key=lambda m: m.task):
        with pa.memory_map(message.path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


def remove(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)
