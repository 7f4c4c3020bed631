"""pulsar-client-python's own test suite against `seglog serve` (docs/SERVER.md, "pulsar-client-python's own
tests"). Not part of seglog's suite: it runs a file of the Apache project, which seglog does not copy.

    git clone https://github.com/apache/pulsar-client-python
    python tests/acceptance/pulsar_client_suite.py pulsar-client-python/tests [pytest options]

Its fixtures assume a fresh Pulsar test service on localhost, so this starts `seglog serve` as that service's
script (build-support/start-test-service-inside-container.sh, with tests/test-conf/standalone-ssl.conf) runs
Pulsar: plain ports 6650 and 8080, TLS ports 6651 and 8443 with the suite's broker certificate, client
certificates verified against its cacert.pem; the TLS, token (a new secret key) and basic (test-conf/.htpasswd)
providers; superusers localhost, superUser and admin; anonymous role `anonymous`; advertised address localhost;
messages up to 1,024,000 bytes. Then, as the script does through the admin REST API with a superuser's token:
tenant public administered by anonymous, public/default and public/default-2 granting anonymous produce and
consume, tenant private with private/auth granting token-principal produce and consume; and the token of
token-principal in tests/.test-token.txt. It runs tests/pulsar_test.py (or the file `--file NAME` names, given after the
folder: schema_test.py) with pytest and stops the server by its pid. The exit status is pytest's."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

PORTS = (6650, 8080, 6651, 8443)
ADMIN = "http://127.0.0.1:8080/admin/v2"
START_TIMEOUT_S = 30.0
SUPERUSERS = "localhost,superUser,admin"
ANONYMOUS_GRANT = {"auth_policies": {"namespace_auth": {"anonymous": ["produce", "consume"]}},
                   "replication_clusters": ["standalone"]}


def main(arguments: list[str]) -> int:
    test_file = "pulsar_test.py"
    if len(arguments) >= 2 and arguments[1] == "--file":  # another file of the suite, e.g. schema_test.py
        test_file, arguments = arguments[2], [arguments[0], *arguments[3:]]
    if not arguments or not (Path(arguments[0]) / test_file).is_file():
        print(__doc__, file=sys.stderr)
        print(f"error: give the tests folder of a pulsar-client-python checkout (it holds {test_file}), then "
              "optionally --file NAME (default pulsar_test.py)", file=sys.stderr)
        return 2
    tests, pytest_options = Path(arguments[0]).resolve(), arguments[1:]
    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                print(f"error: port {port} is in use; the suite needs {', '.join(map(str, PORTS))} free",
                      file=sys.stderr)
                return 2
    conf = tests / "test-conf"
    with tempfile.TemporaryDirectory(prefix="seglog-acceptance-") as scratch:
        secret_key = Path(scratch) / "secret.key"
        _seglog("tokens", "create-secret-key", "--output", str(secret_key))
        server = subprocess.Popen(
            [sys.executable, "-m", "seglog", "--data", str(Path(scratch) / "data"), "serve", "--cluster", "standalone",
             "--port", "6650", "--http-port", "8080", "--tls-port", "6651", "--https-port", "8443",
             "--flight-port", "0", "--advertised-address", "localhost",
             "--tls-cert-file", str(conf / "broker-cert.pem"), "--tls-key-file", str(conf / "broker-key.pem"),
             "--tls-trust-certs-file", str(conf / "cacert.pem"), "--auth-tls",
             "--auth-token-secret-key", str(secret_key), "--auth-basic-file", str(conf / ".htpasswd"),
             "--superuser-roles", SUPERUSERS, "--anonymous-user-role", "anonymous",
             "--max-message-size", "1024000"],
            stdout=subprocess.DEVNULL)
        try:
            _wait_for_metrics(server)
            _configure(_token(secret_key, "superUser"))
            # read by test_token_auth and test_token_auth_supplier (the script copies its token.txt there)
            (tests / ".test-token.txt").write_text(_token(secret_key, "token-principal") + "\n")
            return subprocess.call([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--timeout", "60",
                                    str(tests / test_file), *pytest_options], cwd=tests)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(server.pid, signal.SIGKILL)
                server.wait(START_TIMEOUT_S)


def _seglog(*arguments: str) -> str:
    """Run a seglog command; the last line it prints."""
    done = subprocess.run([sys.executable, "-m", "seglog", *arguments], check=True, capture_output=True, text=True)
    return done.stdout.splitlines()[-1]


def _token(secret_key: Path, subject: str) -> str:
    """A token for `subject`, made as the script makes it (`pulsar tokens create --secret-key file://...`)."""
    return _seglog("tokens", "create", "--secret-key", f"file://{secret_key}", "--subject", subject)


def _wait_for_metrics(server: subprocess.Popen) -> None:
    """As the script: poll /metrics until it answers."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            raise SystemExit(f"seglog serve exited with {server.returncode}")
        try:
            with urllib.request.urlopen("http://127.0.0.1:8080/metrics", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # the port is not open yet (bounded by the deadline)


def _configure(token: str) -> None:
    """The script's PUTs, as a superuser. Like its curl calls, a PUT of what exists already (409) is not an
    error; seglog has the tenant public and the namespace public/default from the start, so the roles and
    grant those PUTs carry are set through the update routes instead, to reach the state the script sets up."""
    def call(method: str, path: str, body: object = None) -> int:
        request = urllib.request.Request(f"{ADMIN}/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as error:
            if error.code != 409:
                raise SystemExit(f"{method} {path}: {error.code} {error.read().decode(errors='replace')}") from None
            return error.code

    call("PUT", "clusters/standalone", {"serviceUrl": "http://localhost:8080/",
                                        "serviceUrlTls": "https://localhost:8443/",
                                        "brokerServiceUrl": "pulsar://localhost:6650/",
                                        "brokerServiceUrlTls": "pulsar+ssl://localhost:6651/"})
    public = {"adminRoles": ["anonymous"], "allowedClusters": ["standalone"]}
    if call("PUT", "tenants/public", public) == 409:
        call("POST", "tenants/public", public)
    if call("PUT", "namespaces/public/default", ANONYMOUS_GRANT) == 409:
        call("POST", "namespaces/public/default/permissions/anonymous", ["produce", "consume"])
    call("PUT", "namespaces/public/default-2", ANONYMOUS_GRANT)
    call("PUT", "tenants/private", {"adminRoles": [], "allowedClusters": ["standalone"]})
    call("PUT", "namespaces/private/auth", {"auth_policies": {"namespace_auth": {"token-principal": ["produce",
                                                                                                      "consume"]}},
                                            "replication_clusters": ["standalone"]})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
