"""Reading a whole topic of 1M values of 100 B, against a Python loop reading the same values from a file.

The topic is stored in batches of 1,000, 10,000 and 65,536 messages (one send_batch call each), each size
its own group with its own baseline and the same targets ("read: whole topic, 1,000 per call").

baseline  python read loop   `n = struct.unpack('<I', f.read(4))[0]; v = f.read(n)` per message, over the
                             length-prefixed file the append baseline writes (made here, outside the timing)
seglog    read_batch(), CRC32C checked (the default)   >= 20x
          read_batch(), verify_crc=False               >= 50x
          for m in reader (Message objects)            >= 2x

read_batch returns pyarrow RecordBatches over the mapped segment (zero copy), so its cost is the CRC pass
and a few Python calls per stored batch; iteration builds one Message per message.
Each round opens a new reader, as a consumer would; the segments' maps belong to the open log (shared by its
readers), so after the warm-up round the pages are mapped: the rounds measure the read path, not first faults.
The "fresh log" benchmarks pay those too (issue 31): each round opens the data directory as a new Log
(outside the timing) and times a new reader's whole read, its segments mapped and faulted in and their
indexes opened; their first round and the read loop's are also judged on their own (Bench.run's
first_round). All files are in the page cache: this measures the library, not the disk.
"""

from __future__ import annotations

import struct

import pytest

import seglog

GROUP = "read: whole topic"


@pytest.fixture(scope="module")
def baseline_file(scratch, payload):
    """The payload as the append baseline's loop writes it: length-prefixed values."""
    path = scratch / "values.bin"
    with open(path, "wb") as f:
        for v in payload.values:  # noqa: FURB122 (the append baseline's loop)
            f.write(struct.pack('<I', len(v)) + v)
    return path


@pytest.fixture(scope="module")
def stored(scratch, calls, baseline_file):
    """(topic, baseline file) holding the payload: the topic written with send_batch in the call size of
    `calls`, the file with the append baseline's loop."""
    with seglog.open(log_path(scratch, calls)) as log:
        topic = log.create_topic("bench")
        with topic.producer() as producer:
            for chunk in calls.list_chunks:
                producer.send_batch(chunk)
        yield topic, baseline_file


def log_path(scratch, calls):
    return scratch / f"log-{calls.chunk}"


def fresh_log(path, name):
    """setup/teardown pair for bench.run: the data directory opened as a new Log per round, and its topic."""
    def setup():
        log = seglog.open(path)
        return log, log.topic(name)

    def teardown(log, _):
        log.close()
    return setup, teardown


def test_python_read_loop(bench, calls, stored):
    _, path = stored
    n_messages = calls.n

    def read():
        with open(path, "rb") as f:
            for _ in range(n_messages):
                n = struct.unpack('<I', f.read(4))[0]
                v = f.read(n)
        assert len(v) == calls.value_bytes

    bench.baseline(calls.group(GROUP), "python read loop", messages=calls.n, nbytes=calls.nbytes)
    bench.run(read, first_round=True)


def read_batches(topic, **options):
    """A function reading the whole topic with read_batch() (of `topic`, or of the topic it is given)."""
    def read(of=topic):
        reader = of.reader("earliest", **options)
        rows = 0
        while (batch := reader.read_batch()) is not None:
            rows += batch.num_rows
        reader.close()
        return rows
    return read


@pytest.mark.parametrize("verify_crc", [True, False], ids=["crc", "no_crc"])
def test_read_batch(bench, calls, stored, verify_crc):
    topic, _ = stored
    label, target = ("read_batch(), CRC checked", 20) if verify_crc else ("read_batch(), verify_crc=False", 50)
    bench.seglog(calls.group(GROUP), label, messages=calls.n, nbytes=calls.nbytes,
                 at_least={"python read loop": target})
    assert bench.run(read_batches(topic, verify_crc=verify_crc)) == calls.n


@pytest.mark.parametrize("verify_crc", [True, False], ids=["crc", "no_crc"])
def test_read_batch_fresh_log(bench, calls, stored, scratch, verify_crc):
    topic, _ = stored
    label, target = ("read_batch(), CRC checked", 20) if verify_crc else ("read_batch(), verify_crc=False", 50)
    bench.seglog(calls.group(GROUP), f"{label}, fresh log", messages=calls.n, nbytes=calls.nbytes,
                 at_least={"python read loop": target})
    read = read_batches(None, verify_crc=verify_crc)
    setup, teardown = fresh_log(log_path(scratch, calls), topic.name)
    assert bench.run(lambda log, topic: read(topic), setup=setup, teardown=teardown, first_round=True) == calls.n


def test_iterate_messages(bench, calls, stored):
    topic, _ = stored

    def iterate():
        count = 0
        with topic.reader("earliest") as reader:
            for _ in reader:
                count += 1
        return count

    bench.seglog(calls.group(GROUP), "for m in reader", messages=calls.n, nbytes=calls.nbytes,
                 at_least={"python read loop": 2})
    assert bench.run(iterate) == calls.n
