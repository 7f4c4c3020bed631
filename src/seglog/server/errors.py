"""seglog's exceptions as Pulsar ServerError codes, chosen so the real client reports each at once where it
can (docs/SERVER.md): TopicNotFound, ProducerBusy and NotAllowedError are fatal for the client, while
ServiceNotReady and PersistenceError make it retry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from seglog.errors import (
    ClosedError,
    ConsumerBusyError,
    CorruptLogError,
    IncompatibleSchemaError,
    InvalidArgumentError,
    InvalidSchemaError,
    MetadataError,
    NotFoundError,
    PartitionLockedError,
    TopicNotFoundError,
)
from seglog.server.protocol import pulsar_api_pb2 as api


class ServerFailure(Exception):
    """A request refused with a Pulsar ServerError code and a message for the client."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


_CODES: list[tuple[type[BaseException], int]] = [
    (TopicNotFoundError, api.TopicNotFound),
    (NotFoundError, api.TopicNotFound),
    # a schema the topic refuses, or whose definition does not fit its type: what Pulsar's broker answers
    (IncompatibleSchemaError, api.IncompatibleSchema),
    (InvalidSchemaError, api.IncompatibleSchema),
    # A name or argument seglog refuses that the client let through: NotAllowedError, which the client
    # reports at once with the reason (InvalidTopicName would make it retry until its operation timeout).
    (InvalidArgumentError, api.NotAllowedError),
    (PartitionLockedError, api.ProducerBusy),  # another process writes the partition
    (ConsumerBusyError, api.ConsumerBusy),
    (ClosedError, api.ServiceNotReady),  # the server is stopping: the client tries again
    (MetadataError, api.MetadataError),
    (CorruptLogError, api.PersistenceError),
    (OSError, api.PersistenceError),
]


def server_error(error: BaseException) -> ServerFailure:
    """The ServerFailure to answer for `error` (UnknownError for anything not mapped)."""
    if isinstance(error, ServerFailure):
        return error
    for kind, code in _CODES:
        if isinstance(error, kind):
            return ServerFailure(code, str(error))
    return ServerFailure(api.UnknownError, f"{type(error).__name__}: {error}")


@dataclass
class Attempt:
    """How the handling of a request went: `failure` is what it was refused with and answered, if it was."""
    failure: ServerFailure | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None


@contextmanager
def answering_failures(answer: Callable[[ServerFailure], None]) -> Iterator[Attempt]:
    """Handle a request in the `with` block: an exception there is answered, `answer(failure)` with it as a
    ServerFailure (server_error), instead of raised; the Attempt yielded says whether it was."""
    attempt = Attempt()
    try:
        yield attempt
    except Exception as error:  # (answered)
        attempt.failure = server_error(error)
        answer(attempt.failure)
