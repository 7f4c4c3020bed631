"""Tenant, namespace and topic names: seglog.names."""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import InvalidArgumentError, InvalidNameError
from seglog.names import (
    NamespaceName,
    NonPersistentTopicName,
    TopicName,
    is_non_persistent,
    partition_of,
    validate_part,
)

PART_RULE = "letters, digits and _ - . = :"
valid_parts = st.from_regex(r"[A-Za-z0-9_\-=:][A-Za-z0-9_\-.=:]{0,254}", fullmatch=True)


# --- validate_part -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("part", [
    "a",
    "my-topic",
    "orders_v2",
    "Orders.EU",
    "key=value",
    "host:9092",
    "a.",
    "a..b",
    "-",
    "_",
    "0",
    "x" * 255,
])
def test_validate_part_accepts(part: str) -> None:
    assert validate_part(part, kind="topic name") == part


@pytest.mark.parametrize(("part", "detail"), [
    ("", "is empty"),
    ("x" * 256, "is 256 characters long, more than 255"),
    (".", "is a relative path component"),
    ("..", "is a relative path component"),
    (".hidden", "starts with '.'"),
    ("...", "starts with '.'"),
    ("a/b", "contains '/'"),
    ("/abs", "contains '/'"),
    ("../x", "starts with '.'"),
    ("x\x00", "contains a NUL character"),
    (" ", "contains whitespace (' ')"),
    (" a", "contains whitespace"),
    ("a ", "contains whitespace"),
    ("a\tb", "contains whitespace ('\\t')"),
    ("a\nb", "contains whitespace ('\\n')"),
    ("a\\b", "contains '\\\\', which is not allowed"),
    ("a*b", "contains '*', which is not allowed"),
    ("a?", "contains '?'"),
    ("~user", "contains '~'"),
    ("$HOME", "contains '$'"),
    ("a%2Fb", "contains '%'"),
    ("naïve", "contains 'ï'"),  # ASCII letters only
    ("caf\u0065\u0301", "contains '\u0301'"),
    ("a\u200bb", "contains '\\u200b'"),  # zero-width space, shown escaped
    ("a\u00a0b", "contains whitespace"),
])
def test_validate_part_refuses(part: str, detail: str) -> None:
    with pytest.raises(InvalidNameError) as caught:
        validate_part(part, kind="namespace name")
    message = str(caught.value)
    assert message.startswith(f"invalid namespace name {part!r}: {detail}")
    assert PART_RULE in message
    assert "1 to 255 characters" in message
    assert caught.value.argument == "namespace name"


@pytest.mark.parametrize("part", [None, 5, b"topic", ["a"]])
def test_validate_part_refuses_non_str(part: object) -> None:
    with pytest.raises(InvalidNameError, match=rf"^invalid tenant name .*: expected a str, not {type(part).__name__}"):
        validate_part(part, kind="tenant name")  # type: ignore[arg-type]


def test_name_errors_are_argument_and_value_errors() -> None:
    with pytest.raises(InvalidArgumentError):
        validate_part("..", kind="topic name")
    with pytest.raises(ValueError):
        TopicName.parse("a/b")


@given(valid_parts)
def test_valid_parts_are_single_safe_path_components(part: str) -> None:
    assert validate_part(part, kind="topic name") == part
    assert os.path.basename(part) == part
    assert os.path.normpath(os.path.join("data", part)) == os.path.join("data", part)


# --- TopicName -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "expected"), [
    ("orders", ("public", "default", "orders")),
    ("acme/billing/orders", ("acme", "billing", "orders")),
    ("persistent://acme/billing/orders", ("acme", "billing", "orders")),
    ("persistent://public/default/orders", ("public", "default", "orders")),
    ("a.b/c=d/e:f", ("a.b", "c=d", "e:f")),
    ("my-topic-partition-0", ("public", "default", "my-topic-partition-0")),
])
def test_topic_name_parse(name: str, expected: tuple[str, str, str]) -> None:
    topic = TopicName.parse(name)
    assert topic.path_parts() == expected
    assert (topic.tenant, topic.namespace, topic.topic) == expected
    assert str(topic) == "/".join(expected)
    assert topic.namespace_name == "/".join(expected[:2])
    assert topic == TopicName(*expected)


@pytest.mark.parametrize(("name", "detail"), [
    # wrong number of parts
    ("billing/orders", "expected 'topic' or 'tenant/namespace/topic', got 2 parts separated by '/'"),
    ("a/b/c/d", "got 4 parts separated by '/'"),
    ("cluster/acme/billing/orders", "got 4 parts"),  # Pulsar's old form with a cluster
    ("persistent://orders", "expected 'tenant/namespace/topic' after 'persistent://', got 1 part"),
    ("persistent://billing/orders", "got 2 parts"),
    ("persistent://", "got 1 part"),
    # other domains
    ("non-persistent://a/b/c", "only the 'persistent://' domain is supported"),
    ("file://a/b/c", "only the 'persistent://' domain is supported"),
    ("persistent://persistent://a/b/c", "only the 'persistent://' domain is supported"),
    ("PERSISTENT://a/b/c", "only the 'persistent://' domain is supported"),
    # path traversal and unsafe parts
    ("..", "topic name '..' is a relative path component"),
    ("../x", "got 2 parts"),
    ("../../x", "tenant name '..' is a relative path component"),
    ("a/../b", "namespace name '..' is a relative path component"),
    ("a/b/..", "topic name '..' is a relative path component"),
    ("./b/c", "tenant name '.' is a relative path component"),
    ("persistent://../b/c", "tenant name '..' is a relative path component"),
    ("/abs", "got 2 parts"),
    ("/a/b", "tenant name '' is empty"),
    ("/etc/passwd/x", "got 4 parts"),
    ("a//b", "namespace name '' is empty"),
    ("a/b/", "topic name '' is empty"),
    ("x\x00", "topic name 'x\\x00' contains a NUL character"),
    ("a/b/x\x00", "contains a NUL character"),
    (" ", "topic name ' ' contains whitespace"),
    (" orders", "contains whitespace"),
    ("a/b/ orders", "topic name ' orders' contains whitespace"),
    ("", "topic name '' is empty"),
    (".orders", "topic name '.orders' starts with '.'"),
    ("a/.b/c", "namespace name '.b' starts with '.'"),
    ("a\\..\\b", "contains '\\\\'"),
    ("C:\\x", "contains '\\\\'"),
    ("~/x/y", "tenant name '~' contains '~'"),
    ("x" * 256, "topic name 'xxx"),
])
def test_topic_name_parse_refuses(name: str, detail: str) -> None:
    with pytest.raises(InvalidNameError) as caught:
        TopicName.parse(name)
    message = str(caught.value)
    assert message.startswith(f"invalid topic name {name!r}: ")
    assert detail in message
    assert ("accepted: 'topic' (in public/default), 'tenant/namespace/topic' or "
            "'persistent://tenant/namespace/topic'") in message
    assert PART_RULE in message
    assert caught.value.argument == "topic name"
    assert caught.value.value == name


@pytest.mark.parametrize("name", [None, 42, b"orders", ("a", "b", "c")])
def test_topic_name_parse_refuses_non_str(name: object) -> None:
    with pytest.raises(InvalidNameError, match=rf"^invalid topic name .*: expected a str, not {type(name).__name__};"):
        TopicName.parse(name)  # type: ignore[arg-type]


@pytest.mark.parametrize(("parts", "kind"), [
    (("..", "b", "c"), "tenant name"),
    (("a", "", "c"), "namespace name"),
    (("a", "b", "c/d"), "topic name"),
    (("a", "b", None), "topic name"),
])
def test_topic_name_constructor_validates(parts: tuple[str, str, str], kind: str) -> None:
    with pytest.raises(InvalidNameError, match=rf"^invalid {kind} "):
        TopicName(*parts)


def test_topic_name_is_frozen_and_hashable() -> None:
    topic = TopicName.parse("acme/billing/orders")
    with pytest.raises(dataclasses.FrozenInstanceError):
        topic.topic = "../../etc"  # type: ignore[misc]
    assert {topic, TopicName.parse("persistent://acme/billing/orders")} == {topic}


@given(valid_parts, valid_parts, valid_parts)
def test_topic_name_round_trips(tenant: str, namespace: str, topic: str) -> None:
    name = TopicName(tenant, namespace, topic)
    assert TopicName.parse(str(name)) == name
    assert TopicName.parse(f"persistent://{name}") == name
    assert TopicName.parse(topic) == TopicName("public", "default", topic)


# --- NamespaceName -------------------------------------------------------------------------------------------

def test_namespace_name_parse() -> None:
    namespace = NamespaceName.parse("acme/billing")
    assert (namespace.tenant, namespace.namespace) == ("acme", "billing")
    assert str(namespace) == "acme/billing"
    assert namespace == NamespaceName("acme", "billing")
    assert str(namespace) == TopicName.parse("acme/billing/orders").namespace_name


@pytest.mark.parametrize(("name", "detail"), [
    ("billing", "expected 'tenant/namespace', got 1 part"),  # Pulsar requires the tenant
    ("a/b/c", "got 3 parts separated by '/'"),
    ("persistent://a/b", "got 4 parts"),
    ("", "got 1 part"),
    ("/b", "tenant name '' is empty"),
    ("a/", "namespace name '' is empty"),
    ("../b", "tenant name '..' is a relative path component"),
    ("a/..", "namespace name '..' is a relative path component"),
    ("a/b\x00", "contains a NUL character"),
    ("a/ b", "contains whitespace"),
])
def test_namespace_name_parse_refuses(name: str, detail: str) -> None:
    with pytest.raises(InvalidNameError) as caught:
        NamespaceName.parse(name)
    message = str(caught.value)
    assert message.startswith(f"invalid namespace name {name!r}: ")
    assert detail in message
    assert "accepted: 'tenant/namespace'; each part 1 to 255 characters" in message
    assert PART_RULE in message


@pytest.mark.parametrize("name", [None, 7, b"a/b"])
def test_namespace_name_parse_refuses_non_str(name: object) -> None:
    with pytest.raises(InvalidNameError, match=r"^invalid namespace name .*: expected a str, not "):
        NamespaceName.parse(name)  # type: ignore[arg-type]


def test_namespace_name_constructor_validates() -> None:
    with pytest.raises(InvalidNameError, match=r"^invalid namespace name '\.\.'"):
        NamespaceName("acme", "..")


@given(valid_parts, valid_parts)
def test_namespace_name_round_trips(tenant: str, namespace: str) -> None:
    name = NamespaceName(tenant, namespace)
    assert NamespaceName.parse(str(name)) == name


# --- NonPersistentTopicName, partition_of ----------------------------------------------------------------------

def test_a_non_persistent_name_keeps_its_domain_and_is_no_topic_name() -> None:
    name = NonPersistentTopicName.parse("non-persistent://acme/orders/live")
    assert (name.tenant, name.namespace, name.topic, name.namespace_name) == ("acme", "orders", "live", "acme/orders")
    assert str(name) == "non-persistent://acme/orders/live"
    assert is_non_persistent(str(name)) and not is_non_persistent("persistent://acme/orders/live")
    with pytest.raises(InvalidNameError, match="only the 'persistent://' domain is supported"):
        TopicName.parse(str(name))  # (the data directory's topics are persistent, as before)


@pytest.mark.parametrize(("name", "detail"), [
    ("acme/orders/live", "does not start with 'non-persistent://'"),
    ("persistent://acme/orders/live", "does not start with 'non-persistent://'"),
    ("non-persistent://acme/live", "expected 'tenant/namespace/topic' after 'non-persistent://', got 2 parts"),
    ("non-persistent://acme/orders/../x", "got 4 parts"),
    ("non-persistent://acme/orders/.hidden", "topic name '.hidden' starts with '.'"),
    (7, "expected a str, not int"),
])
def test_a_non_persistent_name_is_checked_as_topic_names_are(name: object, detail: str) -> None:
    with pytest.raises(InvalidNameError) as caught:
        NonPersistentTopicName.parse(name)  # type: ignore[arg-type]
    assert detail in str(caught.value)
    assert "accepted: 'non-persistent://tenant/namespace/topic'" in str(caught.value)


@pytest.mark.parametrize(("topic", "split"), [
    ("orders-partition-0", ("orders", 0)), ("orders-partition-12", ("orders", 12)),
    ("a-partition-1-partition-2", ("a-partition-1", 2)), ("orders", None), ("orders-partition-01", None),
    ("orders-partition-", None), ("-partition-3", None), ("orders-partition-1234567890", None),
])
def test_partition_of_reads_pulsars_partition_suffix(topic: str, split: tuple[str, int] | None) -> None:
    assert partition_of(topic) == split
