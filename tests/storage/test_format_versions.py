"""Format versions 1 and 2 in real partitions (docs/FORMAT.md, Versions): the committed version-1 partitions
of tests/data/format_v1/ read exactly and are still written byte for byte; version-2 batches (null values,
ordering keys, batch attributes) written by PartitionWriter and producers, read back as Messages, Arrow
columns over the map and Reader.batch_infos; segments holding both versions read, checked, repaired and
re-indexed; a crash in the middle of a version-2 append loses only that append; a damaged offsets
section with a sound CRC is reported with its file and position."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import signal
import struct
import subprocess
from pathlib import Path

import crc32c as crc32c_reference
import numpy as np
import pyarrow as pa
import pytest

import seglog
from helpers_storage import (
    partition_dir,
    partition_writer,
    python_command,
    segment_logs,
    spawn_call,
    walk_batches,
)
from seglog._core import _format
from seglog.errors import CorruptLogError, InvalidArgumentError
from seglog.storage import reader as reader_module
from seglog.storage.check import check_log, repair_log
from seglog.storage.reader import BatchInfo

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "format_v1"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
TOPIC = "acme/formats/v2"


def _generator():
    spec = importlib.util.spec_from_file_location("format_v1_generate", FIXTURE / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


def install_fixture(data: Path) -> None:
    """A data directory with the fixture's topics, partition 0 of each the committed version-1 files, closed
    cleanly as the generator left them."""
    with seglog.open(data, background=False) as log:
        for name, (settings, _) in GENERATOR.TOPICS.items():
            log.create_topic(name, **settings)
    for name, (_, directory) in GENERATOR.TOPICS.items():
        target = partition_dir(data, name)
        target.mkdir()
        for file in (FIXTURE / directory).iterdir():
            shutil.copyfile(file, target / file.name)
        (target / ".clean-shutdown").touch()


def as_json(message: seglog.Message) -> dict:
    """A message as the generator's expected.json has it."""
    return {"offset": message.offset, "key": None if message.key is None else message.key.hex(),
            "value": message.value.hex(), "timestamp": message.timestamp, "event_time": message.event_time,
            "properties": message.properties}


def batch_versions(directory: Path) -> list[set[int]]:
    """The format versions of the batches of each segment of a partition, read from the files."""
    found = []
    for log_file in segment_logs(directory):
        data = log_file.read_bytes()
        found.append({struct.unpack_from("<H", data, b.position + 4)[0] for b in walk_batches(log_file)})
    return found


def arrow_rows(topic: seglog.Topic) -> dict[str, list]:
    """Every row of partition 0 through read_batch, column by column (timestamps as ms)."""
    columns: dict[str, list] = {"offset": [], "timestamp": [], "key": [], "value": [], "properties": []}
    reader = topic.reader("earliest")
    while (batch := reader.read_batch()) is not None:
        for name in columns:
            column = batch.column(name)
            if name == "timestamp":
                column = column.cast(pa.int64())
            columns[name].extend(column.to_pylist())
    return columns


# --- the version-1 fixture ------------------------------------------------------------------------------

def test_the_version_1_fixture_reads_exactly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    install_fixture(data)
    for name in GENERATOR.TOPICS:
        assert batch_versions(partition_dir(data, name)) == [{1}] * 4, "the fixture holds version-1 batches only"
    for background in (False, True):  # as it lies, then after seglog.open's recovery pass
        with seglog.open(data, background=background) as log:
            for name, (_, directory) in GENERATOR.TOPICS.items():
                topic = log.topic(name)
                expected = EXPECTED[directory]
                messages = list(topic.reader("earliest"))
                assert [as_json(m) for m in messages] == expected
                assert all(m.ordering_key is None and m.batch_attributes == {} for m in messages)
                rows = arrow_rows(topic)
                assert rows["offset"] == [m["offset"] for m in expected]
                assert rows["value"] == [bytes.fromhex(m["value"]) for m in expected]
                assert rows["key"] == [None if m["key"] is None else bytes.fromhex(m["key"]) for m in expected]
                assert rows["timestamp"] == [m["timestamp"] for m in expected]
                assert [dict(p or {}) for p in rows["properties"]] == [m["properties"] for m in expected]
                infos = list(topic.reader("earliest").batch_infos())
                assert sum(info.record_count for info in infos) == len(expected)
                assert all(info.attributes == {} for info in infos)
                assert topic.reader({"timestamp": expected[50]["timestamp"]}).offset <= 50
    report = check_log(data)
    assert report.ok, [str(p) for p in report.problems]


def test_todays_writer_still_writes_the_version_1_fixture_byte_for_byte(tmp_path: Path) -> None:
    """A batch using nothing of version 2 is written as version 1, exactly as before (FORMAT.md)."""
    data = tmp_path / "again"
    GENERATOR.write(data)
    for name, (_, directory) in GENERATOR.TOPICS.items():
        written = partition_dir(data, name)
        committed = sorted(p.name for p in (FIXTURE / directory).iterdir())
        assert sorted(p.name for p in written.iterdir() if not p.name.startswith(".")) == committed
        for file_name in committed:
            assert (written / file_name).read_bytes() == (FIXTURE / directory / file_name).read_bytes(), file_name


def test_version_2_batches_after_version_1_ones_are_read_checked_reindexed_and_repaired(tmp_path: Path) -> None:
    data = tmp_path / "data"
    install_fixture(data)
    name, expected = "fixture/v1/create-time", EXPECTED["create-time"]
    first_new = len(expected)
    clock = seglog.ManualClock(GENERATOR.START_MS + 10_000)
    appended = []  # (value, ordering key, attributes) of each message written now
    with seglog.open(data, clock=clock) as log:
        topic = log.topic(name)
        with partition_writer(log, topic) as writer, topic.producer() as producer:
            for i in range(12):
                values = [None if j % 3 == 0 else b"v2-%d-%d" % (i, j) for j in range(6)]
                ordering_keys = [b"ok-%d" % j if j % 2 else None for j in range(6)]
                attributes = {"producer": "remote-1", "sequence_id": str(i)}
                assert writer.append(writer.source(values, ordering_keys=ordering_keys, attributes=attributes)) == \
                    first_new + len(appended)
                appended += [(v, k, attributes) for v, k in zip(values, ordering_keys)]
                producer.send_batch([b"plain-%d" % i])  # version 1, between them
                producer.flush()
                appended.append((b"plain-%d" % i, None, {}))
                clock.advance(1000)
    directory = partition_dir(data, name)
    versions = batch_versions(directory)
    assert {1, 2} in versions, f"no segment holds both versions: {versions}"

    def everything_reads() -> None:
        with seglog.open(data, clock=clock) as log:
            topic = log.topic(name)
            messages = list(topic.reader("earliest"))
            assert [as_json(m) for m in messages[:first_new]] == expected
            assert [(m.value, m.ordering_key, dict(m.batch_attributes)) for m in messages[first_new:]] == appended
            assert arrow_rows(topic)["value"] == [bytes.fromhex(m["value"]) for m in expected] + \
                [value for value, _, _ in appended]
            infos = list(topic.reader(first_new).batch_infos())
            assert [dict(info.attributes) for info in infos] == \
                [a for i in range(12) for a in ({"producer": "remote-1", "sequence_id": str(i)}, {})]
            assert [info.base_offset for info in infos] == [first_new + 7 * (i // 2) + 6 * (i % 2) for i in range(24)]
            assert topic.reader({"timestamp": GENERATOR.START_MS + 10_000 + 5000}).offset == first_new + 5 * 7

    everything_reads()
    report = check_log(data)
    assert report.ok, [str(p) for p in report.problems]
    # An unclean stop with every index file gone: recovery indexes the mixed logs again from their batches.
    for index_file in [*directory.glob("*.index"), *directory.glob("*.timeindex")]:
        index_file.unlink()
    (directory / ".clean-shutdown").unlink()
    everything_reads()
    assert check_log(data).ok
    repaired = repair_log(data)
    assert (repaired.cut_bytes, repaired.damaged, repaired.lost) == (0, [], [])
    everything_reads()


# --- version 2 written and read ------------------------------------------------------------------------

def test_a_writer_append_round_trips_null_values_ordering_keys_and_attributes(log: seglog.Log) -> None:
    topic = log.create_topic("t")
    attributes = {"producer_name": "standalone-0-3", "sequence_id": "41", "replicate_to": "east,west"}
    with partition_writer(log, topic) as writer:
        source = writer.source([b"a", None, b""], keys=[None, b"k", None], timestamps=[1, 2, 3],
                               event_times=[None, 7, None], properties=[None, {"x": "y"}, None],
                               ordering_keys=[b"o", None, b""], attributes=attributes)
        assert source.version == 2
        assert writer.append(source) == 0
        assert writer.append(writer.source([b"plain"])) == 3
        assert writer.append(writer.source([None], attributes={"n": "1"})) == 4
    messages = list(topic.reader())
    assert [(m.offset, m.value, m.key, m.ordering_key, m.timestamp, m.event_time, m.properties)
            for m in messages] == [(0, b"a", None, b"o", 1, None, {}), (1, None, b"k", None, 2, 7, {"x": "y"}),
                                   (2, b"", None, b"", 3, None, {}), (3, b"plain", None, None, messages[3].timestamp,
                                                                      None, {}), (4, None, None, None,
                                                                                  messages[4].timestamp, None, {})]
    assert [dict(m.batch_attributes) for m in messages] == [attributes] * 3 + [{}, {"n": "1"}]
    assert messages[0].batch_attributes is messages[2].batch_attributes
    assert "value=None" in repr(messages[1])
    assert messages[1] == list(topic.reader(1))[0] and messages[1] != messages[4]
    batch = topic.reader().read_batch()
    assert batch.column("value").to_pylist() == [b"a", None, b""] and batch.column("value").null_count == 1
    assert batch.schema.names == ["offset", "timestamp", "key", "value", "properties"]
    assert list(topic.reader().batch_infos()) == [BatchInfo(0, 3, attributes), BatchInfo(3, 1, {}),
                                                  BatchInfo(4, 1, {"n": "1"})]


def test_batch_infos_read_no_message_and_find_the_last_batch(log: seglog.Log, monkeypatch) -> None:
    topic = log.create_topic("t")
    with partition_writer(log, topic) as writer:
        for i in range(5):
            writer.append(writer.source([b"m"] * (i + 1), attributes={"sequence_id": str(i)}))
    monkeypatch.setattr(reader_module, "messages_from_batch", None)  # batch_infos must not need it
    reader = topic.reader(4)  # inside the third batch, [3, 6)
    assert [(i.base_offset, i.record_count, i.attributes["sequence_id"]) for i in reader.batch_infos()] == \
        [(3, 3, "2"), (6, 4, "3"), (10, 5, "4")]
    assert reader.offset == 15 == topic.end_offset()
    assert list(reader.batch_infos()) == []
    last = topic.end_offset() - 1
    assert list(topic.reader(last).batch_infos()) == [BatchInfo(10, 5, {"sequence_id": "4"})]
    assert list(topic.reader("latest").batch_infos()) == []
    with partition_writer(log, topic) as writer:
        writer.append(writer.source([b"n"], attributes={"sequence_id": "5"}))
    assert list(reader.batch_infos()) == [BatchInfo(15, 1, {"sequence_id": "5"})]  # a reader goes on


def test_queued_sends_never_share_a_batch_with_an_append_that_has_attributes(log: seglog.Log) -> None:
    topic = log.create_topic("t")
    with topic.producer(linger_ms=60_000) as producer, partition_writer(log, topic) as writer:
        producer.send(b"q0")
        producer.send(None)
        assert writer.append(writer.source([b"a2", b"a3"], attributes={"producer_name": "remote"})) == 2
        producer.send(b"q4")
    assert list(topic.reader().batch_infos()) == [BatchInfo(0, 2, {}), BatchInfo(2, 2, {"producer_name": "remote"}),
                                                  BatchInfo(4, 1, {})]
    assert [m.value for m in topic.reader()] == [b"q0", None, b"a2", b"a3", b"q4"]


def test_an_append_split_by_a_full_segment_keeps_its_attributes_in_each_part(log: seglog.Log) -> None:
    topic = log.create_topic("t", segment_size="1 KiB")
    with partition_writer(log, topic) as writer:
        writer.append(writer.source([b"x" * 200] * 3))
        writer.append(writer.source([b"y" * 100] * 12, attributes={"sequence_id": "9"}))  # more than a segment
    infos = list(topic.reader(3).batch_infos())
    assert len(infos) > 1 and sum(i.record_count for i in infos) == 12
    assert all(i.attributes == {"sequence_id": "9"} for i in infos)


def test_producers_send_null_values_apart_from_empty_ones(log: seglog.Log) -> None:
    topic = log.create_topic("t", partitions=3)
    with topic.producer() as producer:
        producer.send(None, partition=0)
        producer.send(b"", partition=0)
        producer.send("text", key="k", partition=0)
        producer.send_batch([None, b"x", None], partition=1)
        producer.send_batch(pa.array([b"y", None]), partition=1)
        producer.send_batch([None, b"for b", None, b"for c"], keys=[b"a", b"b", None, b"c"])  # spread by key
        with pytest.raises(InvalidArgumentError, match="bytes, bytearray, memoryview, str or None"):
            producer.send(42)
    assert [m.value for m in topic.reader(0, partition=0)][:3] == [None, b"", b"text"]
    assert [m.value for m in topic.reader(0, partition=1)][:5] == [None, b"x", None, b"y", None]
    batch = topic.reader(0, partition=1).read_batch()
    assert batch.column("value").to_pylist() == [None, b"x", None] and batch.column("value").null_count == 2
    keyed = {m.key: m.value for p in range(3) for m in topic.reader(0, partition=p) if m.offset >= (3, 5, 0)[p]}
    assert keyed == {b"a": None, b"b": b"for b", None: None, b"c": b"for c"}


def test_a_null_value_passes_the_backlog_quota_check(log: seglog.Log) -> None:
    log.admin.namespaces.set_backlog_quota("public/default", policy="producer_exception", limit="10 KiB")
    topic = log.create_topic("q")
    topic.subscribe("s", initial_position="earliest").close()
    with topic.producer() as producer:
        assert producer.send(None) == (0, 0)
        producer.send_batch([None, b"v"])
    assert [m.value for m in topic.reader()] == [None, None, b"v"]


def test_read_batch_wraps_the_value_validity_of_the_mapped_segment(log: seglog.Log) -> None:
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch([None, b"abc", b""] * 40)
    reader = topic.reader()
    view, position, _, count = reader.locate(0)
    layout = _format.batch_layout(view.data, position)
    batch_start = np.frombuffer(view.data, dtype=np.uint8, count=1, offset=position).ctypes.data
    value = reader.read_batch().column("value")
    validity, offsets, data = value.buffers()
    assert (validity.address, offsets.address, data.address) == tuple(
        batch_start + layout[section] for section in ("value_validity", "value_offsets", "value_data"))
    assert value.null_count == 40 and len(value) == count == 120


# --- damage and crashes ---------------------------------------------------------------------------------

def as_version_1(raw: bytearray, position: int) -> str:
    """The version-2 batch at `position` marked as version 1, its CRC sound again; the reason it is invalid."""
    struct.pack_into("<H", raw, position + 4, 1)
    return "flags not valid for the batch's format version"


def damaged_section_offsets(raw: bytearray, position: int) -> str:
    """The last ordering-key offset of the batch at `position` far past it, its CRC sound again."""
    section = _format.batch_layout(bytes(raw), position)["ordering_key_offsets"]
    struct.pack_into("<i", raw, position + section + 8, 1 << 20)
    return "column sections do not fit the batch (a damaged offsets section)"


@pytest.mark.parametrize("damage", [damaged_section_offsets, as_version_1])
def test_an_invalid_batch_with_a_sound_crc_is_reported_with_file_and_position(tmp_path: Path, damage) -> None:
    """Only the layout and flag checks can find these: the CRC is made right again after the edit."""
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC)
        with partition_writer(log, topic) as writer:
            writer.append(writer.source([b"a", b"b"], attributes={"k": "v"}))
            writer.append(writer.source([b"c", None], ordering_keys=[b"o", b"p"], attributes={"k": "w"}))
    (log_file,) = segment_logs(partition_dir(data, TOPIC))
    first, second = walk_batches(log_file)
    raw = bytearray(log_file.read_bytes())
    reason = damage(raw, second.position)
    crc = crc32c_reference.crc32c(bytes(raw[second.position + 12:second.end]))
    struct.pack_into("<I", raw, second.position + 8, crc)
    log_file.write_bytes(raw)

    report = check_log(data)
    assert [(Path(p.path), p.position, p.reason) for p in report.problems] == [(log_file, second.position, reason)]
    with seglog.open(data, background=False) as log:
        reader = log.topic(TOPIC).reader()
        assert reader.read_batch().column("value").to_pylist() == [b"a", b"b"]
        with pytest.raises(CorruptLogError, match=re.escape(reason)) as raised:
            reader.read_batch()
        assert (Path(raised.value.path), raised.value.position) == (log_file, second.position)
        with pytest.raises(CorruptLogError, match=re.escape(reason)):
            list(log.topic(TOPIC).reader(0).batch_infos())
    # After an unclean stop the newest segment's unsound last batch is cut, as any damaged one is.
    (partition_dir(data, TOPIC) / ".clean-shutdown").unlink()
    with seglog.open(data) as log:
        assert [m.value for m in log.topic(TOPIC).reader()] == [b"a", b"b"]
    assert check_log(data).ok


# A writer of version-2 batches that appends 150 messages in two batches and is SIGKILLed. With "unindexed"
# its third batch is copied whole into the segment and it dies before the batch's index entry is published;
# with "torn", half of the third batch's bytes reach the segment.
CRASHING_V2_WRITER = """
import os, signal, sys
import seglog
from seglog.storage import writer as writer_module

data, name, mode = sys.argv[1:4]
log = seglog.open(data)
topic = log.create_topic(name, segment_size="1 MiB")
writer = log._broker.store.acquire_writer(topic.topic_name, 0, topic.config)

def append(sequence, count):
    values = [None if j % 4 == 0 else b"v-%d-%d" % (sequence, j) for j in range(count)]
    ordering_keys = [None if j % 3 == 0 else b"o-%d" % j for j in range(count)]
    return writer.append(writer.source(values, ordering_keys=ordering_keys, attributes={"sequence_id": str(sequence)}))

append(0, 100)
append(1, 50)
if mode in ("unindexed", "torn"):
    def copy_and_die(self, source, start, stop, base_offset):
        staged = bytearray(source.size(start, stop))
        source.write(staged, 0, base_offset, start, stop)
        copied = len(staged) if mode == "unindexed" else len(staged) // 2
        memoryview(self.data)[self.end_position:self.end_position + copied] = staged[:copied]
        os.kill(os.getpid(), signal.SIGKILL)
    writer_module.ActiveSegment.write = copy_and_die
    append(2, 30)
os.kill(os.getpid(), signal.SIGKILL)
"""


def written_by_crashing_writer(sequence: int, count: int) -> list[tuple]:
    return [(None if j % 4 == 0 else b"v-%d-%d" % (sequence, j), None if j % 3 == 0 else b"o-%d" % j,
             {"sequence_id": str(sequence)}) for j in range(count)]


def contents(data: str, background: bool) -> tuple[int, list[tuple], list[tuple]]:
    """In another process: the end offset, every message as (value, ordering key, attributes), and the
    partition's batch infos."""
    with seglog.open(data, background=background) as log:
        topic = log.topic(TOPIC)
        messages = [(m.value, m.ordering_key, dict(m.batch_attributes)) for m in topic.reader()]
        infos = [(i.base_offset, i.record_count, dict(i.attributes)) for i in topic.reader().batch_infos()]
        return topic.end_offset(), messages, infos


@pytest.mark.parametrize("mode", ["unindexed", "torn"])
def test_a_crash_in_the_middle_of_a_version_2_append_loses_only_that_append(tmp_path: Path, mode: str) -> None:
    data = tmp_path / "data"
    result = subprocess.run(python_command(CRASHING_V2_WRITER, str(data), TOPIC, mode), capture_output=True,
                            timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode(errors="replace")
    directory = partition_dir(data, TOPIC)
    (log_file,) = segment_logs(directory)
    assert not (directory / ".clean-shutdown").exists()
    batches = walk_batches(log_file)
    assert [b.next_offset for b in batches] == [100, 150, 180], "the third batch's header was not copied"
    committed = written_by_crashing_writer(0, 100) + written_by_crashing_writer(1, 50)
    infos = [(0, 100, {"sequence_id": "0"}), (100, 50, {"sequence_id": "1"})]

    # before recovery: readers that change nothing, in another process and in this one, and the check
    assert spawn_call(contents, str(data), False) == (150, committed, infos)
    assert contents(str(data), False) == (150, committed, infos)
    report = check_log(data)
    assert report.ok, [str(p) for p in report.problems]
    assert [(Path(n.path), n.position) for n in report.notes] == [(log_file, batches[1].end)]

    with seglog.open(data) as log:  # recovers: the unfinished append is cut, the next one goes there
        topic = log.topic(TOPIC)
        assert list(topic.reader(topic.end_offset() - 1).batch_infos()) == [BatchInfo(100, 50, {"sequence_id": "1"})]
        with partition_writer(log, topic) as writer:
            assert writer.append(writer.source([None, b"after"], attributes={"sequence_id": "2"})) == 150
    assert log_file.read_bytes()[batches[1].end + batches[2].length:].strip(b"\0") == b""
    assert contents(str(data), True) == (152, committed + [(None, None, {"sequence_id": "2"}),
                                                           (b"after", None, {"sequence_id": "2"})],
                                         infos + [(150, 2, {"sequence_id": "2"})])
    report = check_log(data)
    assert report.ok and report.notes == [], [str(p) for p in report.problems + report.notes]
