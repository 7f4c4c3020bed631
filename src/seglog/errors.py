"""seglog's exceptions: one hierarchy under SeglogError.

Bad arguments raise InvalidArgumentError, which is also a ValueError, and its message names the argument,
the value given and what is accepted. Storage errors name the file and the byte position."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

SHOWN_ITEMS = 5  # of a list or a dict given as a value, those an error message shows before '...'


class SeglogError(Exception):
    """Base class of every error seglog raises."""


class InvalidArgumentError(SeglogError, ValueError):
    """An argument, option or configuration value is not accepted.

    `argument` names it, `value` is what was given, `accepted` says what would be."""

    def __init__(self, argument: str, value: object, accepted: str, detail: str | None = None) -> None:
        self.argument = argument
        self.value = value
        self.accepted = accepted
        self.detail = detail
        reason = f": {detail}" if detail else ""
        super().__init__(f"invalid {argument} {shown_value(value)}{reason}; accepted: {accepted}")


def shown_value(value: object) -> str:
    """A value as an error message shows it, in words rather than as Python prints it: a str quoted, a path
    as its str quoted, a list, tuple or set as 'a list of 0, 9', a dict as its 'key: value' pairs."""
    if isinstance(value, os.PathLike):
        return repr(os.fspath(value))
    if isinstance(value, Mapping):
        pairs = [f"{key if isinstance(key, str) else shown_value(key)}: {shown_value(item)}"
                 for key, item in value.items()]
        return _listed(pairs) if pairs else f"an empty {type(value).__name__}"
    if isinstance(value, (list, tuple, set, frozenset)):
        kind = type(value).__name__
        if not value:
            return f"an empty {kind}"
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} of {_listed([shown_value(item) for item in items])}"
    return repr(value)


def _listed(items: list[str]) -> str:
    if len(items) <= SHOWN_ITEMS:
        return ", ".join(items)
    return f"{', '.join(items[:SHOWN_ITEMS])}, ... ({len(items)} in all)"


class ConfigFileError(InvalidArgumentError):
    """A line of a configuration file (the data directory's broker.conf) that is not accepted. The message
    names the file and the line(s), then what is wrong as InvalidArgumentError says it (`reason`)."""

    def __init__(self, path: str, lines: list[int], cause: InvalidArgumentError) -> None:
        self.path = path
        self.lines = lines
        self.reason = str(cause)
        self.argument, self.value = cause.argument, cause.value
        self.accepted, self.detail = cause.accepted, cause.detail
        where = f"line {lines[0]}" if len(lines) == 1 else f"lines {', '.join(map(str, lines[:-1]))} and {lines[-1]}"
        SeglogError.__init__(self, f"{path}, {where}: {self.reason}")


def not_utf8(argument: str, error: UnicodeEncodeError) -> InvalidArgumentError:
    """The error for a str argument that UTF-8 cannot encode: one holding a lone surrogate, as
    os.fsdecode makes of bytes that are not UTF-8."""
    character = error.object[error.start:error.end]
    return InvalidArgumentError(argument, f"a str with {character!r} at index {error.start}",
                                "bytes, or a str that UTF-8 can encode (no lone surrogates)")


class InvalidNameError(InvalidArgumentError):
    """A tenant, namespace or topic name is not accepted."""


class TopicNotFoundError(SeglogError, KeyError):
    """The topic does not exist in this data directory."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class TopicInUseError(SeglogError):
    """A topic to be deleted has producers or consumers (in this process or another); pulsar-admin refuses
    the same unless forced (`delete_topic(name, force=True)`, `seglog topic delete --force`)."""


class TopicExistsError(SeglogError):
    """create_topic was called for a topic that already exists."""


class PartitionLockedError(SeglogError):
    """Another process holds the writer lock of a partition (one writer per partition)."""

    def __init__(self, lock_path: str, holder_pid: int | None) -> None:
        self.lock_path = lock_path
        self.holder_pid = holder_pid
        holder = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(f"partition is being written by {holder}: writer lock {lock_path} is held; "
                         "seglog allows one writing process per partition")


class CorruptLogError(SeglogError):
    """A record batch failed its checks (CRC, header, offsets) where it must be sound.

    `path` and `position` locate the damage; `reason` says which check failed."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        self.path = path
        self.position = position
        self.reason = reason
        super().__init__(f"{path}: corrupt record batch at byte {position}: {reason}")


class IndexMismatchError(CorruptLogError):
    """An index entry names other offsets or bytes than the sound batch the log holds there: the index is
    damaged (it is derived data; `seglog repair` rebuilds it), not the log. `path` is the index file and
    `position` the entry's byte in it."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(path, position, reason)
        self.args = (f"{path}: damaged index entry at byte {position}: {reason}",)


class MetadataError(SeglogError):
    """The data directory's metadata file (meta.sqlite: tenants, namespaces, topics, policies) could not be
    read or written: not a database, corrupt, or locked by another process for too long. Names the file."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: the metadata database cannot be used: {reason}")


class SymbolicLinkError(SeglogError):
    """A directory or file of a data directory's topics is a symbolic link. seglog follows none: recovery
    cuts and rewrites segment files, and through a link it would change a file outside the data directory.
    `path` names the link."""

    REASON = ("is a symbolic link, which seglog does not follow: the tenant, namespace, topic and partition "
              "directories and the files in them must be real directories and files inside the data directory")

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path} {self.REASON}")


class OffsetOutOfRangeError(SeglogError, LookupError):
    """A read asked for an offset the partition does not hold (deleted, or beyond the end)."""


class ClosedError(SeglogError):
    """The log, producer or reader was used after it was closed."""


class NotFoundError(SeglogError, KeyError):
    """A tenant, namespace or subscription named in a call does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class AlreadyExistsError(SeglogError):
    """A tenant or namespace to be created exists already."""


class NotEmptyError(SeglogError):
    """A tenant or namespace to be deleted still holds namespaces or topics."""


class UnusableClusterError(InvalidArgumentError):
    """A cluster named in a tenant's or a replication policy is not registered (`clusters create`), or is a
    remote cluster registered without the URLs replication to it needs. Pulsar answers 412."""


class ClusterNotAllowedError(InvalidArgumentError):
    """A namespace names a cluster outside its tenant's allowed clusters. Pulsar answers 403."""


class ClusterInUseError(SeglogError):
    """A cluster to be deleted, or dropped from a tenant's allowed clusters, is still used: by a tenant, a
    namespace or a topic (named in the message), or it is the data directory's own cluster. Pulsar answers
    412."""


class ProducerBlockedQuotaExceededError(SeglogError):
    """A send was refused: the topic's backlog is at or above its backlog quota (Pulsar's
    ProducerBlockedQuotaExceededException). Names the quota, its limit and the backlog."""


class ProducerSendTimeoutError(ProducerBlockedQuotaExceededError, TimeoutError):
    """A send held by a `producer_request_hold` backlog quota found no room within the send timeout."""


class ReceiveTimeoutError(SeglogError, TimeoutError):
    """`receive(timeout)` found no message within the timeout."""


class ConsumerBusyError(SeglogError):
    """A subscription refused a consumer: exclusive and already consumed, of another type, or (across
    processes) opened by another process."""


class ServerRunningError(SeglogError):
    """Another `seglog serve` holds the data directory."""


class ConfigurationStoreError(SeglogError):
    """The shared configuration store (`seglog serve --configuration-store etcd://...`) could not be reached or
    refused a request, or the synchronized one's topic (`--configuration-sync-topic`) could not be made or
    written: at start, the server does not start; later, the change that needed it is refused and nothing
    changed. Names the store or the topic."""


class InvalidSchemaError(InvalidArgumentError):
    """A schema's definition does not fit its type (an Avro or JSON schema that is not an Avro schema, a
    primitive type with a definition...). Pulsar answers 422 (REST) and IncompatibleSchema (a client)."""


class IncompatibleSchemaError(SeglogError):
    """A schema refused for a topic: incompatible with its schemas under the compatibility strategy in force,
    of another type, new while the namespace allows no automatic update, or missing where schema validation
    is enforced (Pulsar's IncompatibleSchemaException: 409 over REST)."""


class ServerUnreachableError(SeglogError, ConnectionError):
    """A server (seglog serve) did not answer, or its TLS certificate is not one the client trusts."""


class NotAuthorizedError(SeglogError, PermissionError):
    """A server refused the request's credentials: none given where they are needed, or a role not allowed to;
    says how to give a token."""


# A seglog error as text that names its class (the Flight port's errors: server/flight/errors.py), then its message,
# maybe followed by a transport's context (pyarrow's client appends ". Detail: ...")
_NAMED_ERROR = re.compile(r"(?P<error>[A-Z][A-Za-z]*Error): (?P<message>.*?)(?:\. Detail: .*)?", re.DOTALL)


def error_message(error: SeglogError) -> str:
    """`error` as text naming its class: 'ClassName: message'."""
    return f"{type(error).__name__}: {error}"


def parse_error_message(text: str) -> tuple[str, str] | None:
    """(class name, message) of an error_message() text, with a transport's context after it left out; None for a
    text that is not one."""
    match = _NAMED_ERROR.fullmatch(text)
    return None if match is None else (match["error"], match["message"])
