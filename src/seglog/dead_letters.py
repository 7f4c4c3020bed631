"""Dead letters in-process, as pulsar-client's `dead_letter_policy`: a message delivered `max_redeliver_count`
times more than once (redelivered after negative acks, ack timeouts or consumers that left) goes to the
dead-letter topic instead of to the consumer a next time, with its key, value and properties and two more
properties naming where it came from, and is acknowledged on its own subscription.

Pulsar's clients do the same on their side of the broker: the dead-letter topic is the policy's, else
`TOPIC-SUBSCRIPTION-DLQ` beside the topic, created at the first dead letter, and the policy's
`initial_subscription_name` is made on it then, at its earliest message, so no dead letter goes unkept. The
dead letter is written and flushed before the message is acknowledged: a crash between the two leaves it in
both places, never in neither."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from seglog.errors import InvalidArgumentError
from seglog.names import TopicName, validate_subscription_name

if TYPE_CHECKING:
    from seglog._core._messages import Message
    from seglog.producer import Producer
    from seglog.subscriptions.delivery import Piece
    from seglog.subscriptions.subscription import Subscription

REAL_TOPIC = "REAL_TOPIC"  # the property naming the topic a dead letter came from (Pulsar's name)
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"  # its message id there: PARTITION:OFFSET, as seglog's CLI writes ids
DEAD_LETTER_SUFFIX = "-DLQ"


@dataclass(frozen=True)
class DeadLetterPolicy:
    """pulsar-client's ConsumerDeadLetterPolicy: after `max_redeliver_count` redeliveries a message goes to
    `dead_letter_topic` (default: TOPIC-SUBSCRIPTION-DLQ in the topic's namespace), where
    `initial_subscription_name`, if given, is created at the earliest message with the topic."""

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None

    def __post_init__(self) -> None:
        count = self.max_redeliver_count
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidArgumentError("max_redeliver_count", count, "an int >= 1 (redeliveries before a message "
                                       "goes to the dead-letter topic)")
        if self.dead_letter_topic is not None:
            TopicName.parse(self.dead_letter_topic)
        if self.initial_subscription_name is not None:
            validate_subscription_name(self.initial_subscription_name)

    def topic_for(self, topic: TopicName, subscription: str) -> TopicName:
        """The dead-letter topic of `subscription` of `topic`."""
        if self.dead_letter_topic is not None:
            return TopicName.parse(self.dead_letter_topic)
        return TopicName(topic.tenant, topic.namespace, f"{topic.topic}-{subscription}{DEAD_LETTER_SUFFIX}")


class DeadLetters:
    """One consumer's way to its dead-letter topic: which messages go there, and its producer, opened (the
    topic and initial subscription made as needed) at the first dead letter by `open_producer`."""

    def __init__(self, policy: DeadLetterPolicy, origin: TopicName, open_producer: Callable[[], Producer]) -> None:
        self.policy = policy
        self.origin = f"persistent://{origin}"
        self._open_producer = open_producer
        self._producer: Producer | None = None

    def dead(self, subscription: Subscription, piece: Piece) -> np.ndarray:
        """Which of the piece's messages are past their redeliveries (a mask over piece.offsets)."""
        limit = self.policy.max_redeliver_count
        return np.fromiter((subscription.redelivery_count(piece.partition, offset) > limit
                            for offset in piece.offsets.tolist()), dtype=bool, count=len(piece.offsets))

    def send(self, messages: Sequence[Message]) -> None:
        """Write the messages to the dead-letter topic, flushed: ready to be acknowledged where they were."""
        if self._producer is None:
            self._producer = self._open_producer()
        for message in messages:
            properties = {**message.properties, REAL_TOPIC: self.origin,
                          ORIGIN_MESSAGE_ID: f"{message.partition}:{message.offset}"}
            self._producer.send(message.value, key=message.key, properties=properties)
        self._producer.flush()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
