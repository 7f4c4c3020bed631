"""A topic's live rates and counters (seglog.rates.Traffic) as Pulsar's stats name them: msgRateIn,
msgThroughputIn, msgInCounter, bytesInCounter and averageMsgSize of what was written; msgRateOut,
msgThroughputOut, msgOutCounter, bytesOutCounter and msgRateRedeliver of what subscriptions' consumers were
given; PublisherStats and ConsumerStats. Of every partition together, or of some (a partition's own stats).

Rates are per second over the last minute (rates.WINDOW_S); counters count since this process started, as
Pulsar's count since the broker loaded the topic. Sizes are the messages' values (their payloads)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from seglog.names import REPLICATOR_PREFIX
from seglog.rates import RateMeter, SubscriptionTraffic, TopicTraffic
from seglog.subscriptions.delivery import ConsumerState


def _sum(meters: list[RateMeter]) -> tuple[float, float, int, int]:
    """(messages/s, bytes/s, messages, bytes) of `meters` together."""
    rates = [meter.rates() for meter in meters]
    return (sum(r[0] for r in rates), sum(r[1] for r in rates), sum(m.messages for m in meters),
            sum(m.bytes for m in meters))


def average_size(rate: float, throughput: float) -> float:
    """Pulsar's averageMsgSize: the bytes a message over the rates' window (0 without messages)."""
    return throughput / rate if rate else 0.0


def inbound(traffic: TopicTraffic, partitions: Collection[int]) -> dict[str, Any]:
    """What was written to `partitions`, by anyone: producers of a server, in-process ones, replicators."""
    rate, throughput, messages, nbytes = _sum([m for p, m in traffic.inbound.items() if p in partitions])
    return {"msgRateIn": rate, "msgThroughputIn": throughput, "msgInCounter": messages, "bytesInCounter": nbytes,
            "averageMsgSize": average_size(rate, throughput)}


def publishers(traffic: TopicTraffic, partitions: Collection[int]) -> list[dict[str, Any]]:
    """PublisherStats of the producers connected to `partitions` (a replicator's producer is not one: it
    shows in `replication`, as in Pulsar)."""
    shown = []
    for publisher in sorted(list(traffic.publishers), key=lambda p: (p.partition, p.name)):
        if publisher.partition not in partitions or publisher.name.startswith(REPLICATOR_PREFIX):
            continue
        rate, throughput = publisher.meter.rates()
        shown.append({"producerName": publisher.name, "accessMode": publisher.access_mode, "msgRateIn": rate,
                      "msgThroughputIn": throughput, "averageMsgSize": average_size(rate, throughput),
                      "msgInCounter": publisher.meter.messages, "bytesInCounter": publisher.meter.bytes,
                      "chunkedMessageRate": 0.0, "address": publisher.address,
                      "connectedSince": publisher.connected_since, "clientVersion": None, "metadata": {},
                      "supportsPartialProducer": False})
    return shown


def subscription_out(traffic: SubscriptionTraffic | None, partitions: Collection[int]) -> dict[str, Any]:
    """What the subscription's consumers, present and past, were given on `partitions`, and asked again."""
    if traffic is None:
        rate = throughput = redeliver = 0.0
        messages = nbytes = 0
    else:
        rate, throughput, messages, nbytes = _sum([m for p, m in traffic.out.items() if p in partitions])
        redeliver = _sum([m for p, m in traffic.redelivered.items() if p in partitions])[0]
    return {"msgRateOut": rate, "msgThroughputOut": throughput, "msgOutCounter": messages,
            "bytesOutCounter": nbytes, "msgRateRedeliver": redeliver}


def outbound(subscriptions: list[dict[str, Any]], removed: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """The out figures of a topic or partition: its subscriptions' (subscription_out) together, and the
    messages and bytes `removed`: those of subscriptions deleted since (TopicTraffic.removed_out), which
    Pulsar's topic counters keep."""
    return {"msgRateOut": sum(s["msgRateOut"] for s in subscriptions),
            "msgThroughputOut": sum(s["msgThroughputOut"] for s in subscriptions),
            "msgOutCounter": sum(s["msgOutCounter"] for s in subscriptions) + removed[0],
            "bytesOutCounter": sum(s["bytesOutCounter"] for s in subscriptions) + removed[1]}


def consumer(state: ConsumerState) -> dict[str, Any]:
    """ConsumerStats of a consumer attached in this process (read holding its subscription's mutex): its
    rates and counts, the permits granted and not used (0 for an in-process consumer, which asks for what
    it wants), the messages delivered and not known to be acknowledged, and whether dispatch holds it at its
    most unacknowledged messages."""
    traffic = state.traffic
    out_rate, out_throughput = traffic.out.rates() if traffic is not None else (0.0, 0.0)
    return {"consumerName": state.name, "msgRateOut": out_rate, "msgThroughputOut": out_throughput,
            "msgRateRedeliver": traffic.redelivered.rates()[0] if traffic is not None else 0.0,
            "msgOutCounter": traffic.out.messages if traffic is not None else 0,
            "bytesOutCounter": traffic.out.bytes if traffic is not None else 0,
            "availablePermits": state.permits or 0, "unackedMessages": state.pending_messages,
            "blockedConsumerOnUnackedMsgs": state.blocked_on_unacked,
            "address": traffic.address if traffic is not None else None,
            "connectedSince": traffic.connected_since if traffic is not None else None,
            "clientVersion": None, "lastAckedTimestamp": 0, "lastConsumedTimestamp": 0, "metadata": {}}
