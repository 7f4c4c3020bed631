"""Topic stats in Prometheus text format, with the names Pulsar's broker exports (pulsar_storage_size,
pulsar_msg_backlog, ...) and the same labels (tenant, namespace, topic, subscription).

A collector reads `topic.stats()` of every topic when scraped, so the figures are the admin API's own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from seglog.log import Log

TOPIC_LABELS = ["tenant", "namespace", "topic"]
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
    ("pulsar_subscription_msg_expired", "msgExpired", "Messages acknowledged by the message TTL"),
    ("seglog_subscription_msg_evicted", "msgEvicted", "Messages skipped by eviction or deleted segments"),
)


class LogCollector:
    def __init__(self, log: Log) -> None:
        self._log = log

    def collect(self) -> Iterator[Metric]:
        topics = [self._log.topic(name) for name in self._log.list_topics()]
        stats = [(topic.topic_name.path_parts(), topic.stats()) for topic in topics]
        for name, key, text in TOPIC_GAUGES:
            family = GaugeMetricFamily(name, text, labels=TOPIC_LABELS)
            for labels, figures in stats:
                family.add_metric(list(labels), float(figures[key] or 0))
            yield family
        for name, key, text in SUBSCRIPTION_GAUGES:
            family = GaugeMetricFamily(name, text, labels=SUBSCRIPTION_LABELS)
            for labels, figures in stats:
                for subscription, sub in figures["subscriptions"].items():
                    family.add_metric([*labels, subscription], float(sub[key]))
            yield family


def prometheus_text(log: Log) -> str:
    """Every topic's stats of `log` in Prometheus' text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LogCollector(log))
    return generate_latest(registry).decode()
