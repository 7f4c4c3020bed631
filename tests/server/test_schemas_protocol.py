"""Schemas over Pulsar's binary protocol with the real pulsar-client (issue 28): `pulsar.schema` Records with
JsonSchema and AvroSchema round-trip, a producer gets its schema version and each message carries it, an
incompatible producer is refused with IncompatibleSchema, compatible evolution gets the next version, and
the namespace policies (strategy, auto update, validation) take effect."""

from __future__ import annotations

import json
import struct

import _pulsar
import pytest
from pulsar.schema import AvroSchema, Float, Integer, JsonSchema, Record, String, StringSchema

from helpers_server import pulsar, refused_at_once, rest

NAMESPACE = "/admin/v2/namespaces/public/default"


class User(Record):
    name = String()
    age = Integer()


def _evolved() -> tuple[type[Record], type[Record]]:
    """User with a field that has a default (compatible under every strategy but ALWAYS_INCOMPATIBLE), and User
    with a required field of its own (its readers cannot read User's data): the same record name, User."""
    class User(Record):
        name = String()
        age = Integer()
        email = String(required_default=True)

    with_email = User

    class User(Record):  # noqa: F811  (the record's name is its class's)
        name = String()
        score = Float(required=True)

    return with_email, User


UserWithEmail, UserScored = _evolved()


def version(number: int) -> bytes:
    return struct.pack(">q", number)


@pytest.mark.parametrize("schema_type", [JsonSchema, AvroSchema])
def test_records_round_trip_with_their_schema_version(server, schema_type) -> None:
    client = server.client()
    topic = f"users-{schema_type.__name__}"
    consumer = client.subscribe(topic, "s", schema=schema_type(User))
    producer = client.create_producer(topic, schema=schema_type(User))
    producer.send(User(name="ada", age=36))
    message = consumer.receive(10_000)
    assert message.value() == User(name="ada", age=36)
    assert message.schema_version().encode() == version(0)
    status, latest = rest(server.http_url, "GET", f"/admin/v2/schemas/public/default/{topic}/schema")
    assert (status, latest["version"], latest["type"]) == (200, 0, schema_type(User).schema_info().schema_type().name)


def test_compatible_evolution_gets_version_1_and_both_versions_are_read(server) -> None:
    client = server.client()
    consumer = client.subscribe("evolving", "s", schema=AvroSchema(User))
    client.create_producer("evolving", schema=AvroSchema(User)).send(User(name="a", age=1))
    producer = client.create_producer("evolving", schema=AvroSchema(UserWithEmail))
    producer.send(UserWithEmail(name="b", age=2, email="b@example.com"))
    first, second = consumer.receive(10_000), consumer.receive(10_000)
    assert (first.schema_version().encode(), second.schema_version().encode()) == (version(0), version(1))
    assert (first.value().name, second.value().name) == ("a", "b")
    status, versions = rest(server.http_url, "GET", "/admin/v2/schemas/public/default/evolving/schemas")
    assert status == 200 and [v["version"] for v in versions["getSchemaResponses"]] == [0, 1]


def test_an_incompatible_producer_is_refused_with_incompatible_schema(server) -> None:
    assert rest(server.http_url, "PUT", f"{NAMESPACE}/schemaCompatibilityStrategy", "BACKWARD")[0] == 204
    client = server.client()
    client.create_producer("strict", schema=AvroSchema(User))
    text = refused_at_once(pulsar.IncompatibleSchema,
                           lambda: client.create_producer("strict", schema=AvroSchema(UserScored)))
    assert "IncompatibleSchema" in text or "ncompatible" in text
    # the topic's schema is unchanged: one version
    status, versions = rest(server.http_url, "GET", "/admin/v2/schemas/public/default/strict/schemas")
    assert [v["version"] for v in versions["getSchemaResponses"]] == [0]


def test_another_type_is_refused_and_a_bytes_producer_allowed_unless_validation_is_enforced(server) -> None:
    client = server.client()
    client.create_producer("typed", schema=JsonSchema(User))
    refused_at_once(pulsar.IncompatibleSchema, lambda: client.create_producer("typed", schema=StringSchema()))
    client.create_producer("typed").send(b"raw bytes")  # no schema: allowed, as Pulsar's broker does
    assert rest(server.http_url, "POST", f"{NAMESPACE}/schemaValidationEnforced", True)[0] == 204
    assert rest(server.http_url, "GET", f"{NAMESPACE}/schemaValidationEnforced") == (200, True)
    refused_at_once(pulsar.IncompatibleSchema, lambda: client.create_producer("typed"))


def test_auto_update_off_refuses_a_new_schema_version(server) -> None:
    client = server.client()
    client.create_producer("frozen", schema=AvroSchema(User))
    assert rest(server.http_url, "POST", f"{NAMESPACE}/isAllowAutoUpdateSchema", False)[0] == 204
    assert rest(server.http_url, "GET", f"{NAMESPACE}/isAllowAutoUpdateSchema") == (200, False)
    refused_at_once(pulsar.IncompatibleSchema,
                    lambda: client.create_producer("frozen", schema=AvroSchema(UserWithEmail)))
    client.create_producer("frozen", schema=AvroSchema(User))  # a kept schema is still accepted


def test_a_consumer_schema_is_checked_against_the_topic(server) -> None:
    client = server.client()
    client.create_producer("read-checked", schema=AvroSchema(User))
    client.subscribe("read-checked", "ok", schema=AvroSchema(User))
    refused_at_once(pulsar.IncompatibleSchema,
                    lambda: client.subscribe("read-checked", "bad", schema=AvroSchema(UserScored)))


def test_a_consumer_registers_the_schema_of_an_idle_topic(server) -> None:
    client = server.client()
    client.subscribe("idle", "s", schema=JsonSchema(User))
    status, latest = rest(server.http_url, "GET", "/admin/v2/schemas/public/default/idle/schema")
    assert status == 200 and latest["type"] == "JSON"


def test_partitions_share_their_topic_schema(server) -> None:
    assert rest(server.http_url, "PUT", "/admin/v2/persistent/public/default/parts/partitions", 3)[0] == 204
    client = server.client()
    producer = client.create_producer("parts", schema=AvroSchema(User))
    consumer = client.subscribe("parts", "s", schema=AvroSchema(User))
    for age in range(6):
        producer.send(User(name="p", age=age), partition_key=str(age))
    assert sorted(consumer.receive(10_000).value().age for _ in range(6)) == list(range(6))
    status, versions = rest(server.http_url, "GET", "/admin/v2/schemas/public/default/parts/schemas")
    assert [v["version"] for v in versions["getSchemaResponses"]] == [0]


def test_string_schema_round_trips(server) -> None:
    client = server.client()
    consumer = client.subscribe("texts", "s", schema=StringSchema())
    client.create_producer("texts", schema=StringSchema()).send("héllo")
    assert consumer.receive(10_000).value() == "héllo"
    assert rest(server.http_url, "GET", "/admin/v2/schemas/public/default/texts/schema")[1]["type"] == "STRING"


def test_get_schema_of_a_partition_answers_its_topic_schema(server) -> None:
    """GET_SCHEMA (the client's get_schema_info): a partition's name means its partitioned topic's schema;
    -1 asks for the latest; a topic without a schema is TopicNotFound, as Pulsar answers. (pulsar.Client
    offers the call only on its C++ core, `_client`: the one way to send GET_SCHEMA with the real client.)"""
    assert rest(server.http_url, "PUT", "/admin/v2/persistent/public/default/parts/partitions", 2)[0] == 204
    client = server.client()
    client.create_producer("parts", schema=AvroSchema(User)).close()
    for topic in ("persistent://public/default/parts-partition-1", "persistent://public/default/parts"):
        info = client._client.get_schema_info(topic, -1)
        assert info.schema_type() == _pulsar.SchemaType.AVRO
        assert json.loads(info.schema())["name"] == "User"
    with pytest.raises(pulsar.TopicNotFound):
        client._client.get_schema_info("persistent://public/default/schemaless", -1)
