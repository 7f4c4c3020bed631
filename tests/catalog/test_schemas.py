"""Topics' schemas in the catalog (issue 28): versions 0, 1, 2... per topic, Pulsar's compatibility strategies
checked with Apache Avro, tombstones for deletions, and a topic's deletion taking its schemas along."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from seglog.catalog.metadata import Metadata
from seglog.catalog.policies import Policies
from seglog.catalog.schemas import SchemaInfo, SchemaRules, Schemas, checked_strategy, version_bytes, version_number
from seglog.errors import IncompatibleSchemaError, InvalidArgumentError, InvalidSchemaError
from seglog.names import TopicName

TOPIC = TopicName("public", "default", "users")


def record(*fields: dict) -> bytes:
    return json.dumps({"type": "record", "name": "User", "fields": list(fields)}).encode()


NAME = {"name": "name", "type": "string"}
AGE = {"name": "age", "type": "int"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}
V1 = SchemaInfo("AVRO", record(NAME))
WITH_DEFAULT = SchemaInfo("AVRO", record(NAME, AGE_DEFAULT))
WITHOUT_DEFAULT = SchemaInfo("AVRO", record(NAME, AGE))


@pytest.fixture
def metadata(tmp_path: Path) -> Metadata:
    store = Metadata(tmp_path / "meta.sqlite")
    yield store
    store.close()


@pytest.fixture
def schemas(metadata: Metadata) -> Schemas:
    return Schemas(metadata, lambda: 1_700_000_000_000)


def test_versions_count_from_zero_and_an_equal_schema_gets_its_version_back(schemas: Schemas) -> None:
    assert schemas.put(TOPIC, V1) == 0
    assert schemas.put(TOPIC, SchemaInfo("AVRO", json.dumps(json.loads(record(NAME)), indent=2).encode())) == 0
    assert schemas.put(TOPIC, WITH_DEFAULT) == 1
    latest = schemas.latest(TOPIC)
    assert latest is not None and (latest.version, latest.schema, latest.timestamp_ms) == (1, WITH_DEFAULT,
                                                                                          1_700_000_000_000)
    assert [kept.version for kept in schemas.history(TOPIC)] == [0, 1]


def test_full_is_the_default_and_refuses_a_field_without_default(schemas: Schemas) -> None:
    schemas.put(TOPIC, V1)
    with pytest.raises(IncompatibleSchemaError, match="FULL"):
        schemas.put(TOPIC, WITHOUT_DEFAULT)
    assert schemas.latest(TOPIC).version == 0


@pytest.mark.parametrize(("strategy", "accepted"), [
    ("BACKWARD", False), ("FORWARD", True), ("FULL", False), ("ALWAYS_COMPATIBLE", True),
    ("ALWAYS_INCOMPATIBLE", False)])
def test_a_required_field_added_under_each_strategy(schemas: Schemas, strategy: str, accepted: bool) -> None:
    schemas.put(TOPIC, V1)
    if accepted:
        assert schemas.put(TOPIC, WITHOUT_DEFAULT, strategy) == 1
    else:
        with pytest.raises(IncompatibleSchemaError):
            schemas.put(TOPIC, WITHOUT_DEFAULT, strategy)


def test_transitive_strategies_check_every_version_since_the_last_deletion(schemas: Schemas) -> None:
    # v0 {name}, v1 {name, age=0}; {name, age} reads v1's data but not v0's (age has no default there)
    schemas.put(TOPIC, V1)
    schemas.put(TOPIC, WITH_DEFAULT, "BACKWARD")
    with pytest.raises(IncompatibleSchemaError, match="version 0"):
        schemas.put(TOPIC, WITHOUT_DEFAULT, "BACKWARD_TRANSITIVE")
    assert schemas.put(TOPIC, WITHOUT_DEFAULT, "BACKWARD") == 2


def test_a_record_renamed_is_compatible_as_pulsar_resolves_it(schemas: Schemas) -> None:
    schemas.put(TOPIC, V1)
    renamed = SchemaInfo("AVRO", json.dumps({"type": "record", "name": "Person", "fields": [NAME]}).encode())
    assert schemas.put(TOPIC, renamed, "FULL") == 1


def test_another_type_is_refused_unless_always_compatible(schemas: Schemas) -> None:
    schemas.put(TOPIC, V1)
    with pytest.raises(IncompatibleSchemaError, match="exists schema type AVRO .version 0., new schema type STRING"):
        schemas.put(TOPIC, SchemaInfo("STRING"), "BACKWARD")
    assert schemas.put(TOPIC, SchemaInfo("STRING"), "ALWAYS_COMPATIBLE") == 1


def test_a_deletion_is_a_tombstone_version_and_starts_a_new_history(schemas: Schemas) -> None:
    schemas.put(TOPIC, V1)
    assert schemas.delete(TOPIC) == 1
    assert schemas.latest(TOPIC) is None and schemas.get(TOPIC, 0) is None
    assert schemas.put(TOPIC, SchemaInfo("JSON", record(NAME, AGE)), "BACKWARD") == 2
    assert schemas.delete(TOPIC) == 3 and schemas.delete(TOPIC) == 4  # as Pulsar: a tombstone each time


def test_a_deleted_topic_takes_its_schemas_along(metadata: Metadata, schemas: Schemas) -> None:
    metadata.create_topic(TOPIC, 1, {}, 0)
    schemas.put(TOPIC, V1)
    schemas.put(TOPIC, WITH_DEFAULT)
    metadata.delete_topic(TOPIC)
    assert schemas.history(TOPIC) == []
    assert schemas.put(TOPIC, SchemaInfo("STRING")) == 0


def test_auto_update_off_accepts_only_kept_schemas(schemas: Schemas) -> None:
    schemas.put(TOPIC, V1)
    rules = SchemaRules(allow_auto_update=False)
    assert schemas.add(TOPIC, V1, rules) == 0
    with pytest.raises(IncompatibleSchemaError, match="auto updating is disabled"):
        schemas.add(TOPIC, WITH_DEFAULT, rules)


def test_consumers_read_the_latest_schema_backward(schemas: Schemas) -> None:
    with pytest.raises(IncompatibleSchemaError, match="no schema"):
        schemas.check_consumer(TOPIC, V1)
    schemas.put(TOPIC, WITH_DEFAULT)
    schemas.check_consumer(TOPIC, V1)  # a reader of {name} reads {name, age}
    with pytest.raises(IncompatibleSchemaError):
        schemas.check_consumer(TOPIC, SchemaInfo("AVRO", record(NAME, {"name": "email", "type": "string"})))


def test_key_value_checks_key_and_value_by_their_types(schemas: Schemas) -> None:
    def key_value(value: bytes) -> SchemaInfo:
        return SchemaInfo("KEY_VALUE", struct.pack(">i", 0) + struct.pack(">i", len(value)) + value,
                          {"key.schema.type": "STRING", "value.schema.type": "AVRO", "kv.encoding.type": "SEPARATED"})
    schemas.put(TOPIC, key_value(record(NAME)))
    assert schemas.put(TOPIC, key_value(record(NAME, AGE_DEFAULT))) == 1
    with pytest.raises(IncompatibleSchemaError):
        schemas.put(TOPIC, key_value(record(AGE)))


def test_rules_resolve_topic_over_namespace_over_the_broker_default() -> None:
    assert SchemaRules.resolve(Policies(), Policies()) == SchemaRules("FULL", True, False)
    namespace = Policies(schema_compatibility_strategy="BACKWARD", allow_auto_update_schema=False,
                         schema_validation_enforced=True)
    assert SchemaRules.resolve(namespace, Policies()) == SchemaRules("BACKWARD", False, True)
    topic = Policies(schema_compatibility_strategy="FORWARD_TRANSITIVE", schema_validation_enforced=False)
    assert SchemaRules.resolve(namespace, topic) == SchemaRules("FORWARD_TRANSITIVE", False, False)


def test_policies_keep_the_schema_fields() -> None:
    policies = Policies(schema_compatibility_strategy="FULL", allow_auto_update_schema=False,
                        schema_validation_enforced=True)
    assert Policies.from_json(policies.to_json()) == policies


@pytest.mark.parametrize(("kind", "data", "error"), [
    ("AVRO", b"not json", InvalidSchemaError), ("JSON", b'{"type": "record"}', InvalidSchemaError),
    ("INT64", b"x", InvalidSchemaError), ("PROTOBUF_NATIVE", b"{}", InvalidSchemaError),
    ("NUMBER", b"", InvalidArgumentError)])
def test_a_definition_that_does_not_fit_its_type_is_refused(kind: str, data: bytes, error: type) -> None:
    with pytest.raises(error, match="accepted"):
        SchemaInfo.checked(kind, data)


def test_strategy_names_and_version_bytes() -> None:
    assert checked_strategy("backward_transitive") == "BACKWARD_TRANSITIVE"
    assert checked_strategy("UNDEFINED") is None
    with pytest.raises(InvalidArgumentError, match="ALWAYS_INCOMPATIBLE"):
        checked_strategy("SOMETIMES")
    assert version_bytes(1) == b"\0" * 7 + b"\1" and version_number(version_bytes(42)) == 42
