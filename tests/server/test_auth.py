"""Token authentication and authorization of `seglog serve`, with the real pulsar-client: superusers, tenants'
admin roles and namespace permissions; refusals the client raises at once (well within its operation
timeout, which a retried error would run out); nothing written without permission; `seglog tokens` and
the permission commands; binding beyond loopback only with authentication."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import jwt
import pytest
from click.testing import CliRunner

import seglog
from helpers_server import pulsar, received_values, refused_at_once, refused_serve, start_server
from seglog.cli import main
from seglog.server.auth import create_secret_key, create_token

SUPERUSER = "admin"


@pytest.fixture(scope="module")
def key_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("key") / "secret.key"
    path.write_bytes(create_secret_key())
    return path


@pytest.fixture(scope="module")
def secured(tmp_path_factory, key_file):
    """One server for the module: token authentication, superuser `admin`; tenant acme (admin role
    acme-admin) with namespace acme/ns, and tenant globex with globex/ns."""
    data = tmp_path_factory.mktemp("secured") / "data"
    with seglog.open(data) as log:
        log.admin.tenants.create("acme", admin_roles=["acme-admin"])
        log.admin.namespaces.create("acme/ns")
        log.admin.tenants.create("globex")
        log.admin.namespaces.create("globex/ns")
    running = start_server(data, "--auth-token-secret-key", str(key_file), "--superuser-roles", f"{SUPERUSER},root")
    yield running
    running.stop()


def token(key_file: Path, role: str, **options) -> str:
    return create_token(key_file.read_bytes(), role, **options)


def client_of(server, key_file: Path | None, role: str | None, **token_options):
    if role is None:
        return server.client()
    return server.client(authentication=pulsar.AuthenticationToken(token(key_file, role, **token_options)))


def cli(data: Path | None, *args: str, code: int = 0):
    argv = (["--data", str(data)] if data is not None else []) + list(args)
    result = CliRunner(env={"SEGLOG_DATA": None, "COLUMNS": "200", "NO_COLOR": "1"}).invoke(main, argv)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, result.output
    return result




def topics_of(data: Path) -> list[str]:
    with seglog.open(data) as log:
        return log.list_topics()


def test_a_superuser_produces_and_consumes(secured, key_file):
    client = client_of(secured, key_file, SUPERUSER)
    consumer = client.subscribe("persistent://globex/ns/su", "s")
    producer = client.create_producer("persistent://globex/ns/su")
    for i in range(3):
        producer.send(f"m{i}".encode())
    assert received_values(consumer, 3) == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize("credentials", ["none", "bad signature", "expired", "another key", "garbage"])
def test_clients_without_a_valid_token_are_refused_at_once_and_write_nothing(secured, key_file, credentials):
    valid = token(key_file, SUPERUSER)
    authentication = {
        "none": None,
        "bad signature": valid[:-4] + ("AAAA" if not valid.endswith("AAAA") else "BBBB"),
        "expired": token(key_file, SUPERUSER, expires_at_s=int(time.time()) - 1),
        "another key": create_token(create_secret_key(), SUPERUSER),
        "garbage": "not.a.token",
    }[credentials]
    options = {} if authentication is None else {"authentication": pulsar.AuthenticationToken(authentication)}
    client = secured.client(**options)
    topic = f"persistent://public/default/refused-{credentials.replace(' ', '-')}"
    for call in (lambda: client.create_producer(topic), lambda: client.subscribe(topic, "s"),
                 lambda: client.create_reader(topic, pulsar.MessageId.earliest)):
        refused_at_once(pulsar.AuthenticationError, call)
    assert f"public/default/refused-{credentials.replace(' ', '-')}" not in topics_of(secured.data)


def test_a_role_with_produce_only_produces_and_may_not_consume(secured, key_file):
    cli(secured.data, "namespaces", "grant-permission", "acme/ns", "--role", "writer", "--actions", "produce")
    writer = client_of(secured, key_file, "writer")
    producer = writer.create_producer("persistent://acme/ns/orders")
    producer.send(b"one")
    reason = refused_at_once(pulsar.AuthorizationError, lambda: writer.subscribe("persistent://acme/ns/orders", "s"))
    assert "AuthorizationError" in reason
    refused_at_once(pulsar.AuthorizationError,
                    lambda: writer.create_reader("persistent://acme/ns/orders", pulsar.MessageId.earliest))
    # nor anywhere else
    refused_at_once(pulsar.AuthorizationError, lambda: writer.create_producer("persistent://globex/ns/orders"))
    refused_at_once(pulsar.AuthorizationError, lambda: writer.create_producer("persistent://public/default/orders"))
    assert "globex/ns/orders" not in topics_of(secured.data)
    assert "public/default/orders" not in topics_of(secured.data)
    with seglog.open(secured.data) as log:
        assert [m.value for m in log.topic("acme/ns/orders").reader("earliest", partition=0)] == [b"one"]


def test_a_role_without_permission_is_refused_and_creates_nothing(secured, key_file):
    nobody = client_of(secured, key_file, "nobody")
    topic = "persistent://acme/ns/nobodys"
    for call in (lambda: nobody.create_producer(topic), lambda: nobody.subscribe(topic, "s"),
                 lambda: nobody.create_reader(topic, pulsar.MessageId.earliest)):
        refused_at_once(pulsar.AuthorizationError, call)
    assert "acme/ns/nobodys" not in topics_of(secured.data)


def test_a_tenant_admin_uses_its_tenant_and_no_other(secured, key_file):
    admin = client_of(secured, key_file, "acme-admin")
    consumer = admin.subscribe("persistent://acme/ns/admin-topic", "s")  # no grant needed in its own tenant
    admin.create_producer("persistent://acme/ns/admin-topic").send(b"mine")
    assert received_values(consumer, 1) == [b"mine"]
    for call in (lambda: admin.create_producer("persistent://globex/ns/admin-topic"),
                 lambda: admin.subscribe("persistent://globex/ns/admin-topic", "s")):
        refused_at_once(pulsar.AuthorizationError, call)
    assert "globex/ns/admin-topic" not in topics_of(secured.data)


def test_grant_and_revoke_round_trip_through_the_cli_on_a_running_server(secured, key_file):
    data = secured.data
    topic = "persistent://acme/ns/grants"
    client_of(secured, key_file, SUPERUSER).create_producer(topic).send(b"before")
    refused_at_once(pulsar.AuthorizationError, lambda: client_of(secured, key_file, "reader").subscribe(topic, "s"))

    assert "Granted consume on acme/ns to role reader" in cli(
        data, "namespaces", "grant-permission", "acme/ns", "--role", "reader", "--actions", "consume").output
    assert json.loads(cli(data, "namespaces", "permissions", "acme/ns").output)["reader"] == ["consume"]
    reader = client_of(secured, key_file, "reader")
    consumer = reader.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert received_values(consumer, 1) == [b"before"]
    refused_at_once(pulsar.AuthorizationError, lambda: reader.create_producer(topic))  # consume only

    assert "Revoked the permissions of role reader on acme/ns" in cli(
        data, "namespaces", "revoke-permission", "acme/ns", "--role", "reader").output
    assert "reader" not in json.loads(cli(data, "namespaces", "permissions", "acme/ns").output)
    refused_at_once(pulsar.AuthorizationError,
                    lambda: client_of(secured, key_file, "reader").subscribe(topic, "other"))
    assert "nothing to revoke" in cli(data, "namespaces", "revoke-permission", "acme/ns", "--role", "reader").output


def test_tenant_admin_roles_through_the_cli(tmp_path):
    data = tmp_path / "data"
    cli(data, "tenants", "create", "acme", "--admin-roles", "ops, sre")
    assert json.loads(cli(data, "tenants", "get", "acme").output) == {"adminRoles": ["ops", "sre"],
                                                                      "allowedClusters": None}
    assert "admin roles dev" in cli(data, "tenants", "update", "acme", "-r", "dev").output
    assert json.loads(cli(data, "tenants", "get", "acme").output)["adminRoles"] == ["dev"]
    cli(data, "tenants", "update", "acme", "--admin-roles", "")
    assert json.loads(cli(data, "tenants", "get", "acme").output)["adminRoles"] == []
    assert "does not exist" in cli(data, "tenants", "update", "nope", "-r", "x", code=2).output
    assert "'a,,b' is not a comma-separated list" in cli(data, "tenants", "create", "x", "-r", "a,,b", code=2).output


def test_permission_commands_refuse_what_pulsar_would_not_grant(tmp_path):
    data = tmp_path / "data"
    cli(data, "namespaces", "create", "public/ns")
    assert "accepted: one or more of 'produce', 'consume'" in " ".join(cli(
        data, "namespaces", "grant-permission", "public/ns", "--role", "r", "--actions", "functions", code=2)
        .output.split())
    assert "namespace public/nope does not exist" in cli(
        data, "namespaces", "grant-permission", "public/nope", "--role", "r", "--actions", "produce", code=2).output
    assert json.loads(cli(data, "namespaces", "permissions", "public/ns").output) == {}


def test_tokens_commands(tmp_path):
    key_path = tmp_path / "secret.key"
    assert "Wrote a secret key" in cli(None, "tokens", "create-secret-key", "--output", str(key_path)).output
    key = key_path.read_bytes()
    assert len(key) == 32 and key_path.stat().st_mode & 0o777 == 0o600
    assert "exists already" in cli(None, "tokens", "create-secret-key", "--output", str(key_path), code=1).output
    assert key_path.read_bytes() == key  # never overwritten

    printed = cli(None, "tokens", "create", "--secret-key", str(key_path), "--subject", "alice").output
    claims = jwt.decode(printed.splitlines()[-1], key, algorithms=["HS256"])
    assert claims == {"sub": "alice"}  # no expiry unless asked

    printed = cli(None, "tokens", "create", "--secret-key", str(key_path), "-s", "bob", "--expiry-time", "1h").output
    claims = jwt.decode(printed.splitlines()[-1], key, algorithms=["HS256"])
    assert claims["sub"] == "bob" and abs(claims["exp"] - (time.time() + 3600)) < 60
    printed = cli(None, "tokens", "create", "--secret-key", str(key_path), "-s", "bob", "--expiry-time", "1y").output
    assert abs(jwt.decode(printed.splitlines()[-1], key, algorithms=["HS256"])["exp"]
               - (time.time() + 365 * 86400)) < 60
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(printed.splitlines()[-1], create_secret_key(), algorithms=["HS256"])

    (tmp_path / "short.key").write_bytes(b"too short")
    assert "at least 32 bytes" in cli(None, "tokens", "create", "--secret-key", str(tmp_path / "short.key"), "-s",
                                      "x", code=2).output
    assert "a duration greater than 0" in cli(None, "tokens", "create", "--secret-key", str(key_path), "-s", "x",
                                              "--expiry-time", "0", code=2).output


def test_a_token_from_the_cli_authenticates_against_the_server(secured, key_file):
    printed = cli(None, "tokens", "create", "--secret-key", str(key_file), "--subject", SUPERUSER).output
    client = secured.client(authentication=pulsar.AuthenticationToken(printed.splitlines()[-1]))
    client.create_producer("persistent://public/default/cli-token").send(b"x")


def test_anonymous_clients_get_the_anonymous_role(tmp_path, key_file):
    data = tmp_path / "data"
    server = start_server(data, "--auth-token-secret-key", str(key_file), "--anonymous-user-role", "anonymous")
    try:
        anonymous = server.client()
        refused_at_once(pulsar.AuthorizationError, lambda: anonymous.create_producer("anon"))
        cli(data, "namespaces", "grant-permission", "public/default", "--role", "anonymous", "--actions", "produce")
        server.client().create_producer("anon").send(b"x")
        # a token that fails is refused, not taken for anonymous
        refused_at_once(pulsar.AuthenticationError,
                        lambda: server.client(authentication=pulsar.AuthenticationToken("garbage"))
                        .create_producer("anon"))
    finally:
        server.stop()


def test_binding_beyond_loopback_needs_authentication(tmp_path, key_file):
    said = refused_serve(tmp_path / "open", "--host", "0.0.0.0")
    assert "--auth-token-secret-key" in said and "--allow-unauthenticated" in said

    # with authentication it starts (stopped at once: it must not stay reachable from other hosts)
    server = start_server(tmp_path / "secured", "--host", "0.0.0.0", "--auth-token-secret-key", str(key_file))
    try:
        assert server.pulsar_url.startswith("pulsar://0.0.0.0:")
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize(("extra", "said"), [
    (["--superuser-roles", "admin"], "roles only with an authentication provider (--auth-token-secret-key"),
    (["--anonymous-user-role", "anonymous"], "roles only with an authentication provider"),
    (["--auth-token-secret-key", "/nonexistent/secret.key"], "a readable file"),
    (["--superuser-roles", "a,,b"], "is not a comma-separated list of role names"),
])
def test_serve_refuses_bad_security_options(tmp_path, extra, said):
    assert said in refused_serve(tmp_path / "data", *extra)


def test_listing_a_namespace_for_a_pattern_needs_a_permission_there(secured, key_file):
    client_of(secured, key_file, SUPERUSER).create_producer("persistent://acme/ns/pattern-1").send(b"x")
    cli(secured.data, "namespaces", "grant-permission", "acme/ns", "--role", "lister", "--actions", "consume")
    lister = client_of(secured, key_file, "lister")
    consumer = lister.subscribe(re.compile("persistent://acme/ns/pattern-.*"), "s",
                                initial_position=pulsar.InitialPosition.Earliest)
    assert received_values(consumer, 1) == [b"x"]
    # the client reports any refusal of GET_TOPICS_OF_NAMESPACE as LookupError (logging the server's reason)
    refused_at_once(pulsar.LookupError, lambda: lister.subscribe(re.compile("persistent://globex/ns/pattern-.*"), "s"))
    assert "globex/ns/pattern-1" not in topics_of(secured.data)
