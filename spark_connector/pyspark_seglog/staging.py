"""What a Spark task attempt staged (seglog.storage.staged_writes: each attempt's rows in a file of its own, in
DATA/spark-staging/WRITE/, published by the driver in task order, only for the attempts Spark reports as
committed), as the message write() hands to the driver's commit(); and the staging directories of a data
directory this machine sees."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from seglog.storage.staged_writes import STAGING_DIRECTORY, attempt_file, micro_batch_write_id, write_directory
from seglog.storage.staged_writes import stage as stage_file

__all__ = ["STAGING_DIRECTORY", "StagedFile", "committed_attempts", "micro_batch_directory", "new_write_id", "stage"]


@dataclass(frozen=True)
class StagedFile(WriterCommitMessage):
    """What one task attempt staged: its file is attempt_file(the write's directory, task, attempt)."""
    task: int
    attempt: int


def new_write_id() -> str:
    """The id of one batch write, a fresh one (its directory is made by the first task that stages)."""
    return uuid.uuid4().hex


def micro_batch_directory(data_directory: str, sink: str, batch_id: int) -> str:
    """The staging directory of one micro-batch of a streaming query (the same when Spark replays it)."""
    return str(write_directory(data_directory, micro_batch_write_id(sink, batch_id)))


def stage(directory: str, task: int, attempt: int, batches: Iterable[pa.RecordBatch],
          schema: pa.Schema) -> StagedFile:
    """Write one task attempt's batches to a file of its own in `directory`."""
    stage_file(attempt_file(directory, task, attempt), batches, schema)
    return StagedFile(task, attempt)


def committed_attempts(messages: Iterable[WriterCommitMessage | None]) -> list[StagedFile]:
    """The attempts Spark committed, in task order (it passes None for a task that failed; the others are the
    StagedFiles the tasks' write() returned)."""
    return sorted((m for m in messages if isinstance(m, StagedFile)), key=lambda m: m.task)
