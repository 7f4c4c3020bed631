"""Reading a whole topic of 1M values of 100 B, against a Python loop reading the same values from a file.

baseline  python read loop   `n = struct.unpack('<I', f.read(4))[0]; v = f.read(n)` per message, over the
                             length-prefixed file the append baseline writes (made here, outside the timing)
seglog    read_batch(), CRC32C checked (the default)   >= 20x
          read_batch(), verify_crc=False               >= 50x
          for m in reader (Message objects)            >= 2x

read_batch returns pyarrow RecordBatches over the mapped segment (zero copy), so its cost is the CRC pass
and a few Python calls per stored batch (64k messages each here); iteration builds one Message per message.
Each round opens a new reader (new maps, so the page-cache pages are mapped again), as a consumer would.
All files are in the page cache: this measures the library, not the disk.
"""

from __future__ import annotations

import struct

import pytest

import seglog

GROUP = "read: whole topic"


@pytest.fixture(scope="module")
def stored(scratch, payload):
    """(topic, baseline file) holding the payload: the topic written with send_batch, the file with the
    append baseline's loop."""
    baseline_file = scratch / "values.bin"
    with open(baseline_file, "wb") as f:
        for v in payload.values:  # noqa: FURB122 (the append baseline's loop)
            f.write(struct.pack('<I', len(v)) + v)
    with seglog.open(scratch / "log") as log:
        topic = log.create_topic("bench")
        with topic.producer() as producer:
            for chunk in payload.list_chunks:
                producer.send_batch(chunk)
        yield topic, baseline_file


def test_python_read_loop(bench, payload, stored):
    _, path = stored
    n_messages = payload.n

    def read():
        with open(path, "rb") as f:
            for _ in range(n_messages):
                n = struct.unpack('<I', f.read(4))[0]
                v = f.read(n)
        assert len(v) == payload.value_bytes

    bench.baseline(GROUP, "python read loop", messages=payload.n, nbytes=payload.nbytes)
    bench.run(read)


def read_batches(topic, **options):
    def read():
        reader = topic.reader("earliest", **options)
        rows = 0
        while (batch := reader.read_batch()) is not None:
            rows += batch.num_rows
        reader.close()
        return rows
    return read


@pytest.mark.parametrize("verify_crc", [True, False], ids=["crc", "no_crc"])
def test_read_batch(bench, payload, stored, verify_crc):
    topic, _ = stored
    label, target = ("read_batch(), CRC checked", 20) if verify_crc else ("read_batch(), verify_crc=False", 50)
    bench.seglog(GROUP, label, messages=payload.n, nbytes=payload.nbytes,
                 at_least={"python read loop": target})
    assert bench.run(read_batches(topic, verify_crc=verify_crc)) == payload.n


def test_iterate_messages(bench, payload, stored):
    topic, _ = stored

    def iterate():
        count = 0
        with topic.reader("earliest") as reader:
            for m in reader:
                count += 1
        return count

    bench.seglog(GROUP, "for m in reader", messages=payload.n, nbytes=payload.nbytes,
                 at_least={"python read loop": 2})
    assert bench.run(iterate) == payload.n
