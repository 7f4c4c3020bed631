"""The append notification (storage/notification.py): this process's appends wake its waiting readers and
consumers, which poll only for what nothing here can signal (another process's appends, redeliveries due
by time). The poll is made 60 s long where a test must show that a wait ended by the signal: every wait
below is bounded far under that."""

import subprocess
import sys
import textwrap
import threading

import pytest

import seglog
import seglog._wait
from seglog.broker import Broker
from seglog.errors import ClosedError

BOUND_S = 10  # far under the patched poll: a wait that ends within it was woken by the signal


class ObservedEvent(threading.Event):
    """The wait's event, telling the test when a waiter is about to block on it."""
    blocking = threading.Event()

    def wait(self, timeout=None):
        ObservedEvent.blocking.set()
        return super().wait(timeout)


@pytest.fixture
def observed(monkeypatch):
    ObservedEvent.blocking = threading.Event()
    monkeypatch.setattr(seglog._wait, "Event", ObservedEvent)
    return ObservedEvent


@pytest.fixture
def no_poll(monkeypatch, observed):
    """Waits wake only when signalled: the fallback poll is made 60 s."""
    monkeypatch.setattr(seglog._wait, "POLL_START_S", 60.0)
    monkeypatch.setattr(seglog._wait, "POLL_MAX_S", 60.0)
    return observed


class Waiting(threading.Thread):
    """`call()` in a thread; its result or error once it returns."""

    def __init__(self, call):
        super().__init__(daemon=True)
        self.call, self.result, self.error = call, None, None
        self.start()

    def run(self):
        try:
            self.result = self.call()
        except BaseException as error:  # noqa: BLE001 (handed to the test)
            self.error = error

    def outcome(self):
        self.join(BOUND_S)
        assert not self.is_alive(), "the waiter was not woken"
        if self.error is not None:
            raise self.error
        return self.result


def send(topic, how, value=b"v"):
    with topic.producer() as producer:
        if how == "send_batch":
            producer.send_batch([value])
        else:  # the send() path: queued, written by flush
            producer.send(value)
            producer.flush()


@pytest.mark.parametrize("how", ["send_batch", "send"])
def test_a_reader_waiting_with_a_timeout_is_woken_by_an_append_of_this_process(log, no_poll, how):
    topic = log.create_topic("t")
    reader = topic.reader("earliest")
    waiting = Waiting(lambda: reader.read_batch(timeout=60))
    assert no_poll.blocking.wait(BOUND_S)
    send(topic, how)
    assert waiting.outcome().column("value").to_pylist() == [b"v"]


@pytest.mark.parametrize("how", ["send_batch", "send"])
def test_a_consumer_blocked_in_receive_is_woken_by_a_send_of_this_process(log, no_poll, how):
    topic = log.create_topic("t", partitions=3)
    consumer = topic.subscribe("s")
    waiting = Waiting(lambda: consumer.receive(timeout=60))
    assert no_poll.blocking.wait(BOUND_S)
    send(topic, how)  # to whichever partition: the consumer waits on all of them
    assert waiting.outcome().value == b"v"
    consumer.close()


def test_receive_batch_with_a_timeout_is_woken_too(log, no_poll):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", subscription_type="shared")
    waiting = Waiting(lambda: consumer.receive_batch(timeout=60))
    assert no_poll.blocking.wait(BOUND_S)
    send(topic, "send_batch")
    assert waiting.outcome().num_rows == 1
    consumer.close()


def test_closing_the_log_wakes_its_waiters(tmp_path, no_poll):
    log = seglog.open(tmp_path / "data")
    topic = log.create_topic("t")
    consumer = topic.subscribe("s")
    receiving = Waiting(lambda: consumer.receive(timeout=60))
    assert no_poll.blocking.wait(BOUND_S)
    no_poll.blocking.clear()
    reader = topic.reader("earliest")
    reading = Waiting(lambda: reader.read_batch(timeout=60))
    assert no_poll.blocking.wait(BOUND_S)
    log.close()
    for waiting in (receiving, reading):
        with pytest.raises(ClosedError, match="closed while waiting"):
            waiting.outcome()


def test_deleting_the_topic_wakes_its_waiters(log, no_poll):
    topic = log.create_topic("t")
    reader = topic.reader("earliest")
    reading = Waiting(lambda: reader.read_batch(timeout=60))
    assert no_poll.blocking.wait(BOUND_S)
    log.delete_topic("t")
    with pytest.raises(seglog.errors.TopicNotFoundError):
        reading.outcome()


def test_the_writer_signals_only_while_someone_waits(tmp_path, clock):
    broker = Broker.open(tmp_path / "data", clock=clock, background=False)
    ref = broker.create_topic("t", 1, {})
    writer = broker.store.acquire_writer(ref.name, 0, ref.config)
    signal = broker.store.append_signal(ref.name, 0)
    writer.append(writer.source([b"a"]))
    assert signal.notified == 0  # nobody waited: the append did not signal
    event = threading.Event()
    signal.watch(event)
    writer.append(writer.source([b"b"]))  # send_batch's path
    assert event.is_set() and signal.notified == 1
    event.clear()
    writer.accumulator.append(b"c", None, None, None)  # send()'s path: queued, then flushed
    assert not event.is_set()
    assert writer.flush_pending() == 1
    assert event.is_set() and signal.notified == 2
    assert writer.flush_pending() == 0 and signal.notified == 2  # nothing written: nothing signalled
    signal.unwatch(event)
    writer.append(writer.source([b"d"]))
    assert signal.notified == 2
    broker.store.release_writer(ref.name, 0, broker.store.fence(ref.name))
    broker.close()
    assert signal.closed


def test_a_consumer_still_receives_what_another_process_appends(log, observed):
    """Another process's appends signal nothing here: the capped poll finds them."""
    topic = log.create_topic("t")
    consumer = topic.subscribe("s")
    waiting = Waiting(lambda: consumer.receive(timeout=60))
    assert observed.blocking.wait(BOUND_S)
    script = textwrap.dedent(f"""
        import seglog
        with seglog.open({str(log.path)!r}) as log, log.topic("t").producer() as producer:
            producer.send_batch([b"from afar"])
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert waiting.outcome().value == b"from afar"
    consumer.close()
