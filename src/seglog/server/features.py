"""What a client may not ask for at SUBSCRIBE time, refused then, where the client reports it at once: the
subscriptions seglog keeps for itself. (Producers may ask for everything Pulsar's broker serves; a producer's
or a consumer's schema is checked against the topic's once the topic is resolved: schemas.py.)"""

from __future__ import annotations

from seglog.server.errors import ServerFailure
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.metadata import reserved_subscription


def check_subscribe_features(request: api.CommandSubscribe) -> None:
    reserved = reserved_subscription(request.subscription) if request.durable else None
    if reserved is not None:
        raise ServerFailure(api.NotAllowedError, f"subscription {request.subscription!r}: {reserved}, which "
                                                 "clients may not consume (as in Pulsar)")

