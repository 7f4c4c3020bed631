"""`log.admin.schemas`: topics' schemas and the schema policies, as pulsar-admin's `schemas` and the namespace
and topic schema settings have them (catalog/schemas.py keeps and checks them).

Answers use Pulsar's JSON: a schema is a GetSchemaResponse ({"version", "type", "timestamp", "data",
"properties"}, `data` the definition as text), an upload a PostSchemaPayload ({"type", "schema",
"properties"})."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from seglog.catalog.schemas import UNDEFINED, SchemaInfo, Schemas, SchemaVersion, checked_strategy, key_value_parts
from seglog.errors import IncompatibleSchemaError, InvalidArgumentError, InvalidSchemaError, NotFoundError
from seglog.names import NamespaceName, TopicName

if TYPE_CHECKING:
    from seglog.broker import Broker


class AdminSchemas:
    """Topics' schemas (get, create, versions, delete, compatibility) and the schema policies of namespaces
    and topics. A topic is named as elsewhere ('tenant/namespace/topic', 'persistent://...' or a bare name);
    its schema need not wait for the topic (Pulsar keeps a schema uploaded first). Shared by threads and
    processes as the rest of the admin API is."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._schemas = Schemas(broker.catalog.metadata, broker.clock)

    def get(self, topic: str, version: int | None = None) -> dict[str, Any]:
        """The topic's latest schema, or version `version`, as Pulsar's GetSchemaResponse; NotFoundError when
        there is none, or it was deleted."""
        name = TopicName.parse(topic)
        if version is None:
            kept = self._schemas.latest(name)
        else:
            if isinstance(version, bool) or not isinstance(version, int) or version < 0:
                raise InvalidArgumentError("schema version", version, "an int of 0 or more")
            kept = self._schemas.get(name, version)
        if kept is None:
            raise NotFoundError(f"schema of {name}{'' if version is None else f' at version {version}'} not found "
                                "(none was given, or it was deleted)")
        return schema_response(kept)

    def versions(self, topic: str) -> list[dict[str, Any]]:
        """Every version since the schema was last deleted, oldest first (GetAllVersionsSchemaResponse's
        list); empty when the topic has no schema."""
        return [schema_response(kept) for kept in self._schemas.history(TopicName.parse(topic))]

    def create(self, topic: str, type: str, schema: str | bytes = "",  # noqa: A002  (Pulsar's field name)
               properties: Mapping[str, str] | None = None) -> int:
        """Upload a schema (PostSchemaPayload: its `type`, its definition `schema`, its `properties`): its
        version, a new one when it differs from those kept and is compatible with them under the strategy in
        force, else IncompatibleSchemaError. Automatic-update settings do not stop an admin's upload."""
        return self._schemas.put(TopicName.parse(topic), uploaded(type, schema, properties))

    def delete(self, topic: str, *, force: bool = False) -> int | None:
        """Delete the topic's schema: the tombstone version written (the versions before it no longer count);
        with `force`, every version is removed and None returned."""
        name = TopicName.parse(topic)
        if force:
            self._broker.catalog.metadata.delete_schema_records(name)
            return None
        return self._schemas.delete(name)

    def compatibility(self, topic: str, type: str, schema: str | bytes = "",  # noqa: A002
                      properties: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Whether the schema could be uploaded to the topic now, as Pulsar's IsCompatibilityResponse:
        {"isCompatibility": bool, "schemaCompatibilityStrategy": the strategy in force}."""
        name = TopicName.parse(topic)
        info = uploaded(type, schema, properties)
        strategy = self._schemas.rules(name).strategy
        try:
            self._schemas.check(name, info, strategy)
        except IncompatibleSchemaError:
            return {"isCompatibility": False, "schemaCompatibilityStrategy": strategy}
        return {"isCompatibility": True, "schemaCompatibilityStrategy": strategy}

    def version_of(self, topic: str, type: str, schema: str | bytes = "",  # noqa: A002
                   properties: Mapping[str, str] | None = None) -> int:
        """The version of the kept schema equal to this one; -1 when there is none (Pulsar's NO_SCHEMA_VERSION)."""
        version = self._schemas.version_of(TopicName.parse(topic), uploaded(type, schema, properties))
        return -1 if version is None else version

    # the schema policies: a namespace's and a topic's compatibility strategy, a namespace's automatic updates,
    # a namespace's and a topic's schema validation

    def get_compatibility_strategy(self, namespace: str) -> str:
        """The namespace's strategy; UNDEFINED when it sets none (the broker's, FULL, applies)."""
        return self._namespace(namespace).schema_compatibility_strategy or UNDEFINED

    def set_compatibility_strategy(self, namespace: str, strategy: str) -> None:
        """Set the namespace's strategy (UNDEFINED removes it): ALWAYS_INCOMPATIBLE, ALWAYS_COMPATIBLE, BACKWARD,
        FORWARD, FULL or a _TRANSITIVE form."""
        self._update_namespace(namespace, schema_compatibility_strategy=checked_strategy(strategy))

    def get_topic_compatibility_strategy(self, topic: str, *, applied: bool = False) -> str | None:
        """The topic's own strategy (None when it sets none), or with `applied` the one in force on it."""
        name = TopicName.parse(topic)
        if applied:
            return self._schemas.rules(name).strategy
        return self._broker.catalog.metadata.topic_policies(name).schema_compatibility_strategy

    def set_topic_compatibility_strategy(self, topic: str, strategy: str | None) -> None:
        """Set the topic's strategy, over its namespace's; None (or UNDEFINED) removes it."""
        self._update_topic(topic, schema_compatibility_strategy=None if strategy is None
                           else checked_strategy(strategy))

    def get_allow_auto_update(self, namespace: str) -> bool:
        """Whether clients may add schema versions to the namespace's topics (isAllowAutoUpdateSchema; the
        broker's default: true)."""
        allowed = self._namespace(namespace).allow_auto_update_schema
        return True if allowed is None else allowed

    def set_allow_auto_update(self, namespace: str, allowed: bool) -> None:
        self._update_namespace(namespace, allow_auto_update_schema=_flag("isAllowAutoUpdateSchema", allowed))

    def get_validation_enforced(self, namespace: str) -> bool:
        """Whether producers without a schema are refused on the namespace's topics that have one
        (schemaValidationEnforced; the broker's default: false)."""
        return bool(self._namespace(namespace).schema_validation_enforced)

    def set_validation_enforced(self, namespace: str, enforced: bool) -> None:
        self._update_namespace(namespace, schema_validation_enforced=_flag("schemaValidationEnforced", enforced))

    def get_topic_validation_enforced(self, topic: str, *, applied: bool = False) -> bool | None:
        """The topic's own setting (None when it sets none), or with `applied` the one in force on it."""
        name = TopicName.parse(topic)
        if applied:
            return self._schemas.rules(name).validation_enforced
        return self._broker.catalog.metadata.topic_policies(name).schema_validation_enforced

    def set_topic_validation_enforced(self, topic: str, enforced: bool | None) -> None:
        """Set the topic's schema validation, over its namespace's; None removes it."""
        self._update_topic(topic, schema_validation_enforced=None if enforced is None
                           else _flag("schemaValidationEnforced", enforced))

    def _namespace(self, namespace: str) -> Any:
        return self._broker.catalog.metadata.namespace_policies(NamespaceName.parse(namespace))

    def _update_namespace(self, namespace: str, **changes: Any) -> None:
        name = NamespaceName.parse(namespace)
        metadata = self._broker.catalog.metadata
        with metadata.transaction():
            metadata.set_namespace_policies(name, replace(metadata.namespace_policies(name), **changes))
        self._broker.catalog.policies_changed()

    def _update_topic(self, topic: str, **changes: Any) -> None:
        name = TopicName.parse(topic)
        metadata = self._broker.catalog.metadata
        with metadata.transaction():
            metadata.set_topic_policies(name, replace(metadata.topic_policies(name), **changes))
        self._broker.catalog.policies_changed(name)


def uploaded(type: object, schema: object, properties: object) -> SchemaInfo:  # noqa: A002
    """The schema a PostSchemaPayload uploads. A KEY_VALUE schema given as text is Pulsar's JSON of its two
    definitions, {"key": ..., "value": ...}, each an Avro schema's JSON or "" for a primitive type (the
    properties' key.schema.type and value.schema.type say which), kept as Pulsar's broker keeps it
    (SchemaUtils.convertKeyValueDataStringToSchemaInfoSchema): each definition's compact JSON after its length
    (4 bytes, big-endian). Bytes are taken as that encoding already."""
    if isinstance(type, str) and type.upper() == "KEY_VALUE" and isinstance(schema, str):
        schema = _key_value_data(schema)
    return SchemaInfo.checked(type, schema, properties)


def _key_value_data(text: str) -> bytes:
    accepted = 'a JSON object {"key": <definition>, "value": <definition>}, a definition "" for a primitive type'
    try:
        parts = json.loads(text)
    except ValueError as error:
        raise InvalidSchemaError("KEY_VALUE schema definition", text[:80], accepted, detail=str(error)) from None
    if not isinstance(parts, dict) or set(parts) != {"key", "value"}:
        raise InvalidSchemaError("KEY_VALUE schema definition", text[:80], accepted)
    data = b""
    for part in (parts["key"], parts["value"]):
        encoded = b"" if part == "" else json.dumps(part, separators=(",", ":")).encode()
        data += struct.pack(">i", len(encoded)) + encoded
    return data


def schema_response(kept: SchemaVersion) -> dict[str, Any]:
    """A kept version as Pulsar's GetSchemaResponse (a KEY_VALUE's definition as Pulsar shows it: a JSON object
    of its "key" and "value" definitions)."""
    schema = kept.schema
    if schema.type == "KEY_VALUE":
        data = json.dumps({part: _shown(info.data) for part, info in zip(("key", "value"), key_value_parts(schema))})
    else:
        data = schema.data.decode(errors="replace")
    return {"version": kept.version, "type": schema.type, "timestamp": kept.timestamp_ms, "data": data,
            "properties": dict(schema.properties)}


def _shown(definition: bytes) -> Any:
    """A definition as JSON shows it: its JSON when it is some, else its text."""
    text = definition.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _flag(argument: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(argument, value, "true or false")
    return value

