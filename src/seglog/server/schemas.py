"""Pulsar's schema protocol on the catalog's schemas (catalog/schemas.py; docs/SERVER.md, "Schemas"): a
producer's schema registered or checked at PRODUCER, a consumer's at SUBSCRIBE, GET_SCHEMA and
GET_OR_CREATE_SCHEMA, as Pulsar's ServerCnx and AbstractTopic do them. Every function here blocks on the
catalog: connections call them in their thread pool. A partitioned topic's partitions share its schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from seglog.broker import Broker
from seglog.catalog.schemas import SchemaInfo, Schemas, version_bytes, version_number
from seglog.errors import IncompatibleSchemaError, InvalidArgumentError
from seglog.names import TopicName
from seglog.server import auth
from seglog.server.errors import ServerFailure, server_error
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import Type, command
from seglog.server.service import BrokerService, Target

T = TypeVar("T")

# the protocol's Schema.Type values by Pulsar's SchemaType names (the protocol's None is a producer's BYTES)
_TYPE_NAMES = {"None": "BYTES", "String": "STRING", "Json": "JSON", "Protobuf": "PROTOBUF", "Avro": "AVRO",
               "Bool": "BOOLEAN", "Int8": "INT8", "Int16": "INT16", "Int32": "INT32", "Int64": "INT64",
               "Float": "FLOAT", "Double": "DOUBLE", "Date": "DATE", "Time": "TIME", "Timestamp": "TIMESTAMP",
               "KeyValue": "KEY_VALUE", "Instant": "INSTANT", "LocalDate": "LOCAL_DATE", "LocalTime": "LOCAL_TIME",
               "LocalDateTime": "LOCAL_DATE_TIME", "ProtobufNative": "PROTOBUF_NATIVE"}
_BY_NAME = {name: api.Schema.Type.Value(value) for value, name in _TYPE_NAMES.items()}
_BY_NAME["NONE"] = api.Schema.Type.Value("None")
AUTO_CONSUME = api.Schema.Type.Value("AutoConsume")


class SchemaConnection(Protocol):
    """What the schema commands use of a connection (connection.Connection)."""
    service: BrokerService

    async def blocking(self, function: Callable[..., T], *args: Any) -> T: ...
    def send(self, base: api.BaseCommand) -> None: ...
    async def authorize(self, name: str, actions: tuple[str, ...], doing: str) -> None: ...


def registry(broker: Broker) -> Schemas:
    return Schemas(broker.catalog.metadata, broker.clock)


def schema_info(schema: api.Schema) -> SchemaInfo:
    """A protocol Schema as the catalog keeps it; InvalidSchemaError if its definition does not fit its type."""
    return SchemaInfo.checked(_TYPE_NAMES[api.Schema.Type.Name(schema.type)], schema.schema_data,
                              {pair.key: pair.value for pair in schema.properties})


def protocol_schema(name: TopicName, schema: SchemaInfo) -> api.Schema:
    """A kept schema as GET_SCHEMA answers it, named as Pulsar names it: the topic's 'tenant/namespace/topic'."""
    return api.Schema(name=str(name), schema_data=schema.data, type=_BY_NAME[schema.type],
                      properties=[api.KeyValue(key=k, value=v) for k, v in schema.properties.items()])


def producer_schema(broker: Broker, target: Target, schema: api.Schema | None) -> bytes | None:
    """The schema version a producer's PRODUCER_SUCCESS gives it (ServerCnx.tryAddSchema): its schema's,
    registered if it is new and allowed; None for a producer without a schema (or with BYTES: no schema),
    which is refused if the topic has a schema and schema validation is enforced. IncompatibleSchemaError
    when refused."""
    name = target.ref.name
    schemas = registry(broker)
    rules = schemas.rules(name)
    if schema is None or schema.type == api.Schema.Type.Value("None"):
        if rules.validation_enforced and schemas.latest(name) is not None:
            raise IncompatibleSchemaError(f"{name}: producers cannot connect or send message without a schema to "
                                          "topics with a schema (schemaValidationEnforced)")
        return None
    return version_bytes(schemas.add(name, schema_info(schema), rules))


def consumer_schema(broker: Broker, target: Target, schema: api.Schema) -> None:
    """Check (or register) a consumer's schema at SUBSCRIBE (Pulsar's addSchemaIfIdleOrCheckCompatible): on a
    topic with a schema, with producers or with messages, it must be compatible (Schemas.check_consumer); on
    an idle topic with none, it becomes the topic's schema. AUTO_CONSUME and BYTES consumers read anything."""
    if schema.type in (AUTO_CONSUME, api.Schema.Type.Value("None")):
        return
    info, name = schema_info(schema), target.ref.name
    schemas = registry(broker)
    rules = schemas.rules(name)
    if schemas.latest(name) is not None:
        schemas.check_consumer(name, info, rules.strategy)
    elif broker.store.producers(name) or broker.store.end_offset(name, target.partition):
        raise IncompatibleSchemaError(f"{name}: failed to add schema to an active topic with empty(BYTES) schema: "
                                      f"new schema type {info.type}")
    else:
        schemas.add(name, info, rules)


def get_schema(broker: Broker, topic: TopicName, version: bytes | None) -> tuple[api.Schema, bytes]:
    """GET_SCHEMA: the topic's latest schema, or version `version` (protocol bytes), with its version;
    TopicNotFound when there is none (or it was deleted), as Pulsar answers."""
    schemas = registry(broker)
    kept = schemas.latest(topic) if version is None else schemas.get(topic, version_number(version))
    if kept is None:
        raise ServerFailure(api.TopicNotFound, f"Topic not found or no-schema {topic}")
    return protocol_schema(topic, kept.schema), version_bytes(kept.version)


def schema_topic(service: BrokerService, name: str) -> TopicName:
    """The topic whose schema a GET_SCHEMA names: a partition's name (`NAME-partition-N`, as the service
    parses it) means its partitioned topic's."""
    try:
        topic, partitioned, _ = service.parse(name)
    except InvalidArgumentError as error:
        raise ServerFailure(api.InvalidTopicName, str(error)) from None
    return partitioned or topic


async def answer_get_schema(connection: SchemaConnection, request: api.CommandGetSchema) -> None:
    """GET_SCHEMA: GET_SCHEMA_RESPONSE with the schema and its version, or with the error (Pulsar answers
    TopicNotFound for a topic without schema)."""
    version = request.schema_version if request.HasField("schema_version") else None
    try:
        topic = schema_topic(connection.service, request.topic)
        await connection.authorize(request.topic, auth.LOOKUP, f"get the schema of {request.topic}")
        schema, kept_version = await connection.blocking(get_schema, connection.service.broker, topic, version)
    except Exception as error:  # (answered)
        failure = server_error(error)
        connection.send(command(Type.GET_SCHEMA_RESPONSE, request_id=request.request_id, error_code=failure.code,
                                error_message=str(failure)))
        return
    response = command(Type.GET_SCHEMA_RESPONSE, request_id=request.request_id, schema_version=kept_version)
    response.get_schema_response.schema.CopyFrom(schema)
    connection.send(response)


async def answer_get_or_create_schema(connection: SchemaConnection, request: api.CommandGetOrCreateSchema) -> None:
    """GET_OR_CREATE_SCHEMA (a producer sending a message with a schema of its own): the version of the
    schema, registered as a producer's would be; the topic must exist (TopicNotFound otherwise)."""
    service = connection.service
    try:
        await connection.authorize(request.topic, auth.PRODUCE, f"produce to {request.topic}")
        target = await connection.blocking(service.resolve, request.topic, False)
        if target is None:
            raise ServerFailure(api.TopicNotFound, f"Topic not found {request.topic}")
        version = await connection.blocking(producer_schema, service.broker, target, request.schema)
    except Exception as error:  # (answered)
        failure = server_error(error)
        connection.send(command(Type.GET_OR_CREATE_SCHEMA_RESPONSE, request_id=request.request_id,
                                error_code=failure.code, error_message=str(failure)))
        return
    connection.send(command(Type.GET_OR_CREATE_SCHEMA_RESPONSE, request_id=request.request_id,
                            schema_version=version or b""))
