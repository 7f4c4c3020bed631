"""Basic authentication (--auth-basic-file, AuthenticationBasic) with the real pulsar-client, on both ports: a
server set up as Pulsar's test service (superuser admin, anonymous role granted public/default, private/auth
granted to one user). Users produce and consume as their role; a wrong password is refused and never taken
for anonymous; a method the server has no provider for is the anonymous role (Pulsar's rule, which
pulsar-client-python's test_basic_auth_method relies on); and serve refuses htpasswd files it cannot check."""

from __future__ import annotations

import json
from functools import partial

import httpx
import pytest
from passlib.hash import apr_md5_crypt, des_crypt

import seglog
from helpers_server import pulsar, refused_at_once, refused_serve, round_trip, start_server, topics_of

PRIVATE = "persistent://private/auth"


@pytest.fixture(scope="module")
def users(tmp_path_factory):
    """admin (APR1-MD5, a superuser) and carol (DES crypt, may consume in private/auth)."""
    path = tmp_path_factory.mktemp("users") / ".htpasswd"
    path.write_text(f"admin:{apr_md5_crypt.hash('123456')}\ncarol:{des_crypt.hash('carol pw')}\n")
    return path


def prepare(data) -> None:
    """What Pulsar's test service grants: public/default to anonymous, private/auth to carol (consume)."""
    with seglog.open(data) as log:
        log.admin.namespaces.grant_permission("public/default", "anonymous", ["produce", "consume"])
        log.admin.tenants.create("private")
        log.admin.namespaces.create("private/auth")
        log.admin.namespaces.grant_permission("private/auth", "carol", ["consume"])


@pytest.fixture(scope="module")
def basic(tmp_path_factory, users):
    data = tmp_path_factory.mktemp("basic") / "data"
    prepare(data)
    running = start_server(data, "--auth-basic-file", str(users), "--superuser-roles", "admin",
                           "--anonymous-user-role", "anonymous")
    yield running
    running.stop()








@pytest.mark.parametrize("authentication", [
    lambda: pulsar.AuthenticationBasic("admin", "123456"),
    lambda: pulsar.AuthenticationBasic("admin", "123456", "basic"),
    lambda: pulsar.AuthenticationBasic(auth_params_string='{"username": "admin", "password": "123456"}'),
], ids=["arguments", "method basic", "params string"])
@pytest.mark.parametrize("port", ["binary", "http"])
def test_a_basic_user_authenticates_on_both_ports(basic, authentication, port, request):
    """Service URL pulsar:// (CONNECT's auth_data) or http:// (the HTTP lookup's Authorization: Basic, then
    CONNECT on the binary port the lookup names)."""
    client = basic.client(basic.pulsar_url if port == "binary" else basic.http_url, authentication=authentication())
    round_trip(client, f"{PRIVATE}/admin-{port}-{request.node.callspec.id.replace(' ', '-')}", b"as admin")


def test_a_basic_user_is_a_role_like_another(basic):
    carol = basic.client(authentication=pulsar.AuthenticationBasic("carol", "carol pw"))
    carol.subscribe(f"{PRIVATE}/carol", "s")  # consume is granted
    refused_at_once(pulsar.AuthorizationError, lambda: carol.create_producer(f"{PRIVATE}/carol"))
    # DES crypt reads 8 characters of a password, as crypt(3) and Pulsar do
    basic.client(authentication=pulsar.AuthenticationBasic("carol", "carol pwd")).subscribe(f"{PRIVATE}/carol", "t")


@pytest.mark.parametrize(("user", "password"), [("admin", "1234567"), ("invalid", "123456"), ("carol", "")])
def test_a_wrong_password_is_refused_not_taken_for_anonymous(basic, user, password):
    authentication = pulsar.AuthenticationBasic(user, password)
    binary = basic.client(authentication=authentication)
    # public/default is granted to anonymous: a refusal here shows the client was not taken for anonymous
    refused_at_once(pulsar.AuthenticationError, lambda: binary.create_producer("public/default/wrong"))
    refused_at_once(pulsar.AuthenticationError, lambda: binary.subscribe(f"{PRIVATE}/wrong", "s"))
    # the HTTP lookup answers 401, which the client reports as ConnectError (pulsar_test's test_invalid_basic_auth)
    http = basic.client(basic.http_url, authentication=authentication)
    refused_at_once(pulsar.ConnectError, lambda: http.subscribe(f"{PRIVATE}/wrong", "s"))
    assert not any(topic.endswith("/wrong") for topic in topics_of(basic.data))


@pytest.mark.parametrize("port", ["binary", "http"])
def test_a_method_without_a_provider_is_the_anonymous_role(basic, port):
    """pulsar_test's test_basic_auth_method: the method 'unknown' sends admin's credentials, but no provider
    answers it, so the client is anonymous: refused in private/auth (AuthorizationError), allowed where
    anonymous is granted. Over http:// the lookup still authenticates admin by the Authorization header."""
    url = basic.pulsar_url if port == "binary" else basic.http_url
    for form, authentication in enumerate((
            pulsar.AuthenticationBasic("admin", "123456", "unknown"),
            pulsar.AuthenticationBasic(
                auth_params_string='{"username": "admin", "password": "123456", "method": "unknown"}'))):
        client = basic.client(url, authentication=authentication)
        refused_at_once(pulsar.AuthorizationError, partial(client.subscribe, f"{PRIVATE}/unknown-{port}", "s"))
        round_trip(client, f"public/default/unknown-{port}-{form}", b"as anonymous")
    assert f"private/auth/unknown-{port}" not in topics_of(basic.data)


def test_the_admin_rest_api_takes_basic_credentials(basic):
    def status(path: str, auth=None) -> int:
        with httpx.Client(base_url=basic.http_url, auth=auth, timeout=30) as http:
            response = http.get(path)
            assert response.status_code == 200 or response.json()["reason"]
            return response.status_code

    assert status("/admin/v2/tenants", ("admin", "123456")) == 200
    assert status("/admin/v2/tenants", ("carol", "carol pw")) == 403
    assert status("/admin/v2/namespaces/private/auth/topics", ("carol", "carol pw")) == 200  # granted there
    assert status("/admin/v2/tenants", ("admin", "wrong")) == 401
    assert status("/admin/v2/tenants") == 403  # anonymous: not a superuser
    assert status("/admin/v2/namespaces/public/default/topics") == 200


def test_without_an_anonymous_role_other_methods_are_refused(tmp_path, users):
    data = tmp_path / "data"
    prepare(data)
    server = start_server(data, "--auth-basic-file", str(users))
    try:
        for authentication in (None, pulsar.AuthenticationBasic("admin", "123456", "unknown"),
                               pulsar.AuthenticationToken("a.token.here")):
            client = server.client(**({} if authentication is None else {"authentication": authentication}))
            refused_at_once(pulsar.AuthenticationError, partial(client.create_producer, "public/default/x"))
        carol = server.client(authentication=pulsar.AuthenticationBasic("carol", "carol pw"))
        carol.subscribe(f"{PRIVATE}/alone", "s")
    finally:
        server.stop()


def test_binding_beyond_loopback_with_basic_authentication(tmp_path, users):
    server = start_server(tmp_path / "data", "--host", "0.0.0.0", "--auth-basic-file", str(users))
    try:  # stopped at once: it must not stay reachable from other hosts
        assert server.pulsar_url.startswith("pulsar://0.0.0.0:")
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize(("content", "said", "code"), [  # 2: no usable --auth-basic-file; 1: a line of it broken
    (None, "invalid --auth-basic-file '{path}': No such file or directory; accepted: a readable htpasswd file", 2),
    ("admin\n", "{path}, line 1: invalid entry 'admin'; accepted: user:hash", 1),
    ("# users\nadmin:$2y$05$c4WoMPo3SXsafkva.HHa6uXQZWr7oboPiC2bT/r7q1BB8I2s0BRqC\n",
     "{path}, line 2: invalid password hash of user 'admin' 'bcrypt (htpasswd -B)'; accepted: APR1-MD5", 1),
    ("", "invalid --auth-basic-file '{path}': it names no user", 2),
])
def test_serve_refuses_htpasswd_files_it_cannot_check(tmp_path, content, said, code):
    path = tmp_path / "users.htpasswd"
    if content is not None:
        path.write_text(content)
    message = refused_serve(tmp_path / "data", "--auth-basic-file", str(path), code=code)
    assert said.format(path=path) in message, message
    assert "c4WoMPo3" not in message


def test_roles_need_a_provider_and_basic_is_one(tmp_path, users):
    said = refused_serve(tmp_path / "data", "--superuser-roles", "admin")
    assert "roles only with an authentication provider (--auth-token-secret-key, --auth-basic-file or " \
           "--auth-tls)" in said
    server = start_server(tmp_path / "data", "--auth-basic-file", str(users), "--superuser-roles", "admin")
    try:
        with httpx.Client(base_url=server.http_url, auth=("admin", "123456"), timeout=30) as http:
            assert json.loads(http.get("/admin/v2/tenants").text) == ["public"]
    finally:
        server.stop()
