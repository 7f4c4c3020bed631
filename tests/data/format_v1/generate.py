"""Writes the partitions of tests/data/format_v1/: record batches of format version 1, as seglog wrote them
before format version 2 existed (the committed files were made by commit 18301d2).

Do not regenerate them with newer code: they are the test that newer code reads what older code wrote.
`write(data)` is kept importable, so tests/storage/test_format_versions.py can also check that today's
code, given the same inputs and clock, still writes these bytes exactly (a batch that uses nothing of
version 2 is written as version 1, docs/FORMAT.md).

    PYTHONPATH=<an 18301d2 checkout>/src python tests/data/format_v1/generate.py

writes the partitions and expected.json (every message as that code read it back)."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

import seglog
from seglog.clock import ManualClock

HERE = Path(__file__).resolve().parent
START_MS = 1_700_000_000_000
# topic -> (its settings, the directory its partition 0 is kept in)
TOPICS = {
    "fixture/v1/create-time": ({"segment_size": "2 KiB"}, "create-time"),
    "fixture/v1/log-append-time": ({"segment_size": "2 KiB", "timestamp_type": "log_append_time"},
                                   "log-append-time"),
}


def write(data: Path) -> None:
    """The same messages into both topics of a new data directory `data`, by a fixed clock."""
    clock = ManualClock(START_MS)
    with seglog.open(data, clock=clock, background=False) as log:
        for name, (settings, _) in TOPICS.items():
            topic = log.create_topic(name, **settings)
            with topic.producer(linger_ms=10_000) as producer:
                for round_ in range(6):
                    first = 10 * round_
                    values = [b"value-%d " % (first + i) * (i % 4) for i in range(10)]
                    producer.send_batch(values, keys=[None if i % 3 == 0 else b"key-%d" % i for i in range(10)],
                                        timestamps=[None if i == 4 else START_MS + first + i for i in range(10)],
                                        properties=[{"i": str(i), "round": str(round_)} if i % 2 else None
                                                    for i in range(10)])
                    clock.advance(7)
                    producer.send_batch(pa.array(["arrow-%d" % i for i in range(5)]))
                    clock.advance(7)
                    for i in range(4):
                        producer.send(b"sent-%d" % i, key=b"k" if i % 2 else None, timestamp=START_MS + i,
                                      properties={"sent": "yes"} if i == 3 else None)
                    producer.flush()
                    clock.advance(7)


def read_back(data: Path) -> dict:
    """Every message of partition 0 of each topic as plain JSON values."""
    expected = {}
    with seglog.open(data, background=False) as log:
        for name, (_, directory) in TOPICS.items():
            reader = log.topic(name).reader("earliest")
            expected[directory] = [{
                "offset": m.offset, "key": None if m.key is None else m.key.hex(), "value": m.value.hex(),
                "timestamp": m.timestamp, "event_time": m.event_time, "properties": m.properties}
                for m in reader]
    return expected


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "data"
        write(data)
        for name, (_, directory) in TOPICS.items():
            source = data.joinpath("topics", *name.split("/"), "0")
            target = HERE / directory
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            for file in sorted(source.iterdir()):
                if file.suffix in (".log", ".index", ".timeindex"):
                    shutil.copyfile(file, target / file.name)
        (HERE / "expected.json").write_text(json.dumps(read_back(data), indent=1, sort_keys=True) + "\n")
    print(f"written with {seglog.__file__}", file=sys.stderr)


if __name__ == "__main__":
    main()
