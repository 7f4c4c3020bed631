"""The replication metrics of /metrics (server/rest/replication_metrics.py) in this process, on a real broker:
the backlog of each replication cursor, every partition together, as the topic's stats give it, read without
computing the topic's whole stats (a scrape asks every topic: those cost about 0.3 ms each)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from seglog.admin.api import Admin
from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import unpack
from seglog.server.rest.base import RestContext
from seglog.server.rest.replication_metrics import replication_metrics_text
from seglog.server.service import BrokerService, Settings

TOPIC = "public/default/orders"


@pytest.fixture
def ctx(tmp_path):
    broker = Broker.open(tmp_path / "data", clock=ManualClock(), background=False)
    service = BrokerService(broker, Settings("east", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
    yield RestContext(broker, Admin(broker), service, executor=None)  # type: ignore[arg-type]
    broker.close()


def _produce(ctx: RestContext, partition: int, count: int) -> None:
    handle = ctx.service.open_writer(ctx.service.resolve(f"{TOPIC}-partition-{partition}", False), f"p{partition}")
    for sequence_id in range(count):
        metadata = api.MessageMetadata(producer_name=handle.name, sequence_id=sequence_id, publish_time=1_000)
        ctx.service.append(handle, unpack(metadata, b"value", sequence_id), sequence_id)
    ctx.service.close_writer(handle)


def _subscribe(ctx: RestContext, name: str, acked: dict[int, list[int]]) -> None:
    """A durable subscription from the earliest message, with `acked` offsets acknowledged per partition."""
    subscriptions = ctx.broker.subscriptions
    subscription = subscriptions.open(ctx.broker.topic(TOPIC), name, "exclusive", "earliest")
    for partition, offsets in acked.items():
        subscription.ack_many(partition, np.array(offsets, dtype=np.int64))
    subscriptions.release(subscription)


def _backlog_metric(text: str, remote: str) -> float:
    (value,) = re.findall(r'^pulsar_replication_backlog\{[^}]*remote_cluster="%s"[^}]*\} (\S+)$' % remote, text,
                          flags=re.M)
    return float(value)


def test_the_backlog_metric_of_a_replication_cursor_is_its_backlog_over_every_partition(ctx, monkeypatch):
    ctx.broker.create_topic(TOPIC, 2, {})
    _produce(ctx, 0, 5)
    _produce(ctx, 1, 3)
    _subscribe(ctx, "pulsar.repl.west", {0: [0, 1, 3], 1: [2]})  # 2 + 2 behind
    _subscribe(ctx, "pulsar.repl.north", {})  # 5 + 3
    _subscribe(ctx, "audit", {0: [0, 1, 2, 3, 4]})  # not a replication cursor: no metric of its own
    whole = ctx.admin.topics.stats(TOPIC)["subscriptions"]
    assert (whole["pulsar.repl.west"]["msgBacklog"], whole["pulsar.repl.north"]["msgBacklog"]) == (4, 8)

    def whole_stats(topic: str) -> None:
        raise AssertionError(f"a scrape computed the whole stats of {topic}")
    monkeypatch.setattr(ctx.admin.topics, "stats", whole_stats)
    text = replication_metrics_text(ctx)
    assert (_backlog_metric(text, "west"), _backlog_metric(text, "north")) == (4.0, 8.0)
    assert 'remote_cluster="audit"' not in text

