"""Topic stats in Prometheus text format, with the names and labels Pulsar's broker exports
(pulsar_storage_size, pulsar_msg_backlog, pulsar_subscription_back_log, pulsar_rate_in ...; labels cluster,
namespace="tenant/ns", topic="persistent://tenant/ns/topic", subscription), so Pulsar's dashboards and
alerts work unchanged. A topic's partitions are summed into the topic, as the dashboards sum Pulsar's.

A collector reads the stats of every topic (admin.stats) when scraped, so the figures are the admin API's own:
the rates and counters (pulsar_rate_in, pulsar_in_messages_total, pulsar_subscription_msg_rate_out ...) are the
live ones of this process (seglog.rates), which start at 0 with it, as a Pulsar broker's do. Pulsar's
producer- and consumer-level metrics (off by default in Pulsar: exposeProducerLevelMetricsInPrometheus,
exposeConsumerLevelMetricsInPrometheus) are left out."""

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
    ("pulsar_rate_in", "msgRateIn", "Messages written per second over the last minute"),
    ("pulsar_throughput_in", "msgThroughputIn", "Value bytes written per second over the last minute"),
    ("pulsar_rate_out", "msgRateOut", "Messages given to consumers per second over the last minute"),
    ("pulsar_throughput_out", "msgThroughputOut", "Value bytes given to consumers per second over the last minute"),
    ("pulsar_average_msg_size", "averageMsgSize", "Value bytes a message written over the last minute"),
)
# counters per topic (prometheus_client adds the _total of their names)
TOPIC_COUNTERS = (
    ("pulsar_in_messages", "msgInCounter", "Messages written to the topic since the server started"),
    ("pulsar_in_bytes", "bytesInCounter", "Value bytes written to the topic since the server started"),
)
SUBSCRIPTION_GAUGES = (
    ("pulsar_subscription_back_log", "msgBacklog", "Unacknowledged messages of the subscription"),
    ("seglog_subscription_backlog_size", "backlogSize", "Unacknowledged bytes of the subscription"),
    ("pulsar_subscription_total_msg_expired", "msgExpired", "Messages acknowledged by the message TTL"),
    ("seglog_subscription_msg_evicted", "msgEvicted", "Messages skipped by eviction or deleted segments"),
    ("pulsar_subscription_msg_rate_out", "msgRateOut", "Messages given to consumers per second, last minute"),
    ("pulsar_subscription_msg_throughput_out", "msgThroughputOut",
     "Value bytes given to consumers per second over the last minute"),
    ("pulsar_subscription_msg_rate_redeliver", "msgRateRedeliver",
     "Messages consumers asked to be redelivered per second over the last minute"),
)
SUBSCRIPTION_COUNTERS = (
    ("pulsar_out_messages", "msgOutCounter", "Messages given to the subscription's consumers since the start"),
    ("pulsar_out_bytes", "bytesOutCounter", "Value bytes given to the subscription's consumers since the start"),
)


def topic_labels(broker: Broker, ref: TopicRef) -> list[str]:
    """The values of TOPIC_LABELS for a topic, as Pulsar writes them."""
    name = ref.name
    cluster = broker.catalog.local_cluster or UNNAMED_CLUSTER
    return [cluster, name.namespace_name, f"persistent://{name}"]  # seglog's topics are all persistent


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
        for name, key, text in TOPIC_COUNTERS:
            counter = CounterMetricFamily(name, text, labels=TOPIC_LABELS)
            for labels, figures in stats:
                counter.add_metric(labels, figures[key])
            yield counter
        counts = (("pulsar_subscriptions_count", "Subscriptions of the topic", lambda f: len(f["subscriptions"])),
                  ("pulsar_producers_count", "Producers connected to the topic", lambda f: len(f["publishers"])),
                  ("pulsar_consumers_count", "Consumers attached to the topic's subscriptions",
                   lambda f: sum(len(s["consumers"]) for s in f["subscriptions"].values())))
        for name, text, count in counts:
            family = GaugeMetricFamily(name, text, labels=TOPIC_LABELS)
            for labels, figures in stats:
                family.add_metric(labels, count(figures))
            yield family
        for name, key, text in SUBSCRIPTION_GAUGES:
            family = GaugeMetricFamily(name, text, labels=SUBSCRIPTION_LABELS)
            for labels, figures in stats:
                for subscription, sub in figures["subscriptions"].items():
                    family.add_metric([*labels, subscription], float(sub[key]))
            yield family
        for name, key, text in SUBSCRIPTION_COUNTERS:
            counter = CounterMetricFamily(name, text, labels=SUBSCRIPTION_LABELS)
            for labels, figures in stats:
                for subscription, sub in figures["subscriptions"].items():
                    counter.add_metric([*labels, subscription], sub[key])
            yield counter


def prometheus_text(broker: Broker) -> str:
    """Every topic's stats in Prometheus' text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    return generate_latest(registry).decode()
