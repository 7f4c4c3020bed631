"""The public contract: seglog.open, topics, producers and readers, as a Kafka or Pulsar user uses them."""

import re
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import seglog
from seglog._core import _format
from seglog.errors import (
    ClosedError,
    InvalidArgumentError,
    InvalidNameError,
    MetadataError,
    SeglogError,
    TopicExistsError,
    TopicInUseError,
    TopicNotFoundError,
)


def test_bare_names_live_in_public_default_and_namespaces_are_created(log):
    log.create_topic("orders")
    log.create_topic("acme/billing/invoices", partitions=3)
    assert log.list_topics() == ["acme/billing/invoices", "public/default/orders"]
    assert log.topic("public/default/orders").name == "public/default/orders"
    assert log.topic("persistent://acme/billing/invoices").partitions == 3


@pytest.mark.parametrize("name", ["", "../x", "a/../b", "a//b", "/abs", "x\x00", "a b", "t/n"])
def test_bad_topic_names_are_refused(log, name):
    with pytest.raises(InvalidNameError):
        log.create_topic(name)
    assert log.list_topics() == []


@pytest.mark.parametrize("options, argument", [
    ({"partitions": 0}, "partitions"), ({"partitions": "2"}, "partitions"),
    ({"segment_size": "huge"}, "segment_size"), ({"segment_size": 10}, "segment_size"),
    ({"timestamp_type": "now"}, "timestamp_type"), ({"fsync": "sometimes"}, "fsync"),
    ({"segment_max_messages": -5}, "segment_max_messages"), ({"retention": 1}, "topic setting"),
])
def test_bad_topic_settings_are_refused_and_nothing_is_created(log, options, argument):
    with pytest.raises(InvalidArgumentError, match=argument) as raised:
        log.create_topic("t", **options)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, SeglogError)
    assert "accepted" in str(raised.value)
    assert log.list_topics() == []


def test_duplicate_and_missing_topics(log):
    log.create_topic("t")
    with pytest.raises(TopicExistsError):
        log.create_topic("t")
    with pytest.raises(TopicNotFoundError, match="public/default/nope"):
        log.topic("nope")


def test_topics_and_settings_survive_reopen(tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("t", partitions=2, segment_size="10 MiB", timestamp_type="log_append_time")
    with seglog.open(tmp_path) as log:
        topic = log.topic("t")
        assert (topic.partitions, topic.config.segment_size, topic.config.timestamp_type) == \
            (2, 10 << 20, "log_append_time")


def test_a_corrupt_metadata_file_is_a_seglog_error_naming_it(tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("t")
    for leftover in tmp_path.glob("meta.sqlite-*"):  # the write-ahead log of the last open
        leftover.unlink()
    (tmp_path / "meta.sqlite").write_bytes(b"\0" * 100 + b"not a database" * 100)
    with pytest.raises(MetadataError, match=re.escape(f"{tmp_path / 'meta.sqlite'}: ")):
        seglog.open(tmp_path)


def test_broker_defaults_apply_to_topics_without_their_own_setting(tmp_path):
    with seglog.open(tmp_path, segment_size="2 MiB") as log:
        assert log.create_topic("a").config.segment_size == 2 << 20
        assert log.create_topic("b", segment_size="4 MiB").config.segment_size == 4 << 20
    with pytest.raises(InvalidArgumentError, match="broker setting"):
        seglog.open(tmp_path, colour="blue")


def test_delete_topic_removes_its_data(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send(b"x")
        with pytest.raises(TopicInUseError, match="producer"):
            log.delete_topic("t")
    directory = topic.partition_directory(0)
    log.delete_topic("t")
    assert not directory.exists() and log.list_topics() == []
    with pytest.raises(TopicNotFoundError):
        log.delete_topic("t")
    assert log.create_topic("t").end_offset() == 0


def test_key_picks_the_partition_as_kafka_does(log):
    topic = log.create_topic("t", partitions=4)
    with topic.producer() as producer:
        ids = [producer.send(b"v", key=key) for key in (b"21", b"foobar", b"abc")]
    expected = [(_format.murmur2(k) & 0x7FFFFFFF) % 4 for k in (b"21", b"foobar", b"abc")]
    assert [i.partition for i in ids] == expected == [0, 2, 3]


def test_without_key_messages_go_round_robin_and_batches_per_call(log):
    topic = log.create_topic("t", partitions=3)
    with topic.producer() as producer:
        assert [producer.send(b"v").partition for _ in range(6)] == [0, 1, 2, 0, 1, 2]
        assert [producer.send_batch([b"a", b"b"]).partition for _ in range(3)] == [0, 1, 2]
        assert producer.send(b"v", partition=2).partition == 2


def test_keyed_send_batch_spreads_by_key_and_keeps_order(log):
    topic = log.create_topic("t", partitions=3)
    keys = [b"k%d" % (i % 7) for i in range(100)]
    values = [b"v%d" % i for i in range(100)]
    with topic.producer() as producer:
        producer.send_batch(values, keys=keys)
    seen = []
    for partition in range(3):
        messages = list(topic.reader("earliest", partition))
        assert all(_format.partition_for_key(m.key, 3) == partition for m in messages)
        assert [int(m.value[1:]) for m in messages] == sorted(int(m.value[1:]) for m in messages)
        seen += [m.value for m in messages]
    assert sorted(seen) == sorted(values)


def test_send_offsets_are_known_at_once_and_visible_after_flush(log):
    topic = log.create_topic("t")
    with topic.producer(linger_ms=60_000) as producer:
        ids = [producer.send(b"m%d" % i) for i in range(5)]
        assert [i.offset for i in ids] == [0, 1, 2, 3, 4]
        assert topic.end_offset() == 0  # queued, not yet written
        producer.flush()
        assert topic.end_offset() == 5
    assert [m.value for m in topic.reader()] == [b"m%d" % i for i in range(5)]


def test_batch_size_writes_a_full_batch_without_flush(log):
    topic = log.create_topic("t")
    with topic.producer(batch_size=1000, linger_ms=60_000) as producer:
        for _ in range(10):
            producer.send(b"x" * 100)
        assert topic.end_offset() == 10


def test_linger_writes_queued_messages_in_the_background(log):
    topic = log.create_topic("t")
    with topic.producer(linger_ms=5) as producer:
        producer.send(b"lingered")
        batch = topic.reader().read_batch(timeout=5)
        assert batch is not None and batch.column("value").to_pylist() == [b"lingered"]


def test_linger_follows_the_batch_being_gathered_and_never_splits_one_early(log):
    # One background call per partition at a time: it follows the batch gathered since the one it was
    # asked for. A batch must be written once it has lingered, and not before it has.
    topic = log.create_topic("t")
    with topic.producer(linger_ms=1000, batch_size=2) as producer:
        producer.send(b"a"), producer.send(b"b")  # full: written at once, its linger call stays due (at 1 s)
        time.sleep(0.5)
        producer.send(b"c")  # a new batch: due at 1.5 s, not when the first call comes
        time.sleep(0.7)
        assert topic.end_offset() == 2
        reader = topic.reader(2)
        batch = reader.read_batch(timeout=5)
        assert batch.column("value").to_pylist() == [b"c"]


def test_reader_start_positions(log, clock):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch([b"a", b"b", b"c"], timestamps=[100, 200, 300])
        producer.send_batch([b"d"], timestamps=[400])
    assert [m.value for m in topic.reader("earliest")] == [b"a", b"b", b"c", b"d"]
    assert list(topic.reader("latest")) == []
    assert [m.value for m in topic.reader(2)] == [b"c", b"d"]
    assert [m.value for m in topic.reader({"timestamp": 150})] == [b"b", b"c", b"d"]
    assert [m.value for m in topic.reader({"timestamp": 400})] == [b"d"]
    assert list(topic.reader({"timestamp": 401})) == []
    for bad in ("first", -1, {"time": 5}, 1.5, True):
        with pytest.raises(InvalidArgumentError, match="start"):
            topic.reader(bad)
    with pytest.raises(InvalidArgumentError, match="partition"):
        topic.reader(partition=1)


@pytest.mark.parametrize("start", [2**63, -1, {"timestamp": 2**63}, {"timestamp": -1}, 1.0])
def test_reader_starts_beyond_int64_offsets_are_refused(log, start):
    topic = log.create_topic("t")
    with pytest.raises(InvalidArgumentError, match="invalid start .*an int from 0 to 9223372036854775807"):
        topic.reader(start)
    with pytest.raises(InvalidArgumentError, match="invalid offset 9223372036854775808"):
        topic.reader().seek(2**63)


def test_read_batch_slices_and_ends_with_none(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch([b"%d" % i for i in range(10)])
    reader = topic.reader(3)
    first = reader.read_batch(max_messages=4)
    assert first.column("offset").to_pylist() == [3, 4, 5, 6]
    assert reader.read_batch().column("offset").to_pylist() == [7, 8, 9]
    assert reader.read_batch() is None


def test_read_batch_goes_on_batch_by_batch_through_seeks_slices_rolls_and_appends(log):
    # Reading on from the last batch takes a shortcut (Reader._following_batch): whatever moves the
    # reader or the log in between, it must return what a fresh lookup of its offset would.
    topic = log.create_topic("t", segment_size="4 KiB")
    producer = topic.producer()
    for first in range(0, 60, 6):
        producer.send_batch([b"%300d" % i for i in range(first, first + 6)])  # two batches a segment
    reader = topic.reader()
    offsets = []

    def read(**options):
        batch = reader.read_batch(**options)
        offsets.extend(batch.column("offset").to_pylist())

    read(), read(), read(max_messages=2), read(), read()
    reader.seek(40)
    read(), read()
    producer.send_batch([b"late"] * 3)
    producer.flush()
    while (batch := reader.read_batch()) is not None:
        offsets.extend(batch.column("offset").to_pylist())
    assert offsets == list(range(0, 24)) + list(range(40, 63))
    assert len(topic.partition_view(0).bases) > 1  # the reads crossed segment rolls
    producer.close()


def test_read_batch_waits_for_new_data_with_a_timeout(log):
    topic = log.create_topic("t")
    reader = topic.reader("latest")
    assert reader.read_batch() is None
    started = time.monotonic()
    assert reader.read_batch(timeout=0.05) is None
    assert time.monotonic() - started >= 0.05
    with topic.producer() as producer:
        threading.Timer(0.05, lambda: producer.send_batch([b"late"])).start()
        batch = reader.read_batch(timeout=5)
    assert batch.column("value").to_pylist() == [b"late"]


def test_read_batch_is_zero_copy_over_the_map(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch([b"x" * 100] * 1000, keys=[b"k"] * 1000)
    reader = topic.reader()
    batch = reader.read_batch()
    whole = pa.py_buffer(reader._view.views[0].data)  # the segment's map as one Arrow buffer
    for column in ("value", "key", "timestamp"):
        for buffer in batch.column(column).buffers()[1:]:
            assert whole.address <= buffer.address < whole.address + whole.size


def test_batches_outlive_reader_log_and_segment_files(tmp_path):
    with seglog.open(tmp_path) as log:
        topic = log.create_topic("t")
        with topic.producer() as producer:
            producer.send_batch([b"kept-%d" % i for i in range(1000)])
        reader = topic.reader()
        batch = reader.read_batch()
        reader.close()
        log.delete_topic("t")
    assert batch.column("value")[999].as_py() == b"kept-999"


def test_messages_carry_every_field(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send(b"v1", key=b"k", timestamp=1234, properties={"a": "b"})
        producer.send("text value")
    first, second = topic.reader()
    assert (first.partition, first.offset, first.key, first.value) == (0, 0, b"k", b"v1")
    assert (first.timestamp, first.event_time, first.properties) == (1234, 1234, {"a": "b"})
    assert first.message_id == seglog.MessageId(0, 0) == (0, 0)
    assert (second.key, second.value, second.event_time, second.properties) == (None, b"text value", None, {})
    assert second.timestamp == log.clock()


def test_log_append_time_uses_the_clock_and_keeps_the_producer_time_as_event_time(log, clock):
    topic = log.create_topic("t", timestamp_type="log_append_time")
    with topic.producer() as producer:
        producer.send_batch([b"a"], timestamps=[5])
        clock.advance(seconds=10)
        producer.send(b"b", timestamp=6)
    a, b = topic.reader()
    assert (a.timestamp, a.event_time) == (clock() - 10_000, 5)
    assert (b.timestamp, b.event_time) == (clock(), 6)


def test_send_batch_accepts_arrow_numpy_and_properties(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch(pa.array([b"a", b"b"]), keys=pa.array([b"k", None]),
                            timestamps=np.array([1, 2]), properties=[{"x": "1"}, None])
        producer.send_batch(np.frombuffer(b"abcdef", dtype="S3"))
    messages = list(topic.reader())
    assert [(m.key, m.value, m.timestamp, m.properties) for m in messages] == [
        (b"k", b"a", 1, {"x": "1"}), (None, b"b", 2, {}), (None, b"abc", log.clock(), {}),
        (None, b"def", log.clock(), {})]


@pytest.mark.parametrize("call, argument", [
    (lambda p: p.send(42), "value"),
    (lambda p: p.send(b"v", key=3), "key"),
    (lambda p: p.send(b"v", partition=5), "partition"),
    (lambda p: p.send(b"v", timestamp=-1), "timestamp"),
    (lambda p: p.send(b"v", properties={"a": 1}), "properties"),
    (lambda p: p.send_batch([b"v"], partition=-1), "partition"),
    (lambda p: p.send_batch("not a list"), "values"),
    (lambda p: p.send_batch([b"a", b"b"], keys=[b"k"]), "keys"),
])
def test_bad_send_arguments_are_refused_and_nothing_is_written(log, call, argument):
    topic = log.create_topic("t", partitions=2)
    with topic.producer() as producer:
        with pytest.raises(InvalidArgumentError, match=argument):
            call(producer)
        producer.flush()
    assert topic.end_offset(0) == topic.end_offset(1) == 0


@pytest.mark.parametrize("values", [[], np.zeros((0, 4), dtype=np.uint8), pa.array([], pa.binary())])
def test_an_empty_send_batch_is_refused_and_takes_no_offset(log, values):
    topic = log.create_topic("t", partitions=2)
    with topic.producer() as producer:
        with pytest.raises(InvalidArgumentError, match="at least one message"):
            producer.send_batch(values, partition=0)
        with pytest.raises(InvalidArgumentError, match="at least one message"):
            producer.send_batch(values, keys=values)
        assert producer.send(b"x", partition=0) == seglog.MessageId(0, 0)
    assert [m.value for m in topic.reader(0)] == [b"x"]


@pytest.mark.parametrize("bad, argument", [
    ({"properties": {"k": "\ud800"}}, "properties['k']"),
    ({"properties": {"\udcff": "v"}}, "properties"),
    ({"key": "\ud800"}, "key"),
    ({"value": "x\udcff"}, "value"),
])
def test_an_unencodable_str_is_refused_at_send_and_takes_no_queued_message_with_it(log, bad, argument):
    topic = log.create_topic("t")
    with topic.producer(linger_ms=60_000) as producer:
        producer.send(b"before")
        with pytest.raises(InvalidArgumentError, match=re.escape(f"invalid {argument} ")) as raised:
            producer.send(**{"value": b"bad", **bad})
        assert "surrogate" in str(raised.value)
        assert producer.send(b"after") == seglog.MessageId(0, 1)
    assert [m.value for m in topic.reader()] == [b"before", b"after"]


# Kafka's partitions for these keys over 4 partitions are 0, 2 and 3: the bad third element's partition is
# written last, so a check per partition would have written the other two already.
KEYS_ON_THREE_PARTITIONS = [b"21", b"foobar", b"abc"]


@pytest.mark.parametrize("bad, argument", [
    ({"values": [b"a", b"b", 7]}, "values[2]"),
    ({"keys": [*KEYS_ON_THREE_PARTITIONS[:2], "\ud800"]}, "keys[2]"),
    ({"timestamps": [1, 2, -3]}, "timestamps[2]"),
    ({"timestamps": [None, 2, 1.5]}, "timestamps[2]"),
    ({"properties": [None, {"k": "v"}, {"k": "\ud800"}]}, "properties[2]"),
])
def test_a_keyed_send_batch_with_one_bad_element_writes_nothing_and_names_its_index(log, bad, argument):
    topic = log.create_topic("t", partitions=4)
    assert [_format.partition_for_key(k, 4) for k in KEYS_ON_THREE_PARTITIONS] == [0, 2, 3]
    call = {"values": [b"a", b"b", b"c"], "keys": KEYS_ON_THREE_PARTITIONS, **bad}
    with topic.producer() as producer:
        with pytest.raises(InvalidArgumentError, match=re.escape(f"invalid {argument} ")):
            producer.send_batch(call.pop("values"), **call)
    assert [topic.end_offset(p) for p in range(4)] == [0, 0, 0, 0]


@pytest.mark.parametrize("timestamps", [[None, 7], pa.array([None, 7], pa.int64())])
def test_a_missing_timestamp_in_send_batch_means_the_append_time(log, clock, timestamps):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch([b"a", b"b"], timestamps=timestamps)
    assert [(m.timestamp, m.event_time) for m in topic.reader()] == [(clock(), None), (7, 7)]


@pytest.mark.parametrize("timestamps, argument", [
    ([None, 1.7], "timestamps[1]"), ([None, 2**70], "timestamps[1]"), ([2**63, 1], "timestamps[0]"),
    ([5, -1], "timestamps[1]"), ([5, 2.0], "timestamps[1]"),
    (np.array([1.5, 2.0]), "timestamps[0]"), (np.array([2**64 - 1, 1], dtype=np.uint64), "timestamps[0]"),
])
def test_timestamps_that_are_not_int64_ms_are_refused(log, timestamps, argument):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        with pytest.raises(InvalidArgumentError, match=re.escape(f"invalid {argument} ")):
            producer.send_batch([b"a", b"b"], timestamps=timestamps)
    assert topic.end_offset() == 0


def test_closed_handles_refuse_use(log):
    topic = log.create_topic("t")
    producer = topic.producer()
    producer.close()
    with pytest.raises(ClosedError):
        producer.send(b"x")
    with pytest.raises(ClosedError):
        producer.send_batch([b"x"])
    reader = topic.reader()
    reader.close()
    with pytest.raises(ClosedError):
        reader.read_batch()
    log.close()
    with pytest.raises(ClosedError):
        log.topic("t")


def test_many_producers_in_one_process_share_the_writer(log):
    topic = log.create_topic("t")
    producers = [topic.producer() for _ in range(4)]

    def work(producer, tag):
        for i in range(500):
            producer.send(tag + b"%d" % i)
        producer.flush()

    threads = [threading.Thread(target=work, args=(p, b"p%d-" % n)) for n, p in enumerate(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for producer in producers:
        producer.close()
    messages = list(topic.reader())
    assert [m.offset for m in messages] == list(range(2000))
    for n in range(4):
        mine = [int(m.value.split(b"-")[1]) for m in messages if m.value.startswith(b"p%d-" % n)]
        assert mine == list(range(500))


def test_a_producer_closed_after_its_log_is_closed_quietly(tmp_path):
    log = seglog.open(tmp_path)
    producer = log.create_topic("t", partitions=2).producer()
    producer.send(b"written at the log's close", partition=1)
    log.close()
    producer.close()  # its writers went with the log
    with seglog.open(tmp_path) as reopened:
        assert [m.value for m in reopened.topic("t").reader("earliest", partition=1)] == [b"written at the log's close"]
