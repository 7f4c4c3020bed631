"""Topic stats in Prometheus text format, with the names and labels Pulsar's broker exports
(pulsar_storage_size, pulsar_msg_backlog, pulsar_subscription_back_log, pulsar_rate_in ...; labels cluster,
namespace="tenant/ns", topic="persistent://tenant/ns/topic", subscription), so Pulsar's dashboards and
alerts work unchanged. A topic's partitions are summed into the topic, as the dashboards sum Pulsar's.

A collector reads the stats of every topic (admin.stats) when scraped, so the figures are the admin API's own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from seglog.admin.stats import topic_stats

if TYPE_CHECKING:
    from seglog.broker import Broker
    from seglog.catalog.topics import TopicRef

# Pulsar's `cluster` label: the data directory's cluster (its `seglog serve --cluster`); for one never served,
# "standalone", the name a Pulsar standalone broker reports
UNNAMED_CLUSTER = "standalone"
RATE_WINDOW_MS = 60_000  # rates over the last minute, as Pulsar's stats interval
TOPIC_LABELS = ["cluster", "namespace", "topic"]
SUBSCRIPTION_LABELS = [*TOPIC_LABELS, "subscription"]

# (metric name, stats key, help): figures per topic, then per subscription
TOPIC_GAUGES = (
    ("pulsar_storage_size", "storageSize", "Logical bytes the topic's segments and indexes hold"),
    ("seglog_physical_storage_size", "physicalStorageSize", "Bytes the topic's files occupy on disk"),
    ("pulsar_storage_backlog_size", "backlogSize", "Backlog bytes of the topic's slowest subscription"),
    ("pulsar_msg_backlog", "msgBacklog", "Backlog messages of the topic's slowest subscription"),
    ("pulsar_storage_backlog_quota_limit", "backlogQuotaLimitSize", "destination_storage quota in bytes, -1: none"),
    ("pulsar_storage_backlog_quota_limit_time", "backlogQuotaLimitTime", "message_age quota in seconds, -1: none"),
    ("pulsar_storage_backlog_age_seconds", "oldestBacklogMessageAgeSeconds",
     "Age of the oldest unacknowledged message of any subscription"),
)
SUBSCRIPTION_GAUGES = (
    ("pulsar_subscription_back_log", "msgBacklog", "Unacknowledged messages of the subscription"),
    ("seglog_subscription_backlog_size", "backlogSize", "Unacknowledged bytes of the subscription"),
    ("pulsar_subscription_total_msg_expired", "msgExpired", "Messages acknowledged by the message TTL"),
    ("seglog_subscription_msg_evicted", "msgEvicted", "Messages skipped by eviction or deleted segments"),
)


def topic_labels(broker: Broker, ref: TopicRef) -> list[str]:
    """The values of TOPIC_LABELS for a topic, as Pulsar writes them."""
    name = ref.name
    cluster = broker.catalog.local_cluster or UNNAMED_CLUSTER
    return [cluster, name.namespace_name, f"persistent://{name}"]  # seglog's topics are all persistent


def written_since(broker: Broker, ref: TopicRef, since_ms: int) -> int:
    """Messages of every partition whose timestamp is at least `since_ms` (by the time index)."""
    store = broker.store
    return sum(store.end_offset(ref.name, p) - store.start_offset(ref.name, p, {"timestamp": since_ms})
               for p in range(ref.partitions))


class BrokerCollector:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        broker = self._broker
        broker.check_open()
        topics = [broker.topic(name) for name in broker.catalog.topic_names()]
        stats = [(topic_labels(broker, ref), topic_stats(broker, ref)) for ref in topics]
        for name, key, text in TOPIC_GAUGES:
            family = GaugeMetricFamily(name, text, labels=TOPIC_LABELS)
            for labels, figures in stats:
                family.add_metric(labels, float(figures[key] or 0))
            yield family
        subscriptions = GaugeMetricFamily("pulsar_subscriptions_count", "Subscriptions of the topic",
                                          labels=TOPIC_LABELS)
        rate_in = GaugeMetricFamily("pulsar_rate_in", "Messages written per second over the last minute",
                                    labels=TOPIC_LABELS)
        messages_in = CounterMetricFamily("pulsar_in_messages", "Messages written to the topic",
                                          labels=TOPIC_LABELS)
        window_start = broker.clock() - RATE_WINDOW_MS
        for ref, (labels, figures) in zip(topics, stats):
            subscriptions.add_metric(labels, len(figures["subscriptions"]))
            rate_in.add_metric(labels, written_since(broker, ref, window_start) / (RATE_WINDOW_MS / 1000))
            # offsets start at 0 and are never reused: the end offsets count every message ever written
            messages_in.add_metric(labels, sum(p["endOffset"] for p in figures["partitions"].values()))
        yield from (subscriptions, rate_in, messages_in)
        for name, key, text in SUBSCRIPTION_GAUGES:
            family = GaugeMetricFamily(name, text, labels=SUBSCRIPTION_LABELS)
            for labels, figures in stats:
                for subscription, sub in figures["subscriptions"].items():
                    family.add_metric([*labels, subscription], float(sub[key]))
            yield family


def prometheus_text(broker: Broker) -> str:
    """Every topic's stats in Prometheus' text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    return generate_latest(registry).decode()
