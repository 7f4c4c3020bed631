"""Admin commands with `--url` on a `seglog serve` (tests/helpers/helpers_server.py, free loopback ports): what
they print beside the REST routes they use, and beside the same command with --data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from helpers_cli import one_line
from helpers_server import Server, rest, start_server
from seglog.cli import main


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("served") / "data")
    yield running
    running.stop()


def on(where: str | Path, *args: str, code: int = 0, env: dict[str, str | None] | None = None) -> Result:
    """`seglog --url URL ARGS` for an http:// `where`, else `seglog --data DIR ARGS`; the exit code checked."""
    runner = CliRunner(env={"SEGLOG_DATA": None, "SEGLOG_URL": None, "SEGLOG_TOKEN": None, "COLUMNS": "200",
                            "NO_COLOR": "1", **(env or {})})
    given = ["--url", where] if str(where).startswith("http") else ["--data", str(where)]
    result = runner.invoke(main, [*given, *args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def both(server: Server, data: Path) -> list[str | Path]:
    return [server.http_url, data]


# --- topics stats: the replication section -------------------------------------------------------------------

def test_stats_on_a_server_has_the_replication_section_of_the_rest_route(server: Server) -> None:
    on(server.http_url, "clusters", "create", "east", "--url", "http://127.0.0.1:9", "--broker-url",
       "pulsar://127.0.0.1:9")  # a closed port: the replicator fails and retries, and is in the stats
    on(server.http_url, "tenants", "create", "geo", "-c", "standalone,east")
    on(server.http_url, "namespaces", "create", "geo/ns", "--clusters", "standalone,east")
    for topic, partitions in (("geo/ns/events", "1"), ("geo/ns/parted", "2")):
        on(server.http_url, "topics", "create", topic, "-p", partitions)
        route = "stats" if partitions == "1" else "partitioned-stats"
        status, pulsars = rest(server.http_url, "GET", f"/admin/v2/persistent/{topic}/{route}")
        assert status == 200 and "east" in pulsars["replication"]
        stats = json.loads(on(server.http_url, "topics", "stats", topic).output)
        assert set(stats["replication"]) == set(pulsars["replication"]) == {"east"}
        assert set(stats["replication"]["east"]) >= {"connected", "replicationBacklog", "msgRateOut"}


def test_stats_on_a_data_directory_has_an_empty_replication_section(tmp_path: Path) -> None:
    on(tmp_path / "d", "topics", "create", "t")
    assert json.loads(on(tmp_path / "d", "topics", "stats", "t").output)["replication"] == {}


# --- set-backlog-quota with both --limit and --limitTime, as pulsar-admin takes them -----------------------

@pytest.mark.parametrize(("quota_type", "applied", "unused"), [
    ("destination_storage", {"limit": 2 << 30, "policy": "producer_exception"}, "--limitTime 3600"),
    ("message_age", {"limitTime": 3600, "policy": "producer_exception"}, "--limit 2G"),
])
def test_set_backlog_quota_takes_both_limits(server: Server, tmp_path: Path, quota_type: str, applied: dict,
                                             unused: str) -> None:
    on(tmp_path / "d", "topics", "create", "t")
    namespace = f"public/both-{quota_type.replace('_', '-')}"
    for where in both(server, tmp_path / "d"):
        on(where, "namespaces", "create", namespace)
        on(where, "topics", "create", f"{namespace}/t")
        for level, name in (("namespaces", namespace), ("topics", f"{namespace}/t")):
            result = on(where, level, "set-backlog-quota", name, "--limit", "2G", "--limitTime", "3600", "--policy",
                        "producer_exception", "--type", quota_type)
            assert f"Set backlog quota {quota_type} of {name}" in result.stdout
            assert f"{unused} is not applied" in one_line(result.stderr)
            assert json.loads(on(where, level, "get-backlog-quotas", name).stdout) == {quota_type: applied}


def test_set_backlog_quota_still_checks_the_limit_it_does_not_apply(tmp_path: Path) -> None:
    on(tmp_path / "d", "topics", "create", "t")
    message = one_line(on(tmp_path / "d", "namespaces", "set-backlog-quota", "public/default", "--limit", "2G",
                          "--limitTime", "soon", "-p", "producer_exception", code=2).output)
    assert "Invalid value for '--limitTime' / '-lt'" in message
    assert json.loads(on(tmp_path / "d", "namespaces", "get-backlog-quotas", "public/default").stdout) == {}


# --- remove-backlog-quota says when there was nothing to remove ----------------------------------------------

def test_remove_backlog_quota_says_when_there_was_nothing_to_remove(server: Server, tmp_path: Path) -> None:
    on(tmp_path / "d", "topics", "create", "t")
    for where in both(server, tmp_path / "d"):
        on(where, "namespaces", "create", "public/removals")
        on(where, "topics", "create", "public/removals/t")
        for level, name in (("namespaces", "public/removals"), ("topics", "public/removals/t")):
            result = on(where, level, "remove-backlog-quota", name, "--type", "message_age")
            assert result.stdout == ""
            assert one_line(result.stderr) == f"Nothing removed: {name} has no backlog quota message_age of its own"
            on(where, level, "set-backlog-quota", name, "-lt", "1h", "-p", "producer_exception", "-t", "message_age")
            result = on(where, level, "remove-backlog-quota", name, "--type", "message_age")
            assert result.stderr == "" and f"Removed backlog quota message_age of {name}" in result.stdout


# --- pulsar-admin's verbs, on a data directory and on a server -----------------------------------------------

def test_topics_list_of_a_namespace_as_pulsar_admin_prints_it(server: Server, tmp_path: Path) -> None:
    on(tmp_path / "d", "topics", "create", "t")
    for where in both(server, tmp_path / "d"):
        on(where, "namespaces", "create", "public/listed")
        on(where, "topics", "create", "public/listed/single")
        on(where, "topics", "create-partitioned-topic", "public/listed/parted", "-p", "3")
        assert on(where, "topics", "list", "public/listed").stdout.splitlines() == [
            "persistent://public/listed/parted-partition-0", "persistent://public/listed/parted-partition-1",
            "persistent://public/listed/parted-partition-2", "persistent://public/listed/single"]
        assert on(where, "topics", "list-partitioned-topics", "public/listed").stdout == (
            "persistent://public/listed/parted\n")
        assert json.loads(on(where, "topics", "get-partitioned-topic-metadata", "public/listed/parted").stdout) == {
            "partitions": 3}
        assert json.loads(on(where, "topics", "get-partitioned-topic-metadata",
                             "persistent://public/listed/single").stdout) == {"partitions": 0}
        assert "namespace public/nope does not exist" in on(where, "topics", "list", "public/nope", code=2).output
    status, listed = rest(server.http_url, "GET", "/admin/v2/persistent/public/listed")
    assert status == 200 and sorted(listed) == on(server.http_url, "topics", "list", "public/listed").stdout.split()
    status, partitioned = rest(server.http_url, "GET", "/admin/v2/persistent/public/listed/partitioned")
    assert partitioned == ["persistent://public/listed/parted"]


def test_namespaces_policies_is_the_rest_routes_document(server: Server, tmp_path: Path) -> None:
    on(tmp_path / "d", "topics", "create", "t")
    for where in both(server, tmp_path / "d"):
        on(where, "namespaces", "create", "public/policed")
        on(where, "namespaces", "set-retention", "public/policed", "-s", "1G", "-t", "1h")
        on(where, "namespaces", "set-backlog-quota", "public/policed", "-lt", "1h", "-p", "producer_exception",
           "-t", "message_age")
        on(where, "namespaces", "grant-permission", "public/policed", "--role", "app", "--actions", "consume")
        policies = json.loads(on(where, "namespaces", "policies", "public/policed").stdout)
        assert policies["retention_policies"] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024}
        assert policies["backlog_quota_map"] == {"message_age": {"limitSize": -1, "limitTime": 3600,
                                                                 "policy": "producer_exception"}}
        assert policies["auth_policies"]["namespace_auth"] == {"app": ["consume"]}
        if str(where).startswith("http"):
            assert policies == rest(server.http_url, "GET", "/admin/v2/namespaces/public/policed")[1]


# --- tokens -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, Path]]:
    """A server with token authentication and superuser `admin`: (it, a token of admin, a file holding it)."""
    from seglog.server.auth import create_secret_key, create_token

    directory = tmp_path_factory.mktemp("secured")
    key = create_secret_key()
    (directory / "secret.key").write_bytes(key)
    token = create_token(key, "admin")
    (directory / "admin.token").write_text(token + "\n")
    running = start_server(directory / "data", "--auth-token-secret-key", str(directory / "secret.key"),
                           "--superuser-roles", "admin")
    yield running, token, directory / "admin.token"
    running.stop()


def test_a_token_from_the_command_line_the_environment_or_a_file(secured: tuple[Server, str, Path]) -> None:
    server, token, token_file = secured
    for given, env in ((["--token", token], None), ([], {"SEGLOG_TOKEN": token}),
                       (["--auth-params", f"token:{token}"], None),
                       (["--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-params",
                         f"file://{token_file}"], None)):
        assert "public" in on(server.http_url, *given, "tenants", "list", env=env).stdout.split()


def test_without_a_token_one_line_says_how_to_give_one_and_exits_1(secured: tuple[Server, str, Path]) -> None:
    server, _, _ = secured
    for given in ([], ["--token", "garbage"]):
        result = on(server.http_url, *given, "tenants", "list", code=1)
        assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1
        assert "--token TOKEN" in result.stderr and "$SEGLOG_TOKEN" in result.stderr and "401" in result.stderr


@pytest.mark.parametrize(("given", "expected"), [
    (["--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationTls"], "Invalid value for '--auth-plugin'"),
    (["--auth-params", "tlsCertFile:x"], "expected token:TOKEN or file:///path/to/token"),
    (["--auth-params", "file:///nonexistent/token"], "cannot read the token file /nonexistent/token"),
    (["--token", "a", "--auth-params", "token:b"], "give --token or --auth-params, not both"),
])
def test_token_options_refuse_what_they_cannot_use(given: list[str], expected: str) -> None:
    result = on("http://127.0.0.1:9", *given, "tenants", "list", code=2)
    assert expected in one_line(result.output) and "Traceback" not in result.output
