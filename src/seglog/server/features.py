"""What a client may ask for at PRODUCER or SUBSCRIBE time that seglog's server does not do, refused then,
where the client reports it at once (rather than failing its first message)."""

from __future__ import annotations

from seglog.server.errors import ServerFailure
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.metadata import reserved_subscription

_SCHEMA_TYPES = (api.Schema.Type.Value("None"), api.Schema.Type.Value("String"))


def check_producer_features(request: api.CommandProducer) -> None:
    _check_schema(request)


def check_subscribe_features(request: api.CommandSubscribe) -> None:
    _check_schema(request)
    reserved = reserved_subscription(request.subscription) if request.durable else None
    if reserved is not None:
        raise ServerFailure(api.NotAllowedError, f"subscription {request.subscription!r}: {reserved}, which "
                                                 "clients may not consume (as in Pulsar)")


def _check_schema(request: api.CommandProducer | api.CommandSubscribe) -> None:
    if request.HasField("schema") and request.schema.type not in _SCHEMA_TYPES:
        raise ServerFailure(api.IncompatibleSchema, f"schema type {api.Schema.Type.Name(request.schema.type)} "
                                                    "is not supported by seglog (bytes and string only)")
