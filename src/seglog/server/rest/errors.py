"""seglog's exceptions as the HTTP statuses of Pulsar's admin REST API, and the error body.

Every error answers `{"reason": "..."}`, as Pulsar does; seglog adds `error` (the exception's class) and, for
an invalid argument, `argument`, `accepted` and `detail`, so `seglog --url` shows the same message as on a
data directory. Pulsar's clients read `reason` only."""

from __future__ import annotations

import json
from typing import Any

from seglog.errors import (
    AlreadyExistsError,
    ClosedError,
    ClusterInUseError,
    ClusterNotAllowedError,
    ConfigurationStoreError,
    ConsumerBusyError,
    IncompatibleSchemaError,
    InvalidArgumentError,
    InvalidNameError,
    InvalidSchemaError,
    MetadataError,
    NotEmptyError,
    NotFoundError,
    PartitionLockedError,
    SeglogError,
    TopicExistsError,
    TopicInUseError,
    TopicNotFoundError,
    UnusableClusterError,
)
from seglog.lifecycle.compaction import CompactionRunningError
from seglog.server.errors import ServerFailure
from seglog.server.protocol import pulsar_api_pb2 as api


class RestError(Exception):
    """A request refused with an HTTP status and a reason."""

    def __init__(self, status: int, reason: str, cause: SeglogError | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.cause = cause  # a seglog error answered with another status than its own: its body fields


_STATUSES: list[tuple[type[BaseException], int]] = [
    (TopicNotFoundError, 404),
    (NotFoundError, 404),
    (TopicExistsError, 409),
    (AlreadyExistsError, 409),
    (NotEmptyError, 409),  # a tenant with namespaces, a namespace with topics (Pulsar: 409)
    (InvalidNameError, 412),  # Pulsar: 412 "... name is not valid"
    (UnusableClusterError, 412),  # Pulsar: 412 "Clusters do not exist"
    (ClusterNotAllowedError, 403),  # Pulsar: 403 "Cluster [x] is not in the list of allowed clusters list ..."
    (ClusterInUseError, 412),  # Pulsar: 412 "Active namespaces", "Cluster not empty"
    (IncompatibleSchemaError, 409),  # Pulsar: 409 "Incompatible schema"
    (InvalidSchemaError, 422),  # Pulsar: 422 "Invalid schema data"
    (InvalidArgumentError, 400),
    (TopicInUseError, 412),  # Pulsar: 412 "Topic has active producers/subscriptions"
    (ConsumerBusyError, 412),  # Pulsar: 412 "Subscription has active consumers"
    (PartitionLockedError, 412),  # another process writes the partition
    (CompactionRunningError, 409),  # Pulsar: 409 "Compaction already in progress"
    (ClosedError, 503),  # the server is stopping
    (ConfigurationStoreError, 503),  # the shared configuration store is unreachable (Pulsar: 500 or 503)
    (MetadataError, 500),
]


def status_of(error: BaseException) -> int:
    if isinstance(error, ServerFailure):  # the binary protocol's refusals (lookups share its code)
        return 404 if error.code == api.TopicNotFound else 412
    for kind, status in _STATUSES:
        if isinstance(error, kind):
            return status
    return 500


def error_body(error: RestError | SeglogError | ServerFailure) -> dict[str, Any]:
    """{"reason": ...} plus what lets seglog's own client raise the same exception again."""
    if isinstance(error, RestError):
        return {**(error_body(error.cause) if error.cause is not None else {}), "reason": error.reason}
    if isinstance(error, ServerFailure):
        return {"reason": str(error)}
    body: dict[str, Any] = {"reason": str(error), "error": type(error).__name__}
    if isinstance(error, InvalidArgumentError):
        body.update(argument=error.argument, accepted=error.accepted, detail=error.detail)
        if _json_keeps(error.value):
            body["value"] = error.value
        else:
            body["valueRepr"] = repr(error.value)
    return body


def _json_keeps(value: Any) -> bool:
    """Whether JSON gives `value` back as it is (so its repr reads the same once sent back)."""
    try:
        back = json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return False
    return back == value and repr(back) == repr(value)
