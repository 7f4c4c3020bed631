"""The admin HTTP port of a `seglog serve` with token authentication: 401 without a valid token, 403 without
the role's right (superusers, a tenant's admin roles, namespace grants), the routes open to anyone, the
permission routes, the HTTP lookup with a token, and `seglog --url` with $SEGLOG_TOKEN."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

import seglog
from helpers_server import pulsar, start_server
from seglog.cli import main
from seglog.server.auth import create_secret_key, create_token


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """Superuser `admin`; tenant acme (admin role acme-admin) with acme/ns, where `app` may consume; globex."""
    directory = tmp_path_factory.mktemp("rest-auth")
    key = create_secret_key()
    (directory / "secret.key").write_bytes(key)
    with seglog.open(directory / "data") as log:
        log.admin.tenants.create("acme", admin_roles=["acme-admin"])
        log.admin.namespaces.create("acme/ns")
        log.admin.namespaces.grant_permission("acme/ns", "app", ["consume"])
        log.create_topic("acme/ns/orders")
        log.admin.tenants.create("globex")
        log.admin.namespaces.create("globex/ns")
    running = start_server(directory / "data", "--auth-token-secret-key", str(directory / "secret.key"),
                           "--superuser-roles", "admin")
    yield running, key
    running.stop()


def http(server, key, role=None, **headers):
    if role is not None:
        headers["Authorization"] = f"Bearer {create_token(key, role)}"
    return httpx.Client(base_url=server.http_url, headers=headers, timeout=30)


@pytest.mark.parametrize("authorization", [None, "Bearer garbage", "Basic YWRtaW46cHc=", "other key"])
def test_401_without_a_valid_token(secured, authorization):
    server, key = secured
    headers = {} if authorization is None else {
        "Authorization": f"Bearer {create_token(create_secret_key(), 'admin')}" if authorization == "other key"
        else authorization}
    with http(server, key, **headers) as client:
        for method, path in (("GET", "/admin/v2/tenants"), ("GET", "/admin/v2/namespaces/acme"),
                             ("PUT", "/admin/v2/namespaces/acme/new"),
                             ("GET", "/admin/v2/persistent/acme/ns/orders/stats"),
                             ("GET", "/lookup/v2/topic/persistent/acme/ns/orders")):
            response = client.request(method, path)
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["reason"]
    with seglog.open(server.data) as log:
        assert "acme/new" not in log.admin.namespaces.list("acme")


def test_open_routes(secured):
    server, key = secured
    with http(server, key) as client:
        assert client.get("/admin/v2/brokers/health").text == "ok"
        assert client.get("/metrics").status_code == 200
        assert client.get("/admin/v2/openapi.json").status_code == 200


@pytest.mark.parametrize(("role", "method", "path", "status"), [
    ("admin", "GET", "/admin/v2/tenants", 200),  # superuser: everything
    ("admin", "GET", "/admin/v2/clusters", 200),
    ("acme-admin", "GET", "/admin/v2/tenants", 403),  # the broker's own resources: superusers only
    ("acme-admin", "GET", "/admin/v2/clusters", 403),
    ("acme-admin", "GET", "/admin/v2/tenants/acme", 200),
    ("acme-admin", "POST", "/admin/v2/tenants/acme", 403),  # the tenant record itself: superusers (as Pulsar)
    ("acme-admin", "GET", "/admin/v2/namespaces/acme", 200),  # within its tenant: everything
    ("acme-admin", "GET", "/admin/v2/namespaces/acme/ns", 200),
    ("acme-admin", "GET", "/admin/v2/namespaces/acme/ns/retention", 200),
    ("acme-admin", "GET", "/admin/v2/persistent/acme/ns/orders/stats", 200),
    ("acme-admin", "GET", "/admin/v2/namespaces/globex", 403),  # ... and no other tenant
    ("acme-admin", "GET", "/admin/v2/namespaces/globex/ns/permissions", 403),
    ("app", "GET", "/admin/v2/persistent/acme/ns/orders/stats", 200),  # a grant: the topics' stats and lists
    ("app", "GET", "/admin/v2/namespaces/acme/ns/topics", 200),
    ("app", "GET", "/lookup/v2/topic/persistent/acme/ns/orders", 200),
    ("app", "GET", "/admin/v2/namespaces/acme/ns", 403),  # ... not the namespace's policies
    ("app", "POST", "/admin/v2/namespaces/acme/ns/permissions/app", 403),
    ("app", "GET", "/admin/v2/persistent/globex/ns/orders/stats", 403),
    ("nobody", "GET", "/admin/v2/persistent/acme/ns/orders/stats", 403),
])
def test_403_without_the_roles_right(secured, role, method, path, status):
    server, key = secured
    with http(server, key, role) as client:
        response = client.request(method, path)
    assert response.status_code == status, response.text
    if status == 403:
        assert repr(role) in response.json()["reason"]


def test_a_tenant_admin_grants_over_rest_and_the_role_then_produces(secured):
    server, key = secured
    with http(server, key, "acme-admin") as client:
        assert client.post("/admin/v2/namespaces/acme/ns/permissions/writer", json=["produce"]).status_code == 204
        assert client.get("/admin/v2/namespaces/acme/ns/permissions").json() == {"app": ["consume"],
                                                                                  "writer": ["produce"]}
        policies = client.get("/admin/v2/namespaces/acme/ns").json()
        assert policies["auth_policies"]["namespace_auth"] == {"app": ["consume"], "writer": ["produce"]}
        assert client.post("/admin/v2/namespaces/acme/ns/permissions/writer", json=["fly"]).status_code == 400
    writer = server.client(authentication=pulsar.AuthenticationToken(create_token(key, "writer")))
    writer.create_producer("persistent://acme/ns/orders").send(b"granted over REST")
    with http(server, key, "acme-admin") as client:
        assert client.delete("/admin/v2/namespaces/acme/ns/permissions/writer").status_code == 204
        assert "writer" not in client.get("/admin/v2/namespaces/acme/ns/permissions").json()


def test_namespace_created_with_auth_policies(secured):
    """pulsar-client-python's test setup creates namespaces with their permissions in the Policies body."""
    server, key = secured
    with http(server, key, "admin") as client:
        body = {"auth_policies": {"namespace_auth": {"anonymous": ["produce", "consume"]}},
                "replication_clusters": ["standalone"]}
        assert client.put("/admin/v2/namespaces/globex/open", json=body).status_code == 204
        assert client.get("/admin/v2/namespaces/globex/open/permissions").json() == {
            "anonymous": ["produce", "consume"]}
        bad = {"auth_policies": {"namespace_auth": {"anonymous": ["fly"]}}}
        assert client.put("/admin/v2/namespaces/globex/bad", json=bad).status_code == 400
        assert "globex/bad" not in client.get("/admin/v2/namespaces/globex").json()


def test_http_lookup_with_a_token(secured):
    server, key = secured
    client = pulsar.Client(server.http_url, operation_timeout_seconds=10,
                           authentication=pulsar.AuthenticationToken(create_token(key, "admin")))
    try:
        client.create_producer("persistent://acme/ns/http-lookup").send(b"over http lookup")
    finally:
        client.close()
    anonymous = pulsar.Client(server.http_url, operation_timeout_seconds=10)
    try:
        with pytest.raises(pulsar.ConnectError):  # the client reports any HTTP 4xx of a lookup so
            anonymous.create_producer("persistent://acme/ns/http-lookup")
    finally:
        anonymous.close()


def test_seglog_url_with_a_token(secured):
    server, key = secured

    def run(*args, token=None):
        env = {"SEGLOG_DATA": None, "SEGLOG_URL": None, "COLUMNS": "200", "NO_COLOR": "1", "SEGLOG_TOKEN": token}
        return CliRunner(env=env).invoke(main, ["--url", server.http_url, *args], catch_exceptions=False)

    assert json.loads(run("tenants", "list", "--json", token=create_token(key, "admin")).output) == \
        ["acme", "globex", "public"]
    refused = run("tenants", "list")
    assert refused.exit_code == 1 and "authentication required" in refused.output
    refused = run("tenants", "list", token=create_token(key, "acme-admin"))
    assert refused.exit_code == 1 and "superusers only" in refused.output
    granted = run("namespaces", "grant-permission", "acme/ns", "--role", "cli", "--actions", "consume",
                  token=create_token(key, "acme-admin"))
    assert granted.exit_code == 0 and "Granted consume on acme/ns to role cli" in granted.output
