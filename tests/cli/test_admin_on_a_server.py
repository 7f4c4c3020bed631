"""Admin commands with `--url` on a `seglog serve` (tests/server/helpers_server.py, free loopback ports): what
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
