"""TLS ports beside the plain ones (--tls-port, --https-port) and TLS client certificate authentication
(--tls-trust-certs-file, --auth-tls), with the real pulsar-client: one server with every provider on (token,
basic, tls), as Pulsar's test service runs. The role of a certificate is its common name; certificates the
trusted CAs do not sign fail the handshake; a certificate carries no role for another method; the https port
takes certificates too; and --tls-require-trusted-client-cert refuses TLS clients without one."""

from __future__ import annotations

import json
import ssl
import urllib.request

import httpx
import pytest
from passlib.hash import apr_md5_crypt

import seglog
from helpers_server import RawConnection, pulsar, refused_at_once, refused_serve, round_trip, start_server, topics_of
from helpers_tls import make_ca, make_certificates, make_client_certificate
from seglog.server.auth import create_secret_key, create_token
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import Type, command, encode_command

TLS_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationTls"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def clients(tmp_path_factory, certificates):
    """Client certificates of the test CA: alice (granted acme/ns), admin (a superuser), nobody (granted
    nothing); and `stranger`, named admin too, signed by a CA the server does not trust."""
    directory = tmp_path_factory.mktemp("client-certs")
    made = {name: make_client_certificate(certificates.authority, directory, name)
            for name in ("alice", "admin", "nobody")}
    made["stranger"] = make_client_certificate(make_ca(directory / "other", "another CA"), directory / "other",
                                               "admin")
    return made


@pytest.fixture(scope="module")
def secure(tmp_path_factory, certificates):
    """Plain ports, TLS ports beside them, and every provider: tokens, basic users (bob, granted consume on
    acme/ns), client certificates; superuser admin. Tenant acme/ns grants alice produce and consume."""
    directory = tmp_path_factory.mktemp("secure")
    key = create_secret_key()
    (directory / "secret.key").write_bytes(key)
    (directory / ".htpasswd").write_text(f"bob:{apr_md5_crypt.hash('bob pw')}\n")
    with seglog.open(directory / "data") as log:
        log.admin.tenants.create("acme")
        log.admin.namespaces.create("acme/ns")
        log.admin.namespaces.grant_permission("acme/ns", "alice", ["produce", "consume"])
        log.admin.namespaces.grant_permission("acme/ns", "bob", ["consume"])
        log.admin.tenants.create("globex")
        log.admin.namespaces.create("globex/ns")
    running = start_server(directory / "data", "--tls-port", "0", "--https-port", "0",
                           "--tls-cert-file", str(certificates.cert), "--tls-key-file", str(certificates.key),
                           "--tls-trust-certs-file", str(certificates.ca), "--auth-tls",
                           "--auth-token-secret-key", str(directory / "secret.key"),
                           "--auth-basic-file", str(directory / ".htpasswd"), "--superuser-roles", "admin",
                           ca=certificates.ca)
    yield running, key
    running.stop()


def tls_client(server, cert_and_key, *, plugin: str | None = None, url: str | None = None, **options):
    """A client on the TLS port authenticating with a client certificate, through the named plugin."""
    cert, key = cert_and_key
    if plugin is None:
        authentication = pulsar.AuthenticationTLS(str(cert), str(key))
    else:
        authentication = pulsar.Authentication(plugin, f"tlsCertFile:{cert},tlsKeyFile:{key}")
    return server.client(url or server.tls_url, authentication=authentication, **options)








def test_plain_and_tls_ports_side_by_side(secure, certificates):
    server, key = secure
    assert server.pulsar_url.startswith("pulsar://127.0.0.1:") and server.http_url.startswith("http://127.0.0.1:")
    assert server.tls_url.startswith("pulsar+ssl://127.0.0.1:") and server.https_url.startswith("https://127.0.0.1:")
    ports = {url.rsplit(":", 1)[1] for url in (server.pulsar_url, server.http_url, server.tls_url, server.https_url)}
    assert len(ports) == 4
    # one topic, written on the plain port and read on the TLS port
    admin = pulsar.AuthenticationToken(create_token(key, "admin"))
    consumer = server.client(server.tls_url, authentication=admin).subscribe("persistent://globex/ns/both", "s")
    server.client(authentication=admin).create_producer("persistent://globex/ns/both").send(b"plain to tls")
    assert consumer.receive(10_000).data() == b"plain to tls"
    # the cluster is registered with all four URLs, and both HTTP lookups answer them
    expected = {"serviceUrl": server.http_url, "serviceUrlTls": server.https_url,
                "brokerServiceUrl": server.pulsar_url, "brokerServiceUrlTls": server.tls_url}
    headers = {"Authorization": f"Bearer {create_token(key, 'admin')}"}
    with httpx.Client(headers=headers, timeout=30) as http:
        cluster = http.get(f"{server.http_url}/admin/v2/clusters/standalone").json()
        assert {name: cluster[name] for name in expected} == expected
    lookup = {"brokerUrl": server.pulsar_url, "brokerUrlTls": server.tls_url, "httpUrl": server.http_url,
              "httpUrlTls": server.https_url}
    context = ssl.create_default_context(cafile=certificates.ca)
    with httpx.Client(headers=headers, timeout=30, verify=context) as http:
        for base in (server.http_url, server.https_url):
            assert http.get(f"{base}/lookup/v2/topic/persistent/globex/ns/both").json() == lookup


def test_lookup_names_the_tls_port(secure):
    server, key = secure
    raw = RawConnection(server.port)
    try:
        raw.connect(auth_method_name="token", auth_data=create_token(key, "admin").encode())
        raw.send(encode_command(command(Type.LOOKUP, topic="persistent://globex/ns/both", request_id=1)))
        answer = raw.receive().lookup_topic_response
        assert answer.response == api.CommandLookupTopicResponse.Connect
        assert (answer.broker_service_url, answer.broker_service_url_tls) == (server.pulsar_url, server.tls_url)
    finally:
        raw.close()


@pytest.mark.parametrize("plugin", [None, TLS_PLUGIN, "tls"])
def test_a_client_certificate_authenticates_its_common_name(secure, clients, plugin):
    server, _ = secure
    alice = tls_client(server, clients["alice"], plugin=plugin)
    round_trip(alice, f"persistent://acme/ns/alice-{plugin}", b"from alice")
    # alice is a role like another: granted acme/ns, nothing in globex
    reason = refused_at_once(pulsar.AuthorizationError,
                             lambda: alice.create_producer("persistent://globex/ns/alice"))
    assert "AuthorizationError" in reason
    assert "globex/ns/alice" not in topics_of(server.data)


def test_a_superusers_certificate_may_do_everything(secure, clients):
    server, _ = secure
    round_trip(tls_client(server, clients["admin"]), "persistent://globex/ns/admin-cert", b"as admin")


def test_a_certificate_without_permission_is_refused(secure, clients):
    server, _ = secure
    nobody = tls_client(server, clients["nobody"])
    for call in (lambda: nobody.create_producer("persistent://acme/ns/nobody"),
                 lambda: nobody.subscribe("persistent://acme/ns/nobody", "s")):
        refused_at_once(pulsar.AuthorizationError, call)
    assert "acme/ns/nobody" not in topics_of(server.data)


def test_a_certificate_the_trusted_cas_do_not_sign_fails_the_handshake(secure, clients):
    """The server's TLS alert is all the client learns: it retries until its operation timeout, as against
    Pulsar's broker."""
    server, _ = secure
    stranger = tls_client(server, clients["stranger"], operation_timeout_seconds=2)  # named admin, a superuser
    with pytest.raises(pulsar.Timeout):
        stranger.create_producer("persistent://globex/ns/stranger")
    assert "globex/ns/stranger" not in topics_of(server.data)


def test_client_certificates_are_only_read_over_tls(secure, clients):
    server, _ = secure
    plain = tls_client(server, clients["alice"], url=server.pulsar_url)  # no handshake, no certificate
    reason = refused_at_once(pulsar.AuthenticationError, lambda: plain.create_producer("persistent://acme/ns/p"))
    assert "AuthenticationError" in reason


def test_other_methods_over_tls_with_a_client_certificate(secure, clients):
    """The certificate only secures the connection: the role is the basic user's (bob may consume, not
    produce), not the certificate's (alice may both), as in Pulsar's test_tls_encryption_with_other_auth."""
    server, key = secure
    cert, private_key = clients["alice"]
    bob = server.client(server.tls_url, authentication=pulsar.AuthenticationBasic("bob", "bob pw"),
                        tls_certificate_file_path=str(cert), tls_private_key_file_path=str(private_key))
    bob.subscribe("persistent://acme/ns/bob", "s")
    refused_at_once(pulsar.AuthorizationError, lambda: bob.create_producer("persistent://acme/ns/bob"))
    wrong = server.client(server.tls_url, authentication=pulsar.AuthenticationBasic("bob", "wrong"),
                          tls_certificate_file_path=str(cert), tls_private_key_file_path=str(private_key))
    refused_at_once(pulsar.AuthenticationError, lambda: wrong.subscribe("persistent://acme/ns/bob", "s"))
    # and the token of alice with nobody's certificate is alice
    nobody_cert, nobody_key = clients["nobody"]
    alice = server.client(server.tls_url, authentication=pulsar.AuthenticationToken(create_token(key, "alice")),
                          tls_certificate_file_path=str(nobody_cert), tls_private_key_file_path=str(nobody_key))
    round_trip(alice, "persistent://acme/ns/alice-token", b"token over tls")


def test_the_https_port_takes_client_certificates(secure, certificates, clients):
    server, _ = secure

    def https(client_certificate=None, **headers) -> httpx.Client:
        context = ssl.create_default_context(cafile=certificates.ca)
        if client_certificate is not None:
            context.load_cert_chain(*client_certificate)
        return httpx.Client(base_url=server.https_url, verify=context, headers=headers, timeout=30)

    with https(clients["alice"]) as alice:
        assert alice.get("/admin/v2/namespaces/acme/ns/topics").status_code == 200  # granted: may list
        forbidden = alice.get("/admin/v2/tenants")
        assert forbidden.status_code == 403 and "'alice'" in forbidden.json()["reason"]
    with https(clients["admin"]) as admin:
        assert admin.get("/admin/v2/tenants").status_code == 200
    with https() as anonymous:
        assert anonymous.get("/admin/v2/tenants").status_code == 401
    with https(clients["admin"], Authorization="Basic Ym9iOmJvYiBwdw==") as bob:  # bob:bob pw decides
        assert bob.get("/admin/v2/tenants").status_code == 403
    with pytest.raises(httpx.HTTPError):
        with https(clients["stranger"]) as stranger:
            stranger.get("/admin/v2/tenants")
    # the plain HTTP port never sees a certificate
    with httpx.Client(base_url=server.http_url, timeout=30) as plain:
        assert plain.get("/admin/v2/tenants").status_code == 401


def test_trusted_client_certificates_required(tmp_path, certificates, clients):
    key = create_secret_key()
    (tmp_path / "secret.key").write_bytes(key)
    server = start_server(tmp_path / "data", "--tls-port", "0", "--https-port", "0", "--tls-cert-file",
                          str(certificates.cert), "--tls-key-file", str(certificates.key), "--tls-trust-certs-file",
                          str(certificates.ca), "--tls-require-trusted-client-cert", "--auth-tls",
                          "--auth-token-secret-key", str(tmp_path / "secret.key"), "--superuser-roles", "admin",
                          ca=certificates.ca)
    try:
        token = pulsar.AuthenticationToken(create_token(key, "admin"))
        without = server.client(server.tls_url, authentication=token, operation_timeout_seconds=2)
        with pytest.raises(pulsar.Timeout):  # refused by the handshake: the client retries until its timeout
            without.create_producer("required")
        round_trip(tls_client(server, clients["admin"]), "required", b"with a certificate")
        server.client(authentication=token).create_producer("plain")  # the plain port asks for none
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # (TLS 1.3: the alert after the handshake)
            urllib.request.urlopen(f"{server.https_url}/admin/v2/brokers/health", timeout=10,
                                   context=ssl.create_default_context(cafile=certificates.ca))
    finally:
        server.stop()


def test_tls_on_the_main_ports_alone_when_no_tls_port_is_given(tmp_path, certificates, clients):
    """A certificate without --tls-port or --https-port: both main ports serve TLS only, and LOOKUP names the
    pulsar+ssl:// URL for both; client certificates authenticate there too."""
    server = start_server(tmp_path / "data", "--tls-cert-file", str(certificates.cert), "--tls-key-file",
                          str(certificates.key), "--tls-trust-certs-file", str(certificates.ca), "--auth-tls",
                          "--superuser-roles", "admin", ca=certificates.ca)
    try:
        assert server.pulsar_url.startswith("pulsar+ssl://") and server.http_url.startswith("https://")
        assert server.tls_url is None and server.https_url is None
        round_trip(tls_client(server, clients["admin"], url=server.pulsar_url), "tls-only", b"one port")
        with urllib.request.urlopen(f"{server.http_url}/admin/v2/brokers/health", timeout=10,
                                    context=ssl.create_default_context(cafile=certificates.ca)) as response:
            assert response.read() == b"ok"
    finally:
        server.stop()


@pytest.mark.parametrize(("extra", "said"), [
    (["--tls-port", "0"], "invalid --tls-port 0; accepted: with --tls-cert-file and --tls-key-file"),
    (["--https-port", "0"], "invalid --https-port 0; accepted: with --tls-cert-file and --tls-key-file"),
    (["--tls-trust-certs-file", "CA"], "invalid --tls-trust-certs-file"),
    (["CERTS", "--auth-tls"], "invalid --auth-tls true; accepted: with --tls-trust-certs-file"),
    (["CERTS", "--tls-require-trusted-client-cert"], "accepted: with --tls-trust-certs-file"),
    (["CERTS", "--tls-trust-certs-file", "KEY"], "a readable PEM file of the CA certificates"),
    (["CERTS", "--tls-trust-certs-file", "/nonexistent/ca.pem"], "No such file"),
    (["CERTS", "--port", "16650", "--tls-port", "16650"],
     "invalid --tls-port 16650; accepted: a port of its own: --port is 16650 too"),
    (["CERTS", "--http-port", "18080", "--https-port", "18080"], "--http-port is 18080 too"),
])
def test_serve_refuses_bad_tls_options(tmp_path, certificates, extra, said):
    files = {"CA": str(certificates.ca), "KEY": str(certificates.key)}
    arguments = []
    for argument in extra:
        if argument == "CERTS":
            arguments += ["--tls-cert-file", str(certificates.cert), "--tls-key-file", str(certificates.key)]
        else:
            arguments.append(files.get(argument, argument))
    message = refused_serve(tmp_path / "data", *arguments)
    assert said in message, message


def test_the_first_line_names_each_tls_port_asked_for(tmp_path, certificates):
    """--tls-port alone: the line has the two plain URLs and the pulsar+ssl:// one; the HTTP lookup has no
    httpUrlTls then."""
    server = start_server(tmp_path / "data", "--tls-port", "0", "--tls-cert-file", str(certificates.cert),
                          "--tls-key-file", str(certificates.key), ca=certificates.ca)
    try:
        assert server.tls_url.startswith("pulsar+ssl://") and server.https_url is None
        with urllib.request.urlopen(f"{server.http_url}/lookup/v2/topic/persistent/public/default/t",
                                    timeout=10) as response:
            answer = json.load(response)
        assert answer == {"brokerUrl": server.pulsar_url, "brokerUrlTls": server.tls_url,
                          "httpUrl": server.http_url, "httpUrlTls": ""}
        round_trip(server.client(server.tls_url), "tls-port-only", b"no client certificate asked")
    finally:
        server.stop()
