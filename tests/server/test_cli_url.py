"""`seglog --url http://HOST:PORT`: every admin command on a server answers as it does on a data directory.

Two copies of one data directory: the CLI runs each command with --data on the first, and with --url on a
`seglog serve` of the second, in the same order, and the outputs and exit codes must be the same (values
that depend on the moment, such as ages, are left out of the comparison)."""

from __future__ import annotations

import json
import re
import shutil

import click
import pytest
from click.testing import CliRunner

import seglog
from helpers_server import start_server
from seglog.cli import main
from seglog.cli.base import AdminCommand

# (arguments, input) in the order they run; each mutating one runs on both copies
STEPS: list[tuple[str, ...]] = [
    ("tenants", "list"), ("tenants", "list", "--json"), ("tenants", "get", "public"),
    ("tenants", "create", "geo", "-c", "standalone"), ("tenants", "get", "geo"),
    ("tenants", "create", "acme"), ("tenants", "create", "b d"),
    ("namespaces", "list"), ("namespaces", "list", "acme", "--json"), ("namespaces", "list", "nope"),
    ("namespaces", "create", "acme/more"), ("namespaces", "create", "acme/ns"), ("namespaces", "create", "nope/ns"),
    ("tenants", "create", "ops", "-r", "ops-admin"), ("tenants", "get", "ops"),
    ("tenants", "update", "ops", "-r", "a,b"), ("tenants", "update", "ops", "-c", "standalone"),
    ("tenants", "update", "ops", "-r", ""), ("tenants", "get", "ops"), ("tenants", "update", "ops"),
    ("tenants", "update", "nope", "-r", "x"),
    # geo-replication: clusters, a tenant's allowed clusters, a namespace's clusters and allowed clusters
    ("clusters", "list"), ("clusters", "list", "--json"), ("clusters", "get", "standalone"),
    # (the remote clusters' ports are closed: the served copy's replicators, started as policies name them, fail
    # at once and retry, and the outputs compared never depend on them)
    ("clusters", "create", "east", "--url", "http://127.0.0.1:9", "--broker-url", "pulsar://127.0.0.1:9"),
    ("clusters", "create", "west", "--url", "http://127.0.0.1:9", "--broker-url", "pulsar://127.0.0.1:9",
     "--auth-plugin", "token", "--auth-parameters", "file:/etc/seglog/west.token"),
    ("clusters", "create", "north", "--url-secure", "https://127.0.0.1:9", "--broker-url-secure",
     "pulsar+ssl://127.0.0.1:9"),
    ("clusters", "create", "bare"), ("clusters", "create", "east"), ("clusters", "create", "b d"),
    ("clusters", "create", "bad", "--url", "pulsar://bad:6650"),
    ("clusters", "create", "bad", "--auth-parameters", "token:abc"),
    ("clusters", "create", "bad", "--auth-plugin", "basic", "--auth-parameters", "user:pass"),
    ("clusters", "update", "bare", "--broker-url", "pulsar://127.0.0.1:9"), ("clusters", "get", "bare"),
    ("clusters", "update", "bare"), ("clusters", "update", "nope", "--url", "http://nope:8080"),
    ("clusters", "get", "west"), ("clusters", "get", "nope"), ("clusters", "list"),
    ("namespaces", "create", "geo/local"), ("namespaces", "get-clusters", "geo/local"),
    ("namespaces", "get-allowed-clusters", "geo/local"),
    ("tenants", "update", "geo", "-c", "standalone,east,west,bare,north"),
    ("namespaces", "create", "geo/ns", "--clusters", "standalone,east", "--allowed-clusters", "standalone,east,west"),
    ("namespaces", "create", "geo/bad", "--clusters", "standalone,bare"),
    ("namespaces", "create", "geo/bad", "--clusters", "west", "--allowed-clusters", "east"),
    ("namespaces", "create", "ops/ns", "--clusters", "east"),
    ("namespaces", "set-clusters", "geo/ns", "-c", "standalone,west"),
    ("namespaces", "set-clusters", "geo/ns", "-c", "nope"), ("namespaces", "set-clusters", "geo/ns", "-c", ""),
    ("namespaces", "set-clusters", "geo/ns", "-c", "north"),
    ("namespaces", "set-allowed-clusters", "geo/ns", "-c", "standalone"),
    ("namespaces", "set-allowed-clusters", "geo/ns", "-c", "standalone,east,west"),
    ("namespaces", "get-clusters", "geo/ns"), ("namespaces", "get-allowed-clusters", "geo/ns"),
    ("namespaces", "get-clusters", "geo/nope"), ("namespaces", "get-allowed-clusters", "geo/nope"),
    ("tenants", "update", "geo", "-c", "standalone,east"), ("clusters", "delete", "west"),
    ("clusters", "delete", "standalone"),
    ("topic", "create", "geo/ns/events"),
    ("topics", "set-replication-clusters", "geo/ns/events", "-c", "standalone,east"),
    ("topics", "set-replication-clusters", "geo/ns/events", "-c", "east"),
    ("topics", "set-replication-clusters", "geo/ns/events", "-c", "east", "--global"),
    ("topics", "set-replication-clusters", "geo/ns/events", "-c", "north", "-g"),
    ("topics", "set-replication-clusters", "geo/ns/events", "-c", "bare", "-g"),
    ("topics", "get-replication-clusters", "geo/ns/events"),
    ("topics", "get-replication-clusters", "geo/ns/events", "--global"),
    ("topics", "get-replication-clusters", "geo/ns/events", "--applied"),
    ("clusters", "delete", "east"),
    ("topics", "remove-replication-clusters", "geo/ns/events"),
    ("topics", "get-replication-clusters", "geo/ns/events", "--applied"),
    ("topics", "remove-replication-clusters", "geo/ns/events", "-g"),
    ("topics", "get-replication-clusters", "geo/ns/events", "-g"),
    ("topics", "get-replication-clusters", "geo/ns/events", "--applied"),
    ("topics", "get-replication-clusters", "geo/ns/nope"),
    # forced: on the server, the replication cursor toward west is the topic's subscription
    ("topic", "delete", "geo/ns/events", "--force"), ("namespaces", "delete", "geo/ns"),
    ("namespaces", "delete", "geo/local"),
    ("namespaces", "grant-permission", "acme/ns", "--role", "app", "--actions", "consume,produce"),
    ("namespaces", "grant-permission", "acme/ns", "--role", "reader", "--actions", "consume"),
    ("namespaces", "grant-permission", "acme/ns", "--role", "app", "--actions", "functions"),
    ("namespaces", "grant-permission", "acme/nope", "--role", "app", "--actions", "produce"),
    ("namespaces", "permissions", "acme/ns"), ("namespaces", "permissions", "acme/nope"),
    ("namespaces", "revoke-permission", "acme/ns", "--role", "app"),
    ("namespaces", "revoke-permission", "acme/ns", "--role", "app"), ("namespaces", "permissions", "acme/ns"),
    ("namespaces", "set-retention", "acme/ns", "--size", "10G", "--time", "3h"),
    ("namespaces", "set-retention", "acme/ns", "--size", "0", "--time", "3h"),
    ("namespaces", "get-retention", "acme/ns"), ("namespaces", "remove-retention", "acme/more"),
    ("namespaces", "set-message-ttl", "acme/ns", "--messageTTL", "2h"), ("namespaces", "get-message-ttl", "acme/ns"),
    ("namespaces", "set-backlog-quota", "acme/ns", "--limit", "2G", "--policy", "producer_exception"),
    ("namespaces", "set-backlog-quota", "acme/ns", "-lt", "1h", "-p", "consumer_backlog_eviction", "-t",
     "message_age"),
    ("namespaces", "get-backlog-quotas", "acme/ns"),
    ("namespaces", "remove-backlog-quota", "acme/ns", "-t", "message_age"),
    ("namespaces", "remove-message-ttl", "acme/ns"), ("namespaces", "get-message-ttl", "acme/ns"),
    ("namespaces", "set-deduplication", "acme/ns", "--enable"), ("namespaces", "get-deduplication", "acme/ns"),
    ("namespaces", "remove-deduplication", "acme/ns"), ("namespaces", "get-deduplication", "acme/ns"),
    ("namespaces", "set-compaction-threshold", "acme/ns", "--threshold", "10M"),
    ("namespaces", "get-compaction-threshold", "acme/ns"),
    ("namespaces", "set-compaction-threshold", "acme/ns", "-t", "-1"),
    ("namespaces", "remove-compaction-threshold", "acme/ns"), ("namespaces", "get-compaction-threshold", "acme/ns"),
    ("namespaces", "get-auto-topic-creation", "acme/ns"),
    ("namespaces", "set-auto-topic-creation", "acme/ns", "--enable", "--type", "partitioned", "-n", "3"),
    ("namespaces", "get-auto-topic-creation", "acme/ns"),
    ("namespaces", "set-auto-topic-creation", "acme/ns", "-e", "-t", "partitioned"),
    ("namespaces", "set-auto-topic-creation", "acme/ns"), ("namespaces", "get-auto-topic-creation", "acme/ns"),
    ("namespaces", "remove-auto-topic-creation", "acme/ns"), ("namespaces", "get-auto-topic-creation", "acme/ns"),
    ("namespaces", "get-retention", "acme/nope"),
    ("topic", "create", "acme/ns/new", "-p", "3", "--segment-size", "1 MiB"),
    ("topic", "create", "acme/ns/new"), ("topic", "create", "acme/ns/b$d"),
    ("topic", "list"), ("topic", "list", "--json"),
    ("topic", "describe", "acme/ns/orders"), ("topic", "describe", "acme/ns/orders", "--json"),
    ("topic", "describe", "nope"),
    ("topic", "update", "acme/ns/new", "--retention-time", "2d"), ("topic", "update", "acme/ns/new", "--fsync", "x"),
    ("topic", "update-partitioned-topic", "acme/ns/new", "-p", "4"),
    ("topic", "update-partitioned-topic", "acme/ns/new", "-p", "2"),
    ("topics", "set-retention", "acme/ns/orders", "--size", "1G", "--time", "1h"),
    ("topics", "get-retention", "acme/ns/orders"), ("topics", "remove-retention", "acme/ns/orders"),
    ("topics", "set-message-ttl", "acme/ns/orders", "--messageTTL", "600"),
    ("topics", "get-message-ttl", "acme/ns/orders"), ("topics", "remove-message-ttl", "acme/ns/orders"),
    ("topics", "set-deduplication", "acme/ns/orders", "-d"), ("topics", "get-deduplication", "acme/ns/orders"),
    ("topics", "remove-deduplication", "acme/ns/orders"),
    ("topics", "set-compaction-threshold", "acme/ns/orders", "-t", "0"),
    ("topics", "get-compaction-threshold", "acme/ns/orders"),
    ("topics", "set-compaction-threshold", "acme/ns/orders", "-t", "1.5"),
    ("topics", "remove-compaction-threshold", "acme/ns/orders"),
    ("topic", "update", "acme/ns/new", "--cleanup-policy", "compact,delete", "--min-compaction-lag", "1h"),
    ("topic", "update", "acme/ns/new", "--min-cleanable-dirty-ratio", "2"),
    ("topics", "set-backlog-quota", "acme/ns/orders", "-l", "1M", "-p", "producer_request_hold"),
    ("topics", "get-backlog-quotas", "acme/ns/orders"),
    ("topics", "remove-backlog-quota", "acme/ns/orders"),
    ("topics", "subscriptions", "acme/ns/orders"), ("topics", "subscriptions", "events", "--json"),
    ("topics", "create-subscription", "acme/ns/orders", "-s", "fresh", "-m", "earliest"),
    ("topics", "create-subscription", "acme/ns/orders", "-s", "mid", "-m", "0:4"),
    ("topics", "create-subscription", "acme/ns/orders", "-s", "late"),
    ("topics", "create-subscription", "acme/ns/orders", "-s", "fresh"),
    ("topics", "skip", "acme/ns/orders", "-s", "fresh", "-n", "2"),
    ("topics", "skip", "acme/ns/orders", "-s", "nope", "-n", "2"),
    ("topics", "peek-messages", "acme/ns/orders", "-s", "fresh", "-n", "3"),
    ("topics", "peek-messages", "events", "-s", "all", "-n", "2", "--format", "json"),
    ("topics", "peek-messages", "acme/ns/orders", "-s", "late"),
    ("topics", "reset-cursor", "acme/ns/orders", "-s", "fresh", "-m", "0:1"),
    ("topics", "reset-cursor", "events", "-s", "all", "-m", "1:2", "-e"),
    ("topics", "reset-cursor", "acme/ns/orders", "-s", "late", "-t", "1h"),
    ("topics", "expire-messages", "acme/ns/orders", "-s", "mid", "-t", "3600"),
    ("topics", "expire-messages", "acme/ns/orders", "-s", "mid", "-t", "0"),
    ("topics", "clear-backlog", "acme/ns/orders", "-s", "fresh"),
    # replicated subscriptions: a topic's, one partition's, refusals
    ("topics", "get-replicated-subscription-status", "events", "-s", "all"),
    ("topics", "set-replicated-subscription-status", "events", "-s", "all", "--enable", "-p", "1"),
    ("topics", "get-replicated-subscription-status", "events", "-s", "all"),
    ("topics", "get-replicated-subscription-status", "events", "-s", "all", "--partition", "1"),
    ("topics", "set-replicated-subscription-status", "acme/ns/orders", "-s", "fresh", "-e"),
    ("topics", "get-replicated-subscription-status", "acme/ns/orders", "-s", "fresh"),
    ("topics", "set-replicated-subscription-status", "acme/ns/orders", "-s", "fresh"),
    ("topics", "set-replicated-subscription-status", "acme/ns/orders", "-s", "nope", "-d"),
    ("topics", "get-replicated-subscription-status", "acme/ns/nope", "-s", "fresh"),
    ("topics", "stats", "acme/ns/orders"), ("topics", "stats", "events"), ("topics", "internal-stats", "events"),
    ("topics", "partitioned-stats", "events"), ("topics", "partitioned-stats", "events", "--per-partition"),
    ("topics", "partitioned-stats", "acme/ns/orders"), ("topics", "partitioned-stats", "nope"),
    ("topics", "stats-internal", "acme/ns/orders"), ("topics", "explain", "events", "--json"),
    # (the status is each process's: compared before any compaction, where both say it has not run)
    ("topics", "compaction-status", "events"), ("topics", "compact", "events", "--json"),
    ("topics", "compact", "nope"), ("topics", "compaction-status", "nope"),
    ("topics", "unsubscribe", "acme/ns/orders", "-s", "late"),
    ("topics", "unsubscribe", "acme/ns/orders", "-s", "late"),
    ("namespaces", "clear-backlog", "acme/ns", "-f"), ("namespaces", "clear-backlog", "acme/nope", "-f"),
    ("topics", "stats", "acme/ns/orders"),
    ("namespaces", "policies", "acme/ns"), ("namespaces", "policies", "acme/nope"),
    ("topics", "create-partitioned-topic", "acme/ns/parted", "-p", "2"),
    ("topics", "list", "acme/ns"), ("topics", "list", "acme/nope"),
    ("topics", "list-partitioned-topics", "acme/ns"),
    ("topics", "get-partitioned-topic-metadata", "acme/ns/parted"),
    ("topics", "get-partitioned-topic-metadata", "events"),
    ("topics", "delete", "acme/ns/parted"),
    ("topic", "delete", "acme/ns/new"), ("topic", "delete", "acme/ns/new"),
    ("namespaces", "delete", "acme/ns"), ("namespaces", "delete", "acme/more"),
    ("tenants", "delete", "acme"), ("tenants", "delete", "geo"), ("tenants", "delete", "ops"),
    ("tenants", "delete", "public"),
    ("clusters", "delete", "west"), ("clusters", "delete", "west"), ("clusters", "list"),
    ("maintenance",), ("metrics",),
]
# what depends on the moment a command runs, or on the server's background work (a spare segment made ahead)
_MOMENT = {"oldestUnackedMessageAgeSeconds", "oldestBacklogMessageAgeSeconds", "timeSeconds", "nowMs",
           "deletedAtMs", "spareSegmentReady", "physicalStorageSize", "durationMs"}


def _normalized(output: str) -> str:
    try:
        document = json.loads(output)
    except ValueError:
        return re.sub(r"^(\w*(_age_|physical)\w*\{[^}]*\}) .*$", r"\1", output, flags=re.M)
    return json.dumps(_drop(document), indent=2)


def _drop(value):
    if isinstance(value, dict):
        return {k: "<moment>" if k in _MOMENT else _drop(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_drop(v) for v in value]
    return value


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(the local data directory, the server of its copy)."""
    root = tmp_path_factory.mktemp("url")
    local = root / "local"
    with seglog.open(local) as log:
        log.admin.tenants.create("acme")
        log.admin.namespaces.create("acme/ns")
        orders = log.create_topic("acme/ns/orders")
        events = log.create_topic("events", partitions=2)
        events.subscribe("all", initial_position="earliest").close()
        with orders.producer() as producer:
            for i in range(10):
                producer.send(f"order-{i}".encode(), key=f"k{i % 3}".encode(), properties={"n": str(i)},
                              timestamp=1_700_000_000_000 + i)
        with events.producer() as producer:
            for i in range(8):
                producer.send(f"event-{i}".encode(), key=str(i).encode(), timestamp=1_700_000_000_000 + i)
    with seglog.open(local) as log:  # the fixture's own tenant and namespace are made by the steps
        log.delete_topic("acme/ns/orders")
        log.admin.namespaces.delete("acme/ns")
        log.admin.tenants.delete("acme")
    start_server(local).stop()  # both copies are cluster standalone, registered with the same URLs
    shutil.copytree(local, root / "served")
    server = start_server(root / "served")
    yield local, server
    server.stop()


def _run(*args: str):
    runner = CliRunner(env={"SEGLOG_DATA": None, "SEGLOG_URL": None, "COLUMNS": "200", "NO_COLOR": "1"})
    return runner.invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("step", STEPS, ids=" ".join)
def test_each_admin_command_answers_the_same_on_a_server(both, step):
    local, server = both
    on_data = _run("--data", str(local), *step)
    on_url = _run("--url", server.http_url, *step)
    assert on_url.exit_code == on_data.exit_code, (on_data.output, on_url.output)
    assert _normalized(on_url.output) == _normalized(on_data.output)


def _admin_leaves(command: click.Command = main, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if isinstance(command, click.Group):
        return {leaf for name, sub in command.commands.items() for leaf in _admin_leaves(sub, (*path, name))}
    return {path} if isinstance(command, AdminCommand) else set()


def test_every_admin_command_is_compared():
    groups = {"topic": "topics"}  # one group under two names: `topic` is a hidden alias
    compared = {(groups.get(step[0], step[0]), *step[1:2])
                if step[0] in ("clusters", "tenants", "namespaces", "topic", "topics")
                else step[:1] for step in STEPS}
    missing = {(groups.get(leaf[0], leaf[0]), *leaf[1:]) for leaf in _admin_leaves()} - compared
    # the schema commands are compared in tests/cli/test_schemas_cli.py (their steps need schema files), which
    # checks that its steps run every one of them
    missing = {leaf for leaf in missing if leaf[0] != "schemas" and "-schema" not in leaf[-1]}
    assert not missing, f"admin commands never run with --url here: {sorted(missing)}"


@pytest.mark.parametrize("command", [("produce", "t"), ("consume", "t"), ("check",), ("repair",), ("demo",),
                                     ("bench",), ("serve", "--cluster", "c")])
def test_commands_that_are_not_admin_say_they_need_data(command):
    result = _run("--url", "http://127.0.0.1:9", *command)
    assert result.exit_code == 2
    assert f"`seglog {command[0]}` works on a data directory, not on a server: give --data DIR instead of --url " \
           "http://127.0.0.1:9" in result.output


def test_data_and_url_together_name_both(tmp_path):
    for args in (("--data", str(tmp_path), "--url", "http://127.0.0.1:9", "tenants", "list"),
                 ("--url", "http://127.0.0.1:9", "tenants", "list", "--data", str(tmp_path))):
        result = _run(*args)
        assert result.exit_code == 2
        assert f"give --data or --url, not both: --data {tmp_path} and --url http://127.0.0.1:9" in result.output


def test_seglog_url_from_the_environment_and_the_command_line_over_it(both, tmp_path):
    local, server = both
    runner = CliRunner(env={"SEGLOG_DATA": None, "SEGLOG_URL": server.http_url})
    assert runner.invoke(main, ["tenants", "list", "--json"]).output == _run("--data", str(local), "tenants", "list",
                                                                           "--json").output
    named = runner.invoke(main, ["--data", str(tmp_path / "none"), "tenants", "list"])  # --data given wins
    assert named.exit_code == 2 and "no seglog data directory" in named.output
    both_env = CliRunner(env={"SEGLOG_DATA": str(local), "SEGLOG_URL": server.http_url}).invoke(
        main, ["tenants", "list"])
    assert both_env.exit_code == 2 and "($SEGLOG_DATA and $SEGLOG_URL)" in both_env.output


def test_a_server_that_does_not_answer_is_one_line():
    result = _run("--url", "http://127.0.0.1:9", "tenants", "list")
    assert result.exit_code == 1
    assert result.output.startswith("Error: cannot reach the seglog server at http://127.0.0.1:9")
    bad = _run("--url", "127.0.0.1:9", "tenants", "list")
    assert bad.exit_code == 2 and "the server's HTTP URL, http://HOST:PORT" in bad.output


def test_serve_refuses_an_invalid_cluster_name_before_anything(tmp_path):
    result = _run("--data", str(tmp_path / "d"), "serve", "--cluster", "a b", "--port", "0", "--http-port", "0",
                  "--flight-port", "0")
    assert result.exit_code == 2
    assert "Invalid value for '--cluster': invalid cluster name 'a b'" in result.output
    assert not (tmp_path / "d").exists()
