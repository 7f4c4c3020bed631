"""Subscription types and initial positions as Pulsar spells them (Exclusive, Shared, Failover, Key_Shared, and
KeyShared; Earliest, Latest) are taken wherever one is given in-process; a wrong one is refused with the accepted
values in one line."""

import pytest

from seglog.errors import InvalidArgumentError


@pytest.mark.parametrize(("given", "subscription_type"), [
    ("Exclusive", "exclusive"), ("Shared", "shared"), ("Failover", "failover"), ("Key_Shared", "key_shared"),
    ("KeyShared", "key_shared"), ("SHARED", "shared"), ("key_shared", "key_shared")])
def test_pulsars_spellings_are_taken(log, given, subscription_type):
    topic = log.create_topic("t")
    with topic.subscribe("s", subscription_type=given) as consumer:
        assert consumer.subscription.type == subscription_type
    assert topic.stats()["subscriptions"]["s"]["type"] == subscription_type


def test_a_second_consumer_spelling_the_type_otherwise_joins_the_subscription(log):
    topic = log.create_topic("t")
    with topic.subscribe("s", subscription_type="Shared"), topic.subscribe("s", subscription_type="shared"):
        assert len(topic.stats()["subscriptions"]["s"]["consumers"]) == 2


@pytest.mark.parametrize("given", ["Sharde", "key shared", "", 3, None])
def test_a_wrong_type_is_refused_naming_the_accepted_ones_in_one_line(log, given):
    topic = log.create_topic("t")
    with pytest.raises(InvalidArgumentError) as refused:
        topic.subscribe("s", subscription_type=given)
    message = str(refused.value)
    assert "\n" not in message and "[" not in message
    assert message.endswith("accepted: exclusive, failover, shared or key_shared, in any case (Pulsar's "
                            "Exclusive, Failover, Shared, Key_Shared; KeyShared too)")
    assert topic.subscriptions() == []  # nothing left behind


@pytest.mark.parametrize(("given", "backlog"), [("Earliest", 2), ("LATEST", 0), ("latest", 0)])
def test_pulsars_initial_positions_are_taken(log, given, backlog):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send(b"a")
        producer.send(b"b")
    topic.subscribe("s", initial_position=given).close()
    assert topic.stats()["subscriptions"]["s"]["msgBacklog"] == backlog


@pytest.mark.parametrize("given", ["first", "", None])
def test_a_wrong_initial_position_is_refused_naming_the_accepted_ones(log, given):
    topic = log.create_topic("t")
    with pytest.raises(InvalidArgumentError) as refused:
        topic.subscribe("s", initial_position=given)
    assert str(refused.value).endswith("accepted: earliest or latest, in any case (Pulsar's Earliest, Latest)")
    assert topic.subscriptions() == []
