"""server/auth.py without a server: tokens as Pulsar makes and checks them, the basic and TLS certificate
providers beside them, methods without a provider as anonymous (Pulsar's rule), the authorization rules over a
real catalog, and `Authority.check_http`, the decision the admin HTTP port's middleware takes (401 / 403)."""

from __future__ import annotations

import base64
import json
from functools import partial

import jwt
import pytest
from passlib.hash import apr_md5_crypt, des_crypt

import seglog
from seglog.clock import ManualClock
from seglog.errors import InvalidArgumentError
from seglog.server.auth import (
    CONSUME,
    LOOKUP,
    OPEN,
    PRODUCE,
    AuthConfig,
    Authority,
    HttpRefusal,
    TokenRefused,
    create_secret_key,
    create_token,
    read_secret_key,
    verify_token,
)
from seglog.server.errors import ServerFailure
from seglog.server.htpasswd import Htpasswd
from seglog.server.protocol import pulsar_api_pb2 as api

KEY = bytes(range(32))
NOW_MS = 1_704_067_200_000  # ManualClock's start
NOW_S = NOW_MS // 1000


def test_tokens_are_pulsars_hs256_jwts():
    token = create_token(KEY, "alice", expires_at_s=NOW_S + 60)
    header, claims, _ = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "HS256"}  # as Pulsar's tokens create
    assert json.loads(base64.urlsafe_b64decode(claims + "==")) == {"sub": "alice", "exp": NOW_S + 60}
    assert jwt.decode(token, KEY, algorithms=["HS256"], options={"verify_exp": False})["sub"] == "alice"
    assert verify_token(KEY, token, NOW_MS).role == "alice"
    assert verify_token(KEY, token, NOW_MS).expires_ms == (NOW_S + 60) * 1000
    assert verify_token(KEY, "Bearer " + create_token(KEY, "bob"), NOW_MS).role == "bob"
    # a token PyJWT makes with the usual header (as other tools do) is accepted too
    assert verify_token(KEY, jwt.encode({"sub": "carol"}, KEY, algorithm="HS256"), NOW_MS).expires_ms is None


@pytest.mark.parametrize(("token", "reason"), [
    (create_token(KEY, "alice", expires_at_s=NOW_S), "expired at 2024-01-01T00:00:00Z"),
    (create_token(bytes(32), "alice"), "signature does not match"),
    (create_token(KEY, "alice")[:-2] + "AA", "signature does not match"),
    ("not-a-token", "not a valid JWT"),
    (jwt.encode({"role": "alice"}, KEY, algorithm="HS256"), "no subject"),
    (jwt.encode({"sub": "alice"}, KEY * 2, algorithm="HS512"), "not signed with HS256"),
    (jwt.encode({"sub": "alice", "nbf": NOW_S + 10}, KEY, algorithm="HS256"), "not valid before"),
])
def test_tokens_refused(token, reason):
    with pytest.raises(TokenRefused, match=reason):
        verify_token(KEY, token, NOW_MS)


def test_secret_keys(tmp_path):
    key = create_secret_key()
    assert len(key) == 32 and key != create_secret_key()
    (tmp_path / "k").write_bytes(key)
    assert read_secret_key(tmp_path / "k") == read_secret_key(f"file://{tmp_path / 'k'}") == key
    (tmp_path / "short").write_bytes(b"secret")
    with pytest.raises(InvalidArgumentError, match="at least 32 bytes"):
        read_secret_key(tmp_path / "short")
    with pytest.raises(InvalidArgumentError, match="readable file"):
        read_secret_key(tmp_path / "missing")
    with pytest.raises(InvalidArgumentError):
        create_token(b"short", "alice")


@pytest.fixture
def catalog(tmp_path):
    """acme (admin role acme-admin) with acme/ns granting app produce+consume and writer produce; globex/ns."""
    with seglog.open(tmp_path / "data") as log:
        admin = log.admin
        admin.tenants.create("acme", admin_roles=["acme-admin"])
        admin.namespaces.create("acme/ns")
        admin.namespaces.grant_permission("acme/ns", "app", ["produce", "consume"])
        admin.namespaces.grant_permission("acme/ns", "writer", ["produce"])
        admin.tenants.create("globex")
        admin.namespaces.create("globex/ns")
        yield admin


def authority(catalog, clock=None, **config):
    return Authority(AuthConfig(KEY, frozenset({"root"}), **config), catalog, clock or ManualClock())


def principal(auth, role, **token):
    return auth.authenticate("token", create_token(KEY, role, **token).encode())


def code_of(call) -> int:
    with pytest.raises(ServerFailure) as refused:
        call()
    return refused.value.code


@pytest.mark.parametrize(("role", "topic", "actions", "allowed"), [
    ("root", "persistent://globex/ns/t", PRODUCE, True),  # superuser: everywhere
    ("acme-admin", "persistent://acme/ns/t", CONSUME, True),  # tenant admin: its tenant, without grants
    ("acme-admin", "persistent://globex/ns/t", LOOKUP, False),  # ... and not another
    ("app", "persistent://acme/ns/t", PRODUCE, True),
    ("app", "acme/ns/t", CONSUME, True),
    ("writer", "persistent://acme/ns/t-partition-3", PRODUCE, True),
    ("writer", "persistent://acme/ns/t", CONSUME, False),
    ("writer", "persistent://acme/ns/t", LOOKUP, True),  # lookup: produce or consume
    ("app", "persistent://acme/other/t", PRODUCE, False),  # grants are per namespace
    ("app", "persistent://nope/ns/t", LOOKUP, False),
    ("nobody", "persistent://acme/ns/t", LOOKUP, False),
    ("nobody", "t", LOOKUP, False),  # public/default
])
def test_topic_rules(catalog, role, topic, actions, allowed):
    auth = authority(catalog)
    check = lambda: auth.authorize_topic(principal(auth, role), topic, actions, "do it")  # noqa: E731
    if allowed:
        check()
    else:
        assert code_of(check) == api.AuthorizationError


def test_namespace_rules(catalog):
    auth = authority(catalog)
    auth.authorize_namespace(principal(auth, "writer"), "acme/ns", LOOKUP, "list")
    auth.authorize_namespace(principal(auth, "acme-admin"), "acme/ns", LOOKUP, "list")
    assert code_of(lambda: auth.authorize_namespace(principal(auth, "writer"), "globex/ns", LOOKUP, "list")) \
        == api.AuthorizationError


def test_the_catalog_is_read_at_each_check(catalog):
    auth = authority(catalog)
    reader = principal(auth, "reader")
    assert code_of(lambda: auth.authorize_topic(reader, "acme/ns/t", CONSUME, "consume")) == api.AuthorizationError
    catalog.namespaces.grant_permission("acme/ns", "reader", ["consume"])
    auth.authorize_topic(reader, "acme/ns/t", CONSUME, "consume")
    catalog.namespaces.revoke_permission("acme/ns", "reader")
    assert code_of(lambda: auth.authorize_topic(reader, "acme/ns/t", CONSUME, "consume")) == api.AuthorizationError


@pytest.mark.parametrize(("method", "data", "reason"), [
    ("none", b"", "authentication required"),
    ("", b"", "authentication required"),
    ("token", create_token(bytes(32), "root").encode(), "signature does not match"),
    ("tls", b"", "authentication method 'tls' is not enabled on this server; it accepts a token"),
    ("basic", b"root:pw", "authentication method 'basic' is not enabled"),
    ("unknown", b"root:pw", "authentication method 'unknown' is not enabled"),
])
def test_failed_authentication_is_refused_at_each_request(catalog, method, data, reason):
    auth = authority(catalog)
    refused = auth.authenticate(method, data)  # never raises: CONNECT is answered, the requests are refused
    assert refused.role is None and reason in refused.refusal
    with pytest.raises(ServerFailure, match=reason) as failure:
        auth.authorize_topic(refused, "t", LOOKUP, "look up t")
    assert failure.value.code == api.AuthenticationError


def test_a_token_that_expires_on_an_open_connection_is_refused_from_then_on(catalog):
    clock = ManualClock(NOW_MS)
    auth = authority(catalog, clock)
    root = principal(auth, "root", expires_at_s=NOW_S + 60)
    auth.authorize_topic(root, "t", PRODUCE, "produce")
    clock.advance(seconds=60)
    assert code_of(lambda: auth.authorize_topic(root, "t", PRODUCE, "produce")) == api.AuthenticationError


def test_anonymous_role(catalog):
    auth = authority(catalog, anonymous_role="anonymous")
    anonymous = auth.authenticate("none", b"")
    assert anonymous.role == "anonymous"
    assert code_of(lambda: auth.authorize_topic(anonymous, "t", PRODUCE, "produce")) == api.AuthorizationError
    catalog.namespaces.grant_permission("public/default", "anonymous", ["produce"])
    auth.authorize_topic(anonymous, "t", PRODUCE, "produce")
    # credentials that fail are refused: the anonymous role is for clients that present none ...
    assert auth.authenticate("token", b"garbage").refusal is not None
    # ... or use a method the server has no provider for, as Pulsar's ServerCnx takes them
    assert auth.authenticate("tls", b"").role == "anonymous"
    assert auth.authenticate("unknown", b"root:pw").role == "anonymous"


def test_authentication_off_allows_everything(catalog):
    auth = Authority(AuthConfig(), catalog, ManualClock())
    assert not auth.enabled
    assert auth.authenticate("none", b"") is OPEN
    assert auth.authenticate("token", b"garbage") is OPEN
    auth.authorize_topic(OPEN, "persistent://globex/ns/t", PRODUCE, "produce")
    assert auth.check_http(None, None) is None
    assert auth.check_http("Bearer garbage", "globex") is None


# the admin HTTP port's decision: 401 without a valid token, 403 without the role's right

def bearer(role, key=KEY):
    return f"Bearer {create_token(key, role)}"


@pytest.mark.parametrize(("authorization", "reason"), [
    (None, "authentication required"),
    ("", "authentication required"),
    ("Basic cm9vdDpwdw==", "authentication method 'basic' is not enabled on this server"),
    ("Negotiate abc", "authentication method 'Negotiate' is not enabled"),
    ("Bearer garbage", "not a valid JWT"),
    (bearer("root", bytes(32)), "signature does not match"),
])
def test_http_401(catalog, authorization, reason):
    with pytest.raises(HttpRefusal, match=reason) as refused:
        authority(catalog).check_http(authorization, "acme")
    assert refused.value.status == 401


@pytest.mark.parametrize(("role", "resource", "actions", "status"), [
    ("root", None, (), 200),  # the broker's own resources (clusters, brokers, the tenants list): superusers
    ("acme-admin", None, (), 403),
    ("root", "globex", (), 200),
    ("acme-admin", "acme", (), 200),  # tenant admin: its tenant, its namespaces, their topics
    ("acme-admin", "acme/ns", (), 200),
    ("acme-admin", "persistent://acme/ns/t", (), 200),
    ("acme-admin", "globex", (), 403),  # ... and no other tenant
    ("acme-admin", "globex/ns", (), 403),
    ("acme-admin", "persistent://globex/ns/t", LOOKUP, 403),
    ("app", "acme", (), 403),  # a namespace grant does not administer anything
    ("app", "acme/ns", (), 403),
    ("app", "persistent://acme/ns/t", LOOKUP, 200),  # ... but allows what the route says it may (stats, lookup)
    ("writer", "acme/ns/t", CONSUME, 403),
    ("app", "persistent://globex/ns/t", LOOKUP, 403),
])
def test_http_403(catalog, role, resource, actions, status):
    auth = authority(catalog)
    if status == 200:
        assert auth.check_http(bearer(role), resource, actions) == role
        return
    with pytest.raises(HttpRefusal) as refused:
        auth.check_http(bearer(role), resource, actions)
    assert refused.value.status == status
    assert repr(role) in refused.value.reason


def test_http_anonymous_role(catalog):
    auth = authority(catalog, anonymous_role="anonymous")
    catalog.tenants.update("globex", admin_roles=["anonymous"])
    assert auth.check_http(None, "globex") == "anonymous"
    with pytest.raises(HttpRefusal) as refused:
        auth.check_http(None, "acme")
    assert refused.value.status == 403


# basic and TLS certificate authentication, beside tokens

USERS = Htpasswd.parse(f"root:{apr_md5_crypt.hash('root pw')}\ncarol:{des_crypt.hash('carol pw')}\n", "users")


def certificate(*common_names: str) -> dict:
    """A verified peer certificate as the ssl module gives it (getpeercert())."""
    subject = ((("organizationName", "seglog tests"),), *((("commonName", name),) for name in common_names))
    return {"subject": subject, "issuer": ((("commonName", "CA"),),)}


def mixed(catalog, **config):
    """Every provider on: token, basic and TLS certificates."""
    return authority(catalog, basic_users=USERS, tls=True, **config)


def test_basic_authentication(catalog):
    auth = mixed(catalog)
    assert auth.config.methods == ("token", "basic", "tls")
    assert auth.authenticate("basic", b"root:root pw").role == "root"
    assert auth.authenticate("basic", "carol:carol pw").role == "carol"
    for data, reason in ((b"root:wrong", "unknown user or wrong password"),
                         (b"nobody:root pw", "unknown user or wrong password"),
                         (b"root", "not 'user:password'"), (b"\xff:x", "not UTF-8")):
        refused = auth.authenticate("basic", data)
        assert refused.role is None and reason in refused.refusal
        assert code_of(partial(auth.authorize_topic, refused, "t", LOOKUP, "look up t")) == api.AuthenticationError
    # a role like any other: carol is granted nothing in acme/ns
    carol = auth.authenticate("basic", b"carol:carol pw")
    assert code_of(lambda: auth.authorize_topic(carol, "acme/ns/t", CONSUME, "consume")) == api.AuthorizationError
    catalog.namespaces.grant_permission("acme/ns", "carol", ["consume"])
    auth.authorize_topic(carol, "acme/ns/t", CONSUME, "consume")


def test_tls_certificate_authentication(catalog):
    auth = mixed(catalog)
    assert auth.authenticate("tls", b"", certificate("app")).role == "app"
    assert auth.authenticate("tls", b"", certificate("ignored", "app")).role == "app"  # the most specific CN
    auth.authorize_topic(auth.authenticate("tls", b"", certificate("app")), "acme/ns/t", PRODUCE, "produce")
    for peer in (None, {}, certificate()):  # a plain connection, no certificate, one without a common name
        refused = auth.authenticate("tls", b"", peer)
        assert refused.role is None and "no client certificate" in refused.refusal
    # a certificate is not credentials for another method
    assert auth.authenticate("basic", b"root:wrong", certificate("root")).role is None


def test_without_a_tls_provider_a_certificate_authenticates_no_one(catalog):
    auth = authority(catalog)
    assert auth.config.methods == ("token",)
    assert "'tls' is not enabled" in auth.authenticate("tls", b"", certificate("root")).refusal
    with pytest.raises(HttpRefusal, match="authentication required") as refused:
        auth.check_http(None, "acme", certificate=certificate("root"))
    assert refused.value.status == 401


def test_http_basic_and_certificates(catalog):
    auth = mixed(catalog, anonymous_role="anonymous")
    basic = "Basic " + base64.b64encode(b"root:root pw").decode()
    assert auth.check_http(basic, None) == "root"
    assert auth.check_http(basic.replace("Basic", "basic"), None) == "root"  # schemes are case-insensitive
    assert auth.check_http(bearer("root"), None) == "root"
    # without a header, the client certificate: role acme-admin administers acme
    assert auth.check_http(None, "acme", certificate=certificate("acme-admin")) == "acme-admin"
    # a header decides, whatever the certificate
    assert auth.check_http(bearer("app"), "persistent://acme/ns/t", LOOKUP, certificate=certificate("root")) == "app"
    for authorization, reason in (("Basic " + base64.b64encode(b"root:wrong").decode(), "unknown user or wrong"),
                                  ("Basic !!!", "not base64"),
                                  (bearer("root", bytes(32)), "signature does not match")):
        # refused, not taken for the anonymous role, even with one
        with pytest.raises(HttpRefusal, match=reason) as refused:
            auth.check_http(authorization, "acme", certificate=certificate("root"))
        assert refused.value.status == 401
    # a scheme without a provider counts as no credentials: the anonymous role, which may not act on acme
    with pytest.raises(HttpRefusal, match="'anonymous'") as refused:
        auth.check_http("Negotiate abc", "acme")
    assert refused.value.status == 403


def test_no_provider_means_no_authentication(catalog):
    config = AuthConfig()
    assert config.methods == () and not config.enabled
    assert AuthConfig(basic_users=USERS).enabled and AuthConfig(tls=True).methods == ("tls",)
    refused = Authority(AuthConfig(basic_users=USERS), catalog, ManualClock()).authenticate("none", b"")
    assert refused.refusal == ("authentication required: this server accepts clients with a user and password "
                               "(AuthenticationBasic)")
