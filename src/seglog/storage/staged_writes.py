"""Rows staged in the data directory by a query engine's tasks until its driver publishes them (the Spark
connector's writes, in-process or through the server's Flight port: storage/publication.py publishes them).

A seglog partition has one writer, while an engine writes from many tasks in several processes and retries a
failed task: so each task attempt stages its rows in a file of its own, Arrow IPC in
DATA/spark-staging/WRITE/TASK-ATTEMPT.arrow, and only the attempts the engine reports as committed are published,
in task order; the others' files go with the directory. WRITE names one write: a batch write's uuid (32 hex
digits), or a streaming sink's id (16 hex digits) and the micro-batch's id, so that a micro-batch replayed has
the same directory. An attempt's file is written under a temporary name and renamed when complete, so a file
present is whole, and a retried attempt replaces only its own."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa

from seglog.errors import InvalidArgumentError, NotFoundError

STAGING_DIRECTORY = "spark-staging"
_STAGED_FIELDS: list[pa.Field] = [  # a list of Fields: each pa.field() call is typed by its own type
    pa.field("value", pa.binary()),
    pa.field("key", pa.binary()),
    pa.field("partition", pa.int32()),
    pa.field("timestamp", pa.int64()),  # ms since the epoch
    pa.field("properties", pa.map_(pa.string(), pa.string())),
]
STAGED = pa.schema(_STAGED_FIELDS)  # the columns of a staged row (what publication.py sends)
WRITE_ID = "a batch write's id (32 lower-case hex digits) or a micro-batch's, SINK-BATCH (16 hex digits, '-', " \
           "the batch id)"
_WRITE_ID = re.compile(r"[0-9a-f]{32}|(?P<sink>[0-9a-f]{16})-(?P<batch>0|[1-9][0-9]{0,17})")
MAX_TASK = 999_999  # task and attempt numbers as the file names hold them
_PARTIAL = ".partial"  # an attempt's file while it is written


def check_write_id(write_id: object) -> str:
    """`write_id` if it names a write (WRITE_ID: nothing else, so never a path outside the staging directory);
    else InvalidArgumentError."""
    if not isinstance(write_id, str) or _WRITE_ID.fullmatch(write_id) is None:
        raise InvalidArgumentError("stage", write_id, WRITE_ID)
    return write_id


def check_sink_id(sink: object) -> str:
    """`sink` if it is a streaming sink's id (16 lower-case hex digits); else InvalidArgumentError."""
    if not isinstance(sink, str) or re.fullmatch(r"[0-9a-f]{16}", sink) is None:
        raise InvalidArgumentError("sink", sink, "a streaming sink's id: 16 lower-case hex digits")
    return sink


def micro_batch_write_id(sink: str, batch_id: int) -> str:
    """The write id of micro-batch `batch_id` of streaming sink `sink` (the same when the engine replays it)."""
    return f"{sink}-{batch_id}"


def write_directory(data_directory: str | os.PathLike[str], write_id: str) -> Path:
    """Where write `write_id` (check_write_id) stages its attempts' files."""
    return Path(data_directory, STAGING_DIRECTORY, check_write_id(write_id))


def attempt_file(directory: str | os.PathLike[str], task: int, attempt: int) -> Path:
    """The file of one task attempt in a write's directory."""
    for name, number in (("task", task), ("attempt", attempt)):
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_TASK:
            raise InvalidArgumentError(name, number, f"an integer from 0 to {MAX_TASK}")
    return Path(directory, f"{task:06d}-{attempt}.arrow")


def stage(path: str | os.PathLike[str], batches: Iterable[pa.RecordBatch], schema: pa.Schema = STAGED) -> Path:
    """Write one attempt's `batches` to `path` (attempt_file), one batch at a time; the file appears when complete,
    replacing an earlier one of the same attempt. An error while writing leaves no file."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(final.name + _PARTIAL)
    try:
        with pa.OSFile(str(partial), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        os.replace(partial, final)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return final


def staged_batches(files: Iterable[tuple[int, str | os.PathLike[str]]]) -> Iterator[pa.RecordBatch]:
    """The rows of the committed attempts' files, (task, file) pairs, in task order. NotFoundError naming a file
    that is not there, before any row is given."""
    ordered = sorted(files, key=lambda pair: pair[0])
    for task, path in ordered:
        if not os.path.isfile(path):
            raise NotFoundError(f"task {task}'s staged rows ({path}) are not there: the attempt did not complete "
                                "its write, or the write was aborted or published already")
    return _rows(path for _, path in ordered)


def _rows(paths: Iterable[str | os.PathLike[str]]) -> Iterator[pa.RecordBatch]:
    for path in paths:
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


def remove(directory: str | os.PathLike[str]) -> None:
    """A write's directory and every attempt's file in it (nothing if it is gone)."""
    shutil.rmtree(directory, ignore_errors=True)


def remove_stale(data_directory: str | os.PathLike[str], older_than_s: float) -> list[str]:
    """Remove the writes whose directory was last changed more than `older_than_s` seconds ago (0: all), left by
    drivers that died before they committed or aborted; the write ids removed."""
    root = Path(data_directory, STAGING_DIRECTORY)
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    cutoff = time.time() - older_than_s
    removed = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime <= cutoff:
            remove(entry.path)
            removed.append(entry.name)
    return sorted(removed)
