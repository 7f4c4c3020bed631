"""Topics' schemas: Pulsar's schema registry (its SchemaRegistryServiceImpl) on the catalog's store.

Each topic has a list of schema versions 0, 1, 2...; a partitioned topic's partitions share its list. A new
schema gets the next version once it is compatible with those before it under the compatibility strategy in
force; a schema equal to one already kept gets that one's version back. Deleting a schema writes a tombstone
version: the versions before it no longer count (neither read nor checked against) and the next schema starts
a new history, as in Pulsar. Deleting a topic deletes its whole list (Pulsar's BrokerService.deleteSchema: "when
we delete a topic, the schema history is meaningless").

The strategy in force is the topic's, else its namespace's, else the broker's default, FULL (Pulsar's
schemaCompatibilityStrategy in broker.conf). Avro, JSON and PROTOBUF definitions are Avro schemas (Pulsar's
JSON and PROTOBUF schemas are Avro-described) and are checked with Apache Avro's own
ReaderWriterCompatibilityChecker, as Pulsar's broker checks them with Avro's SchemaValidator: BACKWARD means
the new schema reads data written with the old, FORWARD the old reads the new, FULL both; a _TRANSITIVE
strategy checks every version since the last deletion, the others the latest only. KEY_VALUE checks its key
and value schemas each by its own type. PROTOBUF_NATIVE keeps its root message's name. Other types (STRING,
BYTES, the primitives) are compatible with themselves, and another type is never compatible with a topic's
schema unless the strategy is ALWAYS_COMPATIBLE."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seglog.catalog.metadata import Metadata, SchemaRecord
from seglog.catalog.policies import Policies
from seglog.errors import IncompatibleSchemaError, InvalidArgumentError, InvalidSchemaError, TopicNotFoundError
from seglog.names import TopicName

if TYPE_CHECKING:
    import avro.schema

# Pulsar's SchemaType names; BYTES is what the protocol calls None (a producer with no schema)
PRIMITIVE_TYPES = ("STRING", "BOOLEAN", "INT8", "INT16", "INT32", "INT64", "FLOAT", "DOUBLE", "DATE", "TIME",
                   "TIMESTAMP", "INSTANT", "LOCAL_DATE", "LOCAL_TIME", "LOCAL_DATE_TIME", "BYTES", "NONE")
AVRO_DESCRIBED = ("AVRO", "JSON", "PROTOBUF")  # definitions that are Avro schemas
SCHEMA_TYPES = (*AVRO_DESCRIBED, "PROTOBUF_NATIVE", "KEY_VALUE", *PRIMITIVE_TYPES)
TRANSITIVE = ("BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")
STRATEGIES = ("ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL", *TRANSITIVE)
DEFAULT_STRATEGY = "FULL"  # Pulsar's broker.conf schemaCompatibilityStrategy
UNDEFINED = "UNDEFINED"  # Pulsar's name for a strategy a level does not set


@dataclass(frozen=True)
class SchemaInfo:
    """A schema as a client or an admin gives it: Pulsar's SchemaType name, its definition (an Avro schema's
    JSON for AVRO and JSON, a KEY_VALUE's two definitions as Pulsar encodes them, nothing for the primitive
    types) and its properties."""
    type: str
    data: bytes = b""
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def checked(cls, type: object, data: object = b"", properties: object = None) -> SchemaInfo:  # noqa: A002
        """A SchemaInfo from what a caller gave, each part checked: InvalidArgumentError naming the part, or
        InvalidSchemaError when the definition does not fit the type (as Pulsar's SchemaDataValidator)."""
        if not isinstance(type, str) or type.upper() not in SCHEMA_TYPES:
            raise InvalidArgumentError("schema type", type, ", ".join(SCHEMA_TYPES))
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, bytes):
            raise InvalidArgumentError("schema definition", data, "bytes or a str (the definition's JSON)")
        properties = {} if properties is None else properties
        if not isinstance(properties, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                          for k, v in properties.items()):
            raise InvalidArgumentError("schema properties", properties, "a dict of str to str")
        schema = cls(type.upper(), data, dict(properties))
        _validate(schema)
        return schema


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a topic's schema: its number, the schema and when it was added (ms since the epoch)."""
    version: int
    schema: SchemaInfo
    timestamp_ms: int


@dataclass(frozen=True)
class SchemaRules:
    """What a topic's schema policies say (each resolved topic, namespace, broker): the compatibility strategy,
    whether a new schema may be added by a client (isAllowAutoUpdateSchema) and whether a producer without a
    schema is refused on a topic that has one (schemaValidationEnforced)."""
    strategy: str = DEFAULT_STRATEGY
    allow_auto_update: bool = True
    validation_enforced: bool = False

    @classmethod
    def resolve(cls, namespace: Policies, topic: Policies) -> SchemaRules:
        strategy = topic.schema_compatibility_strategy or namespace.schema_compatibility_strategy
        enforced = topic.schema_validation_enforced
        return cls(strategy or DEFAULT_STRATEGY,
                   namespace.allow_auto_update_schema if namespace.allow_auto_update_schema is not None else True,
                   bool(enforced if enforced is not None else namespace.schema_validation_enforced))


def checked_strategy(strategy: object) -> str | None:
    """A strategy name as given (any case); None for UNDEFINED (the level sets none)."""
    if not isinstance(strategy, str) or strategy.upper() not in (*STRATEGIES, UNDEFINED):
        raise InvalidArgumentError("schema compatibility strategy", strategy, ", ".join((*STRATEGIES, UNDEFINED)))
    return None if strategy.upper() == UNDEFINED else strategy.upper()


def version_bytes(version: int) -> bytes:
    """A schema version as the protocol carries it (Pulsar's LongSchemaVersion: 8 bytes, big-endian)."""
    return struct.pack(">q", version)


def version_number(data: bytes) -> int:
    """The schema version the protocol's bytes name; InvalidArgumentError if they are not 8 bytes."""
    if len(data) != 8:
        raise InvalidArgumentError("schema version", data, "8 bytes: a version as a big-endian long")
    return int(struct.unpack(">q", data)[0])


class Schemas:
    """The schemas of every topic in one data directory's catalog. Each change is one metadata transaction,
    checks included, so two producers registering schemas at once get consecutive versions, each checked
    against the other's. Thread safety: as the Metadata it is given."""

    def __init__(self, metadata: Metadata, clock: Callable[[], int]) -> None:
        self._metadata = metadata
        self._clock = clock

    def rules(self, topic: TopicName) -> SchemaRules:
        """The schema policies in force on `topic` (a topic not created yet has only its namespace's)."""
        try:
            own = self._metadata.topic_policies(topic)
        except TopicNotFoundError:
            own = Policies()
        return SchemaRules.resolve(self._metadata.namespace_policies(topic.namespace_name), own)

    def history(self, topic: TopicName) -> list[SchemaVersion]:
        """The versions since the last deletion, oldest first (Pulsar's trimDeletedSchemaAndGetList)."""
        return _trimmed(self._metadata.schema_records(topic))

    def latest(self, topic: TopicName) -> SchemaVersion | None:
        """The newest version; None when the topic has no schema or its schema was deleted."""
        history = self.history(topic)
        return history[-1] if history else None

    def get(self, topic: TopicName, version: int) -> SchemaVersion | None:
        """Version `version`; None when there is none, or when a later deletion took it away."""
        return next((kept for kept in self.history(topic) if kept.version == version), None)

    def version_of(self, topic: TopicName, schema: SchemaInfo) -> int | None:
        """The version of the kept schema equal to `schema` (the same type, and the same Avro schema for Avro-
        described types, else the same bytes), or None."""
        return _version_of(self.history(topic), schema)

    def add(self, topic: TopicName, schema: SchemaInfo, rules: SchemaRules | None = None) -> int:
        """The version of `schema` on `topic`, added if it is new (Pulsar's AbstractTopic.addSchema): when
        automatic updates are allowed, a new schema compatible with those kept gets the next version; when
        not, only a schema kept already is accepted. IncompatibleSchemaError otherwise."""
        rules = rules or self.rules(topic)
        if rules.allow_auto_update:
            return self.put(topic, schema, rules.strategy)
        version = self.version_of(topic, schema)
        if version is None:
            raise IncompatibleSchemaError(f"schema of {topic}: schema not found and schema auto updating is "
                                          "disabled (isAllowAutoUpdateSchema false)")
        return version

    def put(self, topic: TopicName, schema: SchemaInfo, strategy: str | None = None) -> int:
        """Add `schema` to `topic` unless an equal one is kept, checked against those kept under `strategy`
        (the strategy in force when None): its version (Pulsar's putSchemaIfAbsent, what an admin upload
        does). IncompatibleSchemaError when it is not compatible."""
        with self._metadata.transaction():
            strategy = strategy or self.rules(topic).strategy
            records = self._metadata.schema_records(topic)
            history = _trimmed(records)
            kept = _version_of(history, schema)
            if kept is not None:
                return kept
            check_compatible(history, schema, strategy)
            version = records[-1].version + 1 if records else 0
            self._metadata.add_schema_record(topic, SchemaRecord(version, schema.type, schema.data,
                                                                 dict(schema.properties), self._clock(), False))
            return version

    def check(self, topic: TopicName, schema: SchemaInfo, strategy: str | None = None) -> str:
        """Whether `schema` could be added to `topic`: IncompatibleSchemaError if not; the strategy checked
        under (Pulsar's schemas compatibility endpoint)."""
        strategy = strategy or self.rules(topic).strategy
        history = self.history(topic)
        if _version_of(history, schema) is None:
            check_compatible(history, schema, strategy)
        return strategy

    def check_consumer(self, topic: TopicName, schema: SchemaInfo, strategy: str | None = None) -> None:
        """Whether a consumer with `schema` may read `topic` (Pulsar's checkConsumerCompatibility): under
        BACKWARD, FORWARD, FORWARD_TRANSITIVE and FULL, its schema must read the latest; under the others, as a
        new schema would be checked against every version. IncompatibleSchemaError if not, or if the topic
        has no schema to check it against."""
        strategy = strategy or self.rules(topic).strategy
        if strategy == "ALWAYS_COMPATIBLE":
            return
        history = self.history(topic)
        if not history:
            raise IncompatibleSchemaError(f"schema of {topic}: the topic has no schema to check a consumer's "
                                          f"{schema.type} schema against")
        if strategy in ("BACKWARD", "FORWARD", "FORWARD_TRANSITIVE", "FULL"):
            check_compatible(history[-1:], schema, "BACKWARD")
        else:
            check_compatible(history, schema, strategy)

    def delete(self, topic: TopicName) -> int:
        """Delete `topic`'s schema: a tombstone version, which it returns (written whatever the topic had, as
        Pulsar's deleteSchema does)."""
        with self._metadata.transaction():
            records = self._metadata.schema_records(topic)
            version = records[-1].version + 1 if records else 0
            self._metadata.add_schema_record(topic, SchemaRecord(version, "NONE", b"", {}, self._clock(), True))
            return version

def check_compatible(history: list[SchemaVersion], schema: SchemaInfo, strategy: str) -> None:
    """Whether `schema` may follow `history` (oldest first) under `strategy`; IncompatibleSchemaError naming
    why not. Non-transitive strategies look at the latest version only."""
    if strategy == "ALWAYS_COMPATIBLE" or not history:
        return
    existing = history if strategy in TRANSITIVE else history[-1:]
    other = next((kept for kept in existing if kept.schema.type != schema.type), None)
    if other is not None:
        raise IncompatibleSchemaError(f"incompatible schema: exists schema type {other.schema.type} (version "
                                      f"{other.version}), new schema type {schema.type}")
    if strategy == "ALWAYS_INCOMPATIBLE":
        raise IncompatibleSchemaError("schema compatibility strategy is ALWAYS_INCOMPATIBLE")
    for kept in reversed(existing):
        if kept.schema.data != schema.data:
            _check_pair(kept.schema, schema, strategy.removesuffix("_TRANSITIVE"), kept.version)


def _check_pair(old: SchemaInfo, new: SchemaInfo, direction: str, version: int) -> None:
    """`new` against one kept schema of the same type, `direction` BACKWARD, FORWARD or FULL."""
    if new.type in AVRO_DESCRIBED:
        _check_avro(old.data, new.data, direction, version)
    elif new.type == "KEY_VALUE":
        for part, (old_part, new_part) in zip(("key", "value"), zip(key_value_parts(old), key_value_parts(new))):
            if old_part.type != new_part.type:
                raise IncompatibleSchemaError(f"incompatible KEY_VALUE schema: the {part} schema was "
                                              f"{old_part.type} (version {version}), is {new_part.type}")
            if old_part.data != new_part.data:
                _check_pair(old_part, new_part, direction, version)
    elif new.type == "PROTOBUF_NATIVE":
        old_root, new_root = _protobuf_root(old), _protobuf_root(new)
        if old_root != new_root:
            raise IncompatibleSchemaError(f"incompatible PROTOBUF_NATIVE schema: its root message was {old_root!r} "
                                          f"(version {version}), is {new_root!r}")


def _check_avro(old: bytes, new: bytes, direction: str, version: int) -> None:
    # (avro is imported when a schema is first checked: it would cost every `import seglog` 12 ms)
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaIncompatibilityType

    checker = ReaderWriterCompatibilityChecker()
    old_schema, new_schema = _avro(old), _avro(new)
    pairs = {"BACKWARD": [("the new schema", new_schema, old_schema)],
             "FORWARD": [(f"version {version}", old_schema, new_schema)]}
    for reader_name, reader, writer in pairs.get(direction, pairs["BACKWARD"] + pairs["FORWARD"]):
        result = checker.get_compatibility(reader, writer)
        # Pulsar validates with Avro's resolving grammar (SchemaValidatorBuilder), which reads a record written
        # under another name: a name mismatch alone is no incompatibility
        if set(result.incompatibilities) - {SchemaIncompatibilityType.name_mismatch}:
            writer_name = f"version {version}" if reader_name == "the new schema" else "the new schema"
            problems = "; ".join(sorted(result.messages)) or "incompatible"
            raise IncompatibleSchemaError(f"incompatible schema under {direction}: {reader_name} cannot read data "
                                          f"written with {writer_name} ({problems})")


def _avro(data: bytes) -> avro.schema.Schema:
    import avro.errors
    import avro.schema

    try:
        return avro.schema.parse(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError, avro.errors.AvroException) as error:
        raise InvalidSchemaError("schema definition", data[:80], "an Avro schema's JSON (Pulsar's AVRO, JSON "
                                 "and PROTOBUF schemas are Avro schemas)", detail=str(error)) from None


def key_value_parts(schema: SchemaInfo) -> tuple[SchemaInfo, SchemaInfo]:
    """The key and value schemas of a KEY_VALUE schema: its definition holds both, each after its length
    (4 bytes, big-endian; -1 for none), its properties their types (Pulsar's KeyValueSchemaInfo)."""
    parts, data = [], schema.data
    for _ in range(2):
        if len(data) < 4:
            raise InvalidSchemaError("KEY_VALUE schema definition", schema.data[:80],
                                     "the key's and the value's definitions, each after its length (4 bytes)")
        size = struct.unpack(">i", data[:4])[0]
        size = max(size, 0)
        parts.append(data[4:4 + size])
        data = data[4 + size:]
    properties = schema.properties
    return (SchemaInfo(properties.get("key.schema.type", "BYTES").upper(), parts[0]),
            SchemaInfo(properties.get("value.schema.type", "BYTES").upper(), parts[1]))


def _protobuf_root(schema: SchemaInfo) -> str:
    try:
        return str(json.loads(schema.data)["rootMessageTypeName"])
    except (ValueError, KeyError, TypeError):
        raise InvalidSchemaError("PROTOBUF_NATIVE schema definition", schema.data[:80],
                                 'a JSON object with "fileDescriptorSet", "rootMessageTypeName" and '
                                 '"rootFileDescriptorName"') from None


def _validate(schema: SchemaInfo) -> None:
    """Refuse a definition that does not fit its type (Pulsar's SchemaDataValidator)."""
    if schema.type in AVRO_DESCRIBED:
        _avro(schema.data)
    elif schema.type == "KEY_VALUE":
        for part in key_value_parts(schema):
            if part.type in SCHEMA_TYPES and part.type != "KEY_VALUE":
                _validate(part)
    elif schema.type == "PROTOBUF_NATIVE":
        _protobuf_root(schema)
    elif schema.data and schema.type not in ("BYTES", "NONE", "STRING"):
        raise InvalidSchemaError(f"{schema.type} schema definition", schema.data[:80],
                                 "no definition: a primitive schema has none")


def _version_of(history: list[SchemaVersion], schema: SchemaInfo) -> int | None:
    same = _avro_equal if schema.type in AVRO_DESCRIBED else bytes.__eq__
    return next((kept.version for kept in history
                 if kept.schema.type == schema.type and same(kept.schema.data, schema.data)), None)


def _avro_equal(kept: bytes, given: bytes) -> bool:
    """Whether two Avro definitions are the same schema, whatever their spacing and key order."""
    return kept == given or _avro(kept) == _avro(given)


def _trimmed(records: list[SchemaRecord]) -> list[SchemaVersion]:
    """The versions after the last tombstone."""
    start = next((index + 1 for index in range(len(records) - 1, -1, -1) if records[index].deleted), 0)
    return [SchemaVersion(record.version, SchemaInfo(record.type, record.data, record.properties),
                          record.timestamp_ms) for record in records[start:]]
