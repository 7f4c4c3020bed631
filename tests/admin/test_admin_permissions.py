"""The permission data of a data directory (admin API and catalog): namespace permissions (Pulsar's
grant-permission, revoke-permission, permissions) and tenants' admin roles, which `seglog serve` enforces."""

from __future__ import annotations

import pytest

import seglog
from seglog.errors import InvalidArgumentError, NotFoundError


@pytest.fixture
def log(tmp_path):
    with seglog.open(tmp_path / "data") as opened:
        opened.admin.tenants.create("acme")
        opened.admin.namespaces.create("acme/ns")
        yield opened


def test_grant_revoke_and_list_permissions(log):
    namespaces = log.admin.namespaces
    assert namespaces.permissions("acme/ns") == {}
    namespaces.grant_permission("acme/ns", "writer", ["produce"])
    namespaces.grant_permission("acme/ns", "app", ["consume", "produce", "consume"])
    assert namespaces.permissions("acme/ns") == {"app": ["produce", "consume"], "writer": ["produce"]}
    namespaces.grant_permission("acme/ns", "writer", ["consume"])  # replaces, as Pulsar's grant does
    assert namespaces.permissions("acme/ns")["writer"] == ["consume"]
    assert namespaces.permissions("public/default") == {}  # per namespace

    assert namespaces.revoke_permission("acme/ns", "writer") is True
    assert namespaces.revoke_permission("acme/ns", "writer") is False  # no error, as in Pulsar
    assert namespaces.permissions("acme/ns") == {"app": ["produce", "consume"]}


def test_permissions_persist_and_go_with_their_namespace(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.admin.tenants.create("acme")
        log.admin.namespaces.create("acme/ns")
        log.admin.namespaces.grant_permission("acme/ns", "app", ["consume"])
    with seglog.open(data) as log:
        assert log.admin.namespaces.permissions("acme/ns") == {"app": ["consume"]}
        log.admin.namespaces.delete("acme/ns")
        log.admin.namespaces.create("acme/ns")  # a namespace of the same name starts with none
        assert log.admin.namespaces.permissions("acme/ns") == {}


@pytest.mark.parametrize(("role", "actions", "argument"), [
    ("app", ["functions"], "actions"),
    ("app", [], "actions"),
    ("app", "produce,consume", "actions"),
    ("app", None, "actions"),
    ("", ["produce"], "role"),
    ("a,b", ["produce"], "role"),
    (" app", ["produce"], "role"),
    (7, ["produce"], "role"),
])
def test_grant_refuses_bad_roles_and_actions(log, role, actions, argument):
    with pytest.raises(InvalidArgumentError) as refused:
        log.admin.namespaces.grant_permission("acme/ns", role, actions)
    assert refused.value.argument == argument
    assert log.admin.namespaces.permissions("acme/ns") == {}


def test_missing_namespaces_are_not_found(log):
    for call in (lambda: log.admin.namespaces.grant_permission("acme/nope", "app", ["produce"]),
                 lambda: log.admin.namespaces.revoke_permission("acme/nope", "app"),
                 lambda: log.admin.namespaces.permissions("nope/ns")):
        with pytest.raises(NotFoundError, match="namespace .* does not exist"):
            call()
