"""`seglog serve` over TLS on its main ports (--tls-cert-file, --tls-key-file without --tls-port): the real
pulsar-client on pulsar+ssl:// with a throwaway CA, the health route on https://, a client trusting another CA
refused, token authentication over TLS, and a client certificate (AuthenticationTLS) refused on a server
without --auth-tls. TLS ports beside plain ones and certificate authentication: test_auth_tls.py."""

from __future__ import annotations

import json
import ssl
import time
import urllib.request

import pytest

from helpers_server import pulsar, refused_serve, start_server
from helpers_tls import make_ca, make_certificates
from seglog.server.auth import create_secret_key, create_token

AT_ONCE_S = 5.0  # the client's operation timeout is 10 s


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, certificates):
    running = start_server(tmp_path_factory.mktemp("tls") / "data", "--tls-cert-file", str(certificates.cert),
                           "--tls-key-file", str(certificates.key), ca=certificates.ca)
    yield running
    running.stop()


def test_the_urls_name_tls(tls_server):
    assert tls_server.pulsar_url.startswith("pulsar+ssl://127.0.0.1:")
    assert tls_server.http_url.startswith("https://127.0.0.1:")


def test_produce_and_consume_over_tls(tls_server):
    client = tls_server.client()  # trusts the test CA
    consumer = client.subscribe("tls-topic", "s")
    producer = client.create_producer("tls-topic")
    sent = [producer.send(f"m{i}".encode()) for i in range(5)]
    received = []
    for _ in range(5):
        message = consumer.receive(10_000)
        consumer.acknowledge(message)
        received.append((message.message_id(), message.data()))
    assert [data for _, data in received] == [f"m{i}".encode() for i in range(5)]
    assert [str(message_id) for message_id, _ in received] == [str(message_id) for message_id in sent]


def test_a_client_trusting_another_ca_is_refused(tls_server, tmp_path):
    other_ca = make_ca(tmp_path, "another CA").path
    client = pulsar.Client(tls_server.pulsar_url, tls_trust_certs_file_path=str(other_ca),
                           operation_timeout_seconds=10)
    try:
        started = time.monotonic()
        with pytest.raises((pulsar.ConnectError, pulsar.Timeout)):
            client.create_producer("untrusted")
        assert time.monotonic() - started < AT_ONCE_S
    finally:
        client.close()


def test_health_over_https(tls_server, certificates, tmp_path):
    health = f"{tls_server.http_url}/admin/v2/brokers/health"
    trusted = ssl.create_default_context(cafile=certificates.ca)
    with urllib.request.urlopen(health, timeout=10, context=trusted) as response:
        assert response.status == 200 and response.read() == b"ok"
    other_ca = make_ca(tmp_path, "another CA").path
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(health, timeout=10, context=ssl.create_default_context(cafile=other_ca))
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain http on the TLS port
        urllib.request.urlopen(health.replace("https://", "http://"), timeout=10)


@pytest.fixture(scope="module")
def secured_tls(tmp_path_factory, certificates):
    directory = tmp_path_factory.mktemp("secured-tls")
    key = create_secret_key()
    (directory / "secret.key").write_bytes(key)
    running = start_server(directory / "data", "--tls-cert-file", str(certificates.cert), "--tls-key-file",
                           str(certificates.key), "--auth-token-secret-key", str(directory / "secret.key"),
                           "--superuser-roles", "admin", ca=certificates.ca)
    yield running, key
    running.stop()


def test_token_authentication_over_tls(secured_tls):
    server, key = secured_tls
    client = server.client(authentication=pulsar.AuthenticationToken(create_token(key, "admin")))
    consumer = client.subscribe("secured-tls", "s")
    client.create_producer("secured-tls").send(b"secret")
    assert consumer.receive(10_000).data() == b"secret"

    anonymous = server.client()
    started = time.monotonic()
    with pytest.raises(pulsar.AuthenticationError):
        anonymous.create_producer("secured-tls")
    assert time.monotonic() - started < AT_ONCE_S


def test_client_certificates_authenticate_no_one_without_auth_tls(secured_tls, certificates):
    """No provider for the method 'tls' and no anonymous role: refused, at once."""
    server, _ = secured_tls
    client = server.client(authentication=pulsar.AuthenticationTLS(str(certificates.cert), str(certificates.key)))
    started = time.monotonic()
    with pytest.raises(pulsar.AuthenticationError):
        client.create_producer("secured-tls")
    assert time.monotonic() - started < AT_ONCE_S
    assert "'tls' is not enabled" not in server.log()  # refused per request, not logged as a server problem


@pytest.mark.parametrize(("extra", "said"), [
    (["--tls-cert-file", "CERT"], "--tls-key-file"),
    (["--tls-key-file", "KEY"], "--tls-cert-file"),
    (["--tls-cert-file", "KEY", "--tls-key-file", "CERT"], "a PEM certificate (chain) and its PEM private key"),
    (["--tls-cert-file", "/nonexistent.pem", "--tls-key-file", "KEY"], "No such file"),
])
def test_serve_refuses_incomplete_or_bad_tls_options(tmp_path, certificates, extra, said):
    files = {"CERT": str(certificates.cert), "KEY": str(certificates.key)}
    assert said in refused_serve(tmp_path / "data", *[files.get(arg, arg) for arg in extra])


def test_http_lookup_over_https(tls_server, certificates):
    """Service URL https://: the HTTP lookup answers the pulsar+ssl:// URL (brokerUrlTls), which the client uses."""
    with urllib.request.urlopen(f"{tls_server.http_url}/lookup/v2/topic/persistent/public/default/tls-topic",
                                timeout=10, context=ssl.create_default_context(cafile=certificates.ca)) as response:
        answer = json.load(response)
    assert answer["brokerUrlTls"] == tls_server.pulsar_url and answer["httpUrlTls"] == tls_server.http_url
    client = pulsar.Client(tls_server.http_url, tls_trust_certs_file_path=str(certificates.ca),
                           operation_timeout_seconds=10)
    try:
        client.create_producer("https-lookup").send(b"over https")
    finally:
        client.close()
