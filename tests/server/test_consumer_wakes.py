"""When a remote consumer's task reads (consumers.ConsumerSession): a change of its subscription (every ACK
of any of its consumers, a redelivery, a consumer leaving) wakes it only while it has permits (above zero:
whole stored batches take them below), for a consumer without them may be sent nothing before its next
FLOW, which wakes it itself."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from seglog.server.consumers import ConsumerSession


def session() -> ConsumerSession:
    connection = SimpleNamespace(service=SimpleNamespace(settings=SimpleNamespace(
        max_unacked_messages_per_consumer=0, precise_dispatcher_flow_control=False)))
    return ConsumerSession(connection, 1, SimpleNamespace(partition=0, partitioned=False), "c")  # type: ignore[arg-type]


def test_a_change_of_the_subscription_wakes_a_consumer_only_while_it_has_permits():
    async def run() -> list[bool]:
        consumer = session()
        woken = []
        consumer.subscription_changed()
        woken.append(consumer.wake.is_set())
        consumer.state.permits = -5  # (whole stored batches sent past its permits)
        consumer.subscription_changed()
        woken.append(consumer.wake.is_set())
        consumer.state.permits = 3
        consumer.subscription_changed()
        woken.append(consumer.wake.is_set())
        return woken

    assert asyncio.run(run()) == [False, False, True]
