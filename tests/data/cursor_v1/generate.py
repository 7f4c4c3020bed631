"""Writes tests/data/cursor_v1/: a subscription cursor file of format version 1, as seglog wrote cursors before
version 2 added each partition's flags (the committed file was made by commit 7794008).

Do not regenerate it with newer code: it is the test that newer code reads what older code wrote
(tests/subscriptions/test_subscription_files.py). The subscription `s` of the topic TOPIC (two partitions):
partition 0 had 4 messages expired by the TTL, then acknowledged up to offset 5 and offsets 7 and 9 one by one;
partition 1 had 4 messages expired, nothing acknowledged since.

    PYTHONPATH=<a 7794008 checkout>/src python tests/data/cursor_v1/generate.py

writes s.cursor and expected.json (the cursor as that code read it back)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import seglog
from seglog.clock import ManualClock

HERE = Path(__file__).resolve().parent
TOPIC = "fixture/v1/orders"
START_MS = 1_700_000_000_000
HOUR_MS = 3_600_000


def write(data: Path) -> Path:
    """The subscription into a new data directory `data`; returns its cursor file."""
    clock = ManualClock(START_MS)
    with seglog.open(data, clock=clock, background=False) as log:
        topic = log.create_topic(TOPIC, partitions=2)
        with topic.producer() as producer:
            for partition in (0, 1):
                producer.send_batch([b"old"] * 4, partition=partition)
        topic.subscribe("s", initial_position="earliest").close()
        clock.advance(2 * HOUR_MS)
        log.admin.topics.expire_messages(TOPIC, "s", 3600)
        with topic.producer() as producer:
            for partition in (0, 1):
                producer.send_batch([b"new"] * 6, partition=partition)
        with topic.subscribe("s") as consumer:
            consumer.ack_cumulative(5, partition=0)
            consumer.ack(7, partition=0)
            consumer.ack(9, partition=0)
    return data.joinpath("subscriptions", *TOPIC.split("/"), "s.cursor")


def main() -> None:
    from seglog.subscriptions.cursor_file import load

    with tempfile.TemporaryDirectory() as directory:
        cursor = write(Path(directory))
        shutil.copyfile(cursor, HERE / "s.cursor")
    record = load(HERE / "s.cursor")
    expected = {"subscription_type": record.subscription_type, "created_ms": record.created_ms,
                "partitions": [{"expired": c.expired, "evicted": c.evicted, "floor": c.acks.floor,
                                "acked": c.acks.ranges().tolist()} for c in record.partitions]}
    (HERE / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")


if __name__ == "__main__":
    main()
