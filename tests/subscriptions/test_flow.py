"""FLOW's permits on a subscription: granted at once, capped, and (for a server's event loop, which must not
wait for a dispatch read in the thread pool) granted without waiting only while the subscription is free."""

from __future__ import annotations

import threading

from seglog.broker import Broker
from seglog.clock import ManualClock
from seglog.subscriptions.delivery import ConsumerState
from seglog.subscriptions.subscription import MAX_PERMITS


def test_permits_are_granted_without_waiting_only_while_no_other_thread_holds_the_subscription(tmp_path):
    broker = Broker.open(tmp_path / "data", clock=ManualClock(), background=False)
    try:
        ref = broker.create_topic("public/default/flowed", 1, {})
        subscription = broker.subscriptions.open(ref, "s", "exclusive", "earliest")
        state = ConsumerState("c", None, lambda partition: None, lambda: None, permits=0)
        subscription.attach(state, "exclusive")
        assert subscription.flow(state, 10, wait=False) and state.permits == 10
        held, release = threading.Event(), threading.Event()

        def dispatch_read() -> None:  # (as a read in the thread pool holds it)
            with subscription.mutex:
                held.set()
                release.wait(10)

        reader = threading.Thread(target=dispatch_read)
        reader.start()
        try:
            assert held.wait(10)
            assert not subscription.flow(state, 5, wait=False) and state.permits == 10
        finally:
            release.set()
            reader.join(10)
        assert subscription.flow(state, 5, wait=False) and state.permits == 15
        subscription.flow(state, 2 * MAX_PERMITS)
        assert state.permits == MAX_PERMITS
        broker.subscriptions.release(subscription)
    finally:
        broker.close()
