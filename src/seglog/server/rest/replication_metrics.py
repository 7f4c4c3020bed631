"""The replication figures of `topics stats` as Prometheus metrics, with the names and labels Pulsar's broker
exports them under (pulsar_replication_rate_in, ..._backlog, ..._connected_count; labels cluster, namespace,
topic, remote_cluster), appended to /metrics. Built here and not in admin/metrics.py: the figures are the
server's (its replicator producers) and the replication extension's, which the admin layer does not see."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily

from seglog.admin.metrics import TOPIC_LABELS, UNNAMED_CLUSTER, topic_labels
from seglog.server.rest.base import RestContext
from seglog.server.rest.stats import replication_of

LABELS = [*TOPIC_LABELS, "remote_cluster"]
# (metric name, ReplicatorStats key, help)
GAUGES = (
    ("pulsar_replication_rate_in", "msgRateIn", "Messages per second the remote cluster's replicators write here"),
    ("pulsar_replication_rate_out", "msgRateOut", "Messages per second the remote cluster receipted"),
    ("pulsar_replication_throughput_in", "msgThroughputIn", "Bytes per second the remote's replicators write here"),
    ("pulsar_replication_throughput_out", "msgThroughputOut", "Bytes per second the remote cluster receipted"),
    ("pulsar_replication_backlog", "replicationBacklog", "Messages behind the replicator's cursor"),
    ("pulsar_replication_rate_expired", "msgRateExpired", "Messages per second the TTL expired before sending"),
    ("pulsar_replication_delay_in_seconds", "replicationDelayInSeconds",
     "Age of the oldest message sent and not receipted"),
)

SNAPSHOT_GAUGES = (
    ("pulsar_replicated_subscriptions_pending_snapshots", "pendingSnapshots",
     "Replicated subscriptions' snapshot attempts in progress"),
    ("pulsar_replicated_subscriptions_timedout_snapshots", "timedoutSnapshots",
     "Replicated subscriptions' snapshot attempts abandoned after the timeout since the server started"),
)


class ReplicationCollector:
    def __init__(self, ctx: RestContext) -> None:
        self._ctx = ctx

    def collect(self) -> Iterator[Metric]:
        ctx = self._ctx
        rows: list[tuple[list[str], dict[str, Any]]] = []
        for name in ctx.broker.catalog.topic_names():
            ref = ctx.broker.topic(name)
            for remote, figures in replication_of(ctx, ref).items():
                rows.append(([*topic_labels(ctx.broker, ref), remote], figures))
        if not rows:
            return  # (no families at all: /metrics then reads as `seglog metrics` on the data directory)
        yield from self._snapshots()
        for name, key, text in GAUGES:
            family = GaugeMetricFamily(name, text, labels=LABELS)
            for labels, figures in rows:
                family.add_metric(labels, float(figures[key] or 0))
            yield family
        connected = GaugeMetricFamily("pulsar_replication_connected_count",
                                      "1 while the replicator to the remote is connected", labels=LABELS)
        disconnected = GaugeMetricFamily("pulsar_replication_disconnected_count",
                                         "1 while the replicator to the remote is not connected", labels=LABELS)
        for labels, figures in rows:
            if figures["outboundConnection"] is None and not figures["replicationBacklog"]:
                continue  # (an inbound-only entry: no replicator of this cluster goes there)
            connected.add_metric(labels, 1.0 if figures["connected"] else 0.0)
            disconnected.add_metric(labels, 0.0 if figures["connected"] else 1.0)
        yield from (connected, disconnected)

    def _snapshots(self) -> Iterator[Metric]:
        """Broker-wide, as Pulsar's: replicated subscriptions' snapshot attempts in progress, timed out and
        completed (only once something replicates, as every replication metric here)."""
        counts = self._ctx.replicated_subscriptions_stats()
        if not counts:
            return
        cluster = self._ctx.broker.catalog.local_cluster or UNNAMED_CLUSTER
        for name, key, text in SNAPSHOT_GAUGES:
            family = GaugeMetricFamily(name, text, labels=["cluster"])
            family.add_metric([cluster], float(counts[key]))
            yield family
        summary = SummaryMetricFamily("pulsar_replicated_subscriptions_snapshot_ms",
                                      "Milliseconds replicated subscriptions' snapshots took to complete",
                                      labels=["cluster"])
        summary.add_metric([cluster], count_value=counts["completedSnapshots"],
                           sum_value=counts["completedSnapshotsMs"])
        yield summary


def replication_metrics_text(ctx: RestContext) -> str:
    """The replication metrics in Prometheus' text format (blocking: reads the stats)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReplicationCollector(ctx))
    return generate_latest(registry).decode()
