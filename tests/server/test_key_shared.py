"""Key_Shared consumers in Pulsar's sticky mode (KeySharedPolicy with sticky ranges), with the real client: each
message goes to the consumer whose hash ranges hold its sticky key's slot (ordering key, else partition key;
Murmur3-32 & 0x7fffffff mod 65536, Pulsar's hash), overlapping ranges are refused, and a message no range
holds waits for a consumer that takes its slot."""

from __future__ import annotations

import mmh3
import pytest
from test_consume import EARLIEST

from helpers_server import pulsar, receive_until

TOPIC = "persistent://public/default/sticky"
KEYS = [f"key-{i}" for i in range(40)]


def slot(key: str) -> int:
    return (mmh3.hash(key.encode(), 0, signed=True) & 0x7FFFFFFF) % 65536


def sticky(*ranges: tuple[int, int]):
    return pulsar.ConsumerKeySharedPolicy(key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=list(ranges))


def subscribe(client, name: str, *ranges: tuple[int, int]):
    return client.subscribe(TOPIC, "sticky", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name,
                            initial_position=EARLIEST, key_shared_policy=sticky(*ranges))


def produce(client) -> None:
    producer = client.create_producer(TOPIC, batching_enabled=True, batching_max_publish_delay_ms=10)
    for index, key in enumerate(KEYS):
        if index % 4 == 0:  # the ordering key is the sticky key when there is one
            producer.send_async(key.encode(), None, partition_key="ignored", ordering_key=key)
        else:
            producer.send_async(key.encode(), None, partition_key=key)
    producer.flush()


def test_each_message_goes_to_the_consumer_whose_range_holds_its_key(server):
    client = server.client()
    low = subscribe(client, "low", (0, 32767))
    high = subscribe(client, "high", (32768, 65535))
    produce(client)
    got_low, got_high = receive_until([low, high], len(KEYS))
    assert sorted(m.data().decode() for m in got_low) == sorted(k for k in KEYS if slot(k) <= 32767)
    assert sorted(m.data().decode() for m in got_high) == sorted(k for k in KEYS if slot(k) > 32767)


def test_overlapping_ranges_and_a_mix_with_auto_split_are_refused(server):
    client = server.client()
    subscribe(client, "first", (0, 1000))
    with pytest.raises(pulsar.ConsumerBusy):
        subscribe(client, "second", (1000, 2000))
    with pytest.raises(pulsar.ConsumerBusy):  # an auto-split consumer beside sticky ones
        client.subscribe(TOPIC, "sticky", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="auto")


def test_a_message_no_range_holds_waits_for_a_consumer_that_takes_its_slot(server):
    client = server.client()
    low = subscribe(client, "low", (0, 32767))
    produce(client)
    (got_low,) = receive_until([low], len(KEYS), seconds=3)
    assert sorted(m.data().decode() for m in got_low) == sorted(k for k in KEYS if slot(k) <= 32767)
    high = subscribe(client, "high", (32768, 65535))
    (got_high,) = receive_until([high], len(KEYS) - len(got_low))
    assert sorted(m.data().decode() for m in got_high) == sorted(k for k in KEYS if slot(k) > 32767)
