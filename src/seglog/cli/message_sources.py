"""Where `seglog consume` takes its messages from: partitions read directly (nothing is acknowledged), or a
subscription (what was printed is acknowledged, so that the next run goes on after it)."""

from __future__ import annotations

from typing import Any

from seglog import Message
from seglog.errors import ReceiveTimeoutError
from seglog.topic import Topic


class PartitionReaders:
    """Readers of some partitions of a topic from one start position, taken in turn so that a partition
    with a long backlog does not hold the others back (Fluvio's consume -A)."""

    def __init__(self, topic: Topic, partitions: list[int], start: Any) -> None:
        self._readers = [topic.reader(start, partition) for partition in partitions]
        self._turn = 0

    def past_the_end(self, topic: Topic) -> list[tuple[int, int, int]]:
        """(partition, start offset, end offset) of each partition whose start offset is past its end."""
        return [(r.partition, r.offset, end) for r in self._readers
                if r.offset > (end := topic.end_offset(r.partition))]

    def take(self, max_messages: int) -> list[Message]:
        """The next messages of the next partition in turn that has any (at most `max_messages`)."""
        for i in range(len(self._readers)):
            reader = self._readers[(self._turn + i) % len(self._readers)]
            messages = reader.read_messages(max_messages)
            if messages:
                self._turn = (self._turn + i + 1) % len(self._readers)
                return messages
        return []

    def printed(self, messages: list[Message]) -> None:
        """Nothing to do: a reader acknowledges nothing."""

    def close(self) -> None:
        for reader in self._readers:
            reader.close()


class SubscriptionMessages:
    """A consumer of a durable subscription (created at `initial_position` if new); messages are
    acknowledged once printed, and the subscription's cursor is persisted when it closes."""

    def __init__(self, topic: Topic, name: str, subscription_type: str, initial_position: str) -> None:
        self._consumer = topic.subscribe(name, subscription_type=subscription_type,
                                         initial_position=initial_position, consumer_name="seglog-consume")

    def take(self, max_messages: int) -> list[Message]:
        """The messages the subscription has for this consumer now, at most `max_messages`."""
        messages: list[Message] = []
        while len(messages) < max_messages:
            try:
                messages.append(self._consumer.receive(timeout=0))
            except ReceiveTimeoutError:
                break
        return messages

    def printed(self, messages: list[Message]) -> None:
        for message in messages:
            self._consumer.ack(message)

    def close(self) -> None:
        self._consumer.close()
