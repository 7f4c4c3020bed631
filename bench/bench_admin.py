"""Creating topics on a `seglog serve` that already has many (issue 26, item 7): 100 creations timed with 100
topics present (the baseline) and with 5,000 (seglog's figure), each on a server of its own started for the
test, so that only one runs at a time. The server's replication service runs, as in every `seglog serve`.

The existing topics are made beforehand in-process (`seglog.open(data).create_topic`, untimed), in
public/default; the server is started on that data directory on free loopback ports and stopped by its pid.
A round creates 100 new topics one after the other; its teardown (untimed) deletes them through the admin
API, so every round starts with the same topics present.

Group "admin: 100 topic creations, REST"
  a round is 100 `PUT /admin/v2/persistent/public/default/{topic}` (httpx, one connection), each answered 204
  baseline  100 topics present
  seglog    5,000 topics present     target: >= 0.5x the baseline's rate (100 creations take less than twice
                                     as long as with 100 topics present)
Group "admin: 100 topic creations, subscribing"
  a round is 100 `subscribe()` calls of pulsar-client, each creating its topic (the namespace's automatic
  creation) and closed at once: how the issue measured it (0.96 s with none present, 6.7 s with 900)
  baseline  100 topics present
  seglog    5,000 topics present     same target

Quick sizes with --benchmark-disable: 20 and 200 topics present, 5 creations a round."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import httpx
import pulsar
import pytest
from server_processes import start_cluster

import seglog

FEW, MANY = 100, 5_000
NAMESPACE = "public/default"
_rounds = itertools.count()


def _server(scratch: Path, logs: Path, present: int):
    """`seglog serve` on a data directory of `present` topics; (the process, its pulsar:// and http:// URLs)."""
    data = scratch / f"present-{present}"
    if not data.exists():
        with seglog.open(data) as log:
            for number in range(present):
                log.create_topic(f"{NAMESPACE}/present-{number}")
    return start_cluster("standalone", data, logs, f"seglog-serve-{present}.log")


@pytest.fixture
def sizes(scale) -> tuple[int, int, int]:
    """(topics present for the baseline, for seglog's figure, creations a round)."""
    return scale(FEW, 20), scale(MANY, 200), scale(100, 5)


def _creations(bench, scratch: Path, logs: Path, present: int, creations: int, how: str) -> None:
    """Time rounds of `creations` topic creations, `how` ('rest' or 'subscribe'), on a server of its own with
    `present` topics; each round's topics deleted after it (untimed)."""
    process, pulsar_url, http_url = _server(scratch, logs, present)
    client = pulsar.Client(pulsar_url, logger=logging.getLogger("pulsar-client"), operation_timeout_seconds=30)
    try:
        with httpx.Client(base_url=http_url, timeout=60) as http:
            def names() -> tuple[list[str]]:
                round_ = next(_rounds)
                return ([f"{NAMESPACE}/new-{round_}-{number}" for number in range(creations)],)

            def create(topics: list[str]) -> None:
                for topic in topics:
                    if how == "rest":
                        response = http.put(f"/admin/v2/persistent/{topic}")
                        assert response.status_code == 204, response.text
                    else:
                        client.subscribe(f"persistent://{topic}", "bench").close()

            def delete(topics: list[str]) -> None:
                for topic in topics:
                    response = http.delete(f"/admin/v2/persistent/{topic}")
                    assert response.status_code == 204, response.text
                process.check_running()

            bench.run(create, setup=names, teardown=delete, rounds=5)
    finally:
        client.close()
        process.stop()


@pytest.mark.parametrize("how, group", [("rest", "REST"), ("subscribe", "subscribing")])
def test_creations_with_few_topics(bench, scratch, logs, sizes, how, group) -> None:
    few, _, creations = sizes
    bench.baseline(f"admin: {creations} topic creations, {group}", f"{few:,} topics present", messages=creations,
                   unit="topic")
    _creations(bench, scratch, logs, few, creations, how)


@pytest.mark.parametrize("how, group", [("rest", "REST"), ("subscribe", "subscribing")])
def test_creations_with_many_topics(bench, scratch, logs, sizes, how, group) -> None:
    few, many, creations = sizes
    bench.seglog(f"admin: {creations} topic creations, {group}", f"{many:,} topics present", messages=creations,
                 unit="topic", at_least={f"{few:,} topics present": 0.5})
    _creations(bench, scratch, logs, many, creations, how)
