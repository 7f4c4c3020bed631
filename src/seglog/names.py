"""Tenant, namespace and topic names, as in Pulsar: 'tenant/namespace/topic'.

Each part becomes a directory name under the data directory, so the parts are checked strictly: Pulsar's
character set (ASCII letters, digits and ``_ - . = :``), 1 to 255 characters (NAME_MAX on Linux and macOS),
and not '.', '..' or anything starting with '.'. That leaves no way to climb out of the data directory
(no '/', no '..'), to hide a directory, or to pass a NUL or whitespace to the file system.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from seglog.errors import InvalidNameError

__all__ = ["DEFAULT_NAMESPACE", "DEFAULT_TENANT", "MAX_PART_LENGTH", "MAX_SUBSCRIPTION_NAME_LENGTH", "NON_PERSISTENT",
           "NamespaceName", "NonPersistentTopicName", "REPLICATOR_PREFIX", "TopicName", "is_non_persistent",
           "partition_of", "validate_part", "validate_subscription_name"]

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
MAX_PART_LENGTH = 255
# A subscription's files are `<name>.cursor`, `<name>.cursor.tmp` and `<name>.lock`: room for the longest
# suffix, and a little more for any a later version adds.
MAX_SUBSCRIPTION_NAME_LENGTH = MAX_PART_LENGTH - 16
# Pulsar's replicatorPrefix: a producer named `pulsar.repl.A-->B` is cluster A's replicator to B, and a
# subscription named `pulsar.repl.B` is a replicator's cursor (its backlog is the replication backlog to B)
REPLICATOR_PREFIX = "pulsar.repl."

_PERSISTENT = "persistent://"
NON_PERSISTENT = "non-persistent://"  # Pulsar's domain of topics a server keeps in memory only

# Pulsar's name of partition N of a partitioned topic BASE: `BASE-partition-N`
_PARTITION_SUFFIX = re.compile(r"^(?P<base>.+)-partition-(?P<partition>0|[1-9][0-9]{0,8})$")
_PART = re.compile(r"[A-Za-z0-9_\-.=:]+")
_PART_ACCEPTED = (f"1 to {MAX_PART_LENGTH} characters: ASCII letters, digits and _ - . = : "
                  "(not '.' or '..', not starting with '.')")
_SUBSCRIPTION_ACCEPTED = _PART_ACCEPTED.replace(str(MAX_PART_LENGTH), str(MAX_SUBSCRIPTION_NAME_LENGTH))
_TOPIC_ACCEPTED = ("'topic' (in public/default), 'tenant/namespace/topic' or "
                   f"'persistent://tenant/namespace/topic'; each part {_PART_ACCEPTED}")
_NAMESPACE_ACCEPTED = f"'tenant/namespace'; each part {_PART_ACCEPTED}"
_NON_PERSISTENT_ACCEPTED = f"'{NON_PERSISTENT}tenant/namespace/topic'; each part {_PART_ACCEPTED}"


def validate_part(part: str, *, kind: str) -> str:
    """Return `part` if it may be a tenant, namespace or topic name, else raise InvalidNameError.

    `kind` names the part in the error, as the argument: 'tenant name', 'namespace name' or 'topic name'."""
    problem = _part_problem(part)
    if problem:
        raise InvalidNameError(kind, part, _PART_ACCEPTED, problem)
    return part


def validate_subscription_name(name: str) -> str:
    """Return `name` if it may name a subscription, else raise InvalidNameError. The rule of the other
    parts, but shorter: a subscription's files add a suffix to its name (`<name>.cursor.tmp`)."""
    problem = _part_problem(name, MAX_SUBSCRIPTION_NAME_LENGTH)
    if problem:
        raise InvalidNameError("subscription name", name, _SUBSCRIPTION_ACCEPTED, problem)
    return name


@dataclass(frozen=True)
class NamespaceName:
    """A namespace within a tenant; str() gives 'tenant/namespace'. The parts are validated."""

    tenant: str
    namespace: str

    def __post_init__(self) -> None:
        validate_part(self.tenant, kind="tenant name")
        validate_part(self.namespace, kind="namespace name")

    @classmethod
    def parse(cls, name: str) -> NamespaceName:
        """Parse 'tenant/namespace'; a bare name is refused, since a namespace always belongs to a tenant."""
        _require_str(name, argument="namespace name", accepted=_NAMESPACE_ACCEPTED)
        parts = name.split("/")
        if len(parts) != 2:
            raise InvalidNameError("namespace name", name, _NAMESPACE_ACCEPTED,
                                   f"expected 'tenant/namespace', got {_count_parts(parts)}")
        tenant, namespace = _checked_parts(name, parts, kinds=("tenant name", "namespace name"),
                                           argument="namespace name", accepted=_NAMESPACE_ACCEPTED)
        return cls(tenant, namespace)

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}"


@dataclass(frozen=True)
class _TopicParts:
    """What the names of persistent and non-persistent topics share: three validated parts."""

    tenant: str
    namespace: str
    topic: str

    def __post_init__(self) -> None:
        validate_part(self.tenant, kind="tenant name")
        validate_part(self.namespace, kind="namespace name")
        validate_part(self.topic, kind="topic name")

    @property
    def namespace_name(self) -> str:
        """'tenant/namespace'."""
        return f"{self.tenant}/{self.namespace}"


@dataclass(frozen=True)
class TopicName(_TopicParts):
    """A topic within a namespace; str() gives 'tenant/namespace/topic'. The parts are validated."""

    @classmethod
    def parse(cls, name: str) -> TopicName:
        """Parse 'tenant/namespace/topic', 'persistent://tenant/namespace/topic', or a bare 'topic', which
        means 'public/default/topic' (as in Pulsar, the prefixed form must name tenant and namespace)."""
        _require_str(name, argument="topic name", accepted=_TOPIC_ACCEPTED)
        prefixed = name.startswith(_PERSISTENT)
        path = name.removeprefix(_PERSISTENT)
        if "://" in path:
            raise InvalidNameError("topic name", name, _TOPIC_ACCEPTED,
                                   f"only the {_PERSISTENT!r} domain is supported")
        parts = path.split("/")
        if len(parts) == 1 and not prefixed:
            parts = [DEFAULT_TENANT, DEFAULT_NAMESPACE, path]
        if len(parts) != 3:
            forms = ("'tenant/namespace/topic' after 'persistent://'" if prefixed
                     else "'topic' or 'tenant/namespace/topic'")
            raise InvalidNameError("topic name", name, _TOPIC_ACCEPTED,
                                   f"expected {forms}, got {_count_parts(parts)}")
        tenant, namespace, topic = _checked_parts(name, parts, argument="topic name", accepted=_TOPIC_ACCEPTED,
                                                  kinds=("tenant name", "namespace name", "topic name"))
        return cls(tenant, namespace, topic)

    def path_parts(self) -> tuple[str, str, str]:
        """(tenant, namespace, topic): directory names, each safe to join under the data directory."""
        return self.tenant, self.namespace, self.topic

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}/{self.topic}"


def partition_of(topic: str) -> tuple[str, int] | None:
    """(BASE, N) for a topic named as Pulsar names partition N of a partitioned topic, `BASE-partition-N`;
    None for any other name. (Whether BASE is a partitioned topic is for its caller to say.)"""
    match = _PARTITION_SUFFIX.match(topic)
    return None if match is None else (match["base"], int(match["partition"]))


def is_non_persistent(name: object) -> bool:
    """Whether `name` names a non-persistent topic (`non-persistent://...`), whatever else is wrong with it."""
    return isinstance(name, str) and name.startswith(NON_PERSISTENT)


@dataclass(frozen=True)
class NonPersistentTopicName(_TopicParts):
    """A non-persistent topic (Pulsar's `non-persistent://tenant/namespace/topic`): `seglog serve` keeps it in
    memory only, so it never names a directory and is never a TopicName (which the data directory's topics
    are). str() gives the full name, domain included. The parts are validated as TopicName's."""

    @classmethod
    def parse(cls, name: str) -> NonPersistentTopicName:
        """Parse 'non-persistent://tenant/namespace/topic' (as in Pulsar, the prefixed form names tenant and
        namespace)."""
        _require_str(name, argument="topic name", accepted=_NON_PERSISTENT_ACCEPTED)
        if not name.startswith(NON_PERSISTENT):
            raise InvalidNameError("topic name", name, _NON_PERSISTENT_ACCEPTED,
                                   f"does not start with {NON_PERSISTENT!r}")
        parts = name.removeprefix(NON_PERSISTENT).split("/")
        if len(parts) != 3:
            raise InvalidNameError("topic name", name, _NON_PERSISTENT_ACCEPTED,
                                   f"expected 'tenant/namespace/topic' after {NON_PERSISTENT!r}, got "
                                   f"{_count_parts(parts)}")
        tenant, namespace, topic = _checked_parts(name, parts, argument="topic name", accepted=_NON_PERSISTENT_ACCEPTED,
                                                  kinds=("tenant name", "namespace name", "topic name"))
        return cls(tenant, namespace, topic)

    def __str__(self) -> str:
        return f"{NON_PERSISTENT}{self.tenant}/{self.namespace}/{self.topic}"


def _require_str(name: object, *, argument: str, accepted: str) -> None:
    if not isinstance(name, str):
        raise InvalidNameError(argument, name, accepted, f"expected a str, not {type(name).__name__}")


def _count_parts(parts: list[str]) -> str:
    return "1 part" if len(parts) == 1 else f"{len(parts)} parts separated by '/'"


def _checked_parts(name: str, parts: list[str], *, kinds: tuple[str, ...], argument: str,
                   accepted: str) -> list[str]:
    """Return `parts` of `name` if each is valid, else raise InvalidNameError for the whole name, with
    the kind of the first bad part and what is wrong with it."""
    for kind, part in zip(kinds, parts, strict=True):
        problem = _part_problem(part)
        if problem:
            raise InvalidNameError(argument, name, accepted, f"{kind} {part!r} {problem}")
    return parts


def _part_problem(part: object, max_length: int = MAX_PART_LENGTH) -> str | None:
    """What is wrong with `part` as a name part, or None if nothing is."""
    if not isinstance(part, str):
        return f"expected a str, not {type(part).__name__}"
    if not part:
        return "is empty"
    if len(part) > max_length:
        return f"is {len(part)} characters long, more than {max_length}"
    if part in (".", ".."):
        return "is a relative path component"
    if part.startswith("."):
        return "starts with '.'"
    if _PART.fullmatch(part):
        return None
    bad = next(char for char in part if not _PART.fullmatch(char))
    if bad == "/":
        return "contains '/'"
    if bad == "\0":
        return "contains a NUL character"
    if bad.isspace():
        return f"contains whitespace ({bad!r})"
    return f"contains {bad!r}, which is not allowed"
