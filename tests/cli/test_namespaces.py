"""`seglog namespaces`: create, list, delete, retention, backlog quotas, message TTL, clear-backlog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import make_data, one_line, run


def test_namespaces_create_list_delete(runner: CliRunner, data: Path) -> None:
    assert "Created namespace public/events" in run(runner, data, "namespaces", "create", "public/events").output
    run(runner, data, "tenants", "create", "acme")
    run(runner, data, "namespaces", "create", "acme/billing")
    run(runner, data, "namespaces", "create", "acme/ops")
    assert run(runner, data, "namespaces", "list").stdout == (
        "acme/billing\nacme/ops\npublic/default\npublic/events\n")
    assert run(runner, data, "namespaces", "list", "acme").stdout == "acme/billing\nacme/ops\n"
    with seglog.open(data) as log:
        every, of_acme = log.admin.namespaces.list(), log.admin.namespaces.list("acme")
    assert json.loads(run(runner, data, "namespaces", "list", "--json").output) == every
    assert json.loads(run(runner, data, "namespaces", "list", "acme", "--json").output) == of_acme

    assert "Deleted namespace acme/ops" in run(runner, data, "namespaces", "delete", "acme/ops").output
    with seglog.open(data) as log:
        assert log.admin.namespaces.list("acme") == ["acme/billing"]


def test_namespaces_refusals(runner: CliRunner, data: Path) -> None:
    message = one_line(run(runner, data, "namespaces", "create", "billing", code=2).output)
    assert "Error: Invalid value for 'TENANT/NAMESPACE': invalid namespace name 'billing'" in message
    assert "accepted: 'tenant/namespace'" in message
    message = one_line(run(runner, data, "namespaces", "create", "acme/billing", code=2).output)
    assert "Error: tenant acme does not exist; create it first" in message
    assert not data.exists()

    run(runner, data, "namespaces", "create", "public/ns")
    assert "Error: namespace public/ns already exists" in one_line(
        run(runner, data, "namespaces", "create", "public/ns", code=1).output)
    assert "Error: tenant acme does not exist; create it first" in one_line(
        run(runner, data, "namespaces", "create", "acme/billing", code=2).output)
    assert "Error: tenant acme does not exist" in run(runner, data, "namespaces", "list", "acme", code=2).output
    message = one_line(run(runner, data, "namespaces", "list", "no such", code=2).output)
    assert "Invalid value for '[TENANT]': invalid tenant name 'no such'" in message
    message = one_line(run(runner, data, "namespaces", "delete", "public/default", code=2).output)
    assert "Invalid value for 'TENANT/NAMESPACE'" in message and "a namespace other than 'public/default'" in message
    assert "Error: namespace public/nope does not exist" in run(
        runner, data, "namespaces", "delete", "public/nope", code=2).output
    run(runner, data, "topic", "create", "public/ns/t")
    message = one_line(run(runner, data, "namespaces", "delete", "public/ns", code=1).output)
    assert "Error: namespace public/ns still has topics: public/ns/t; delete them first" in message
    for command in (["get-retention"], ["set-retention", "--size", "1G", "--time", "1h"], ["get-backlog-quotas"],
                    ["set-message-ttl", "--messageTTL", "60"], ["get-message-ttl"], ["remove-message-ttl"],
                    ["remove-backlog-quota"], ["clear-backlog", "-f"]):
        result = run(runner, data, "namespaces", command[0], "public/nope", *command[1:], code=2)
        assert "Error: namespace public/nope does not exist" in result.output
        assert "Traceback" not in result.output
    assert run(runner, data, "namespaces", "list").stdout == "public/default\npublic/ns\n"


@pytest.mark.parametrize(("size", "time", "expected"), [
    ("10G", "3h", {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240}),
    ("10 MiB", "2d 10m", {"retentionTimeInMinutes": 2890, "retentionSizeInMB": 10}),
    ("1.5 GiB", "7 days", {"retentionTimeInMinutes": 10080, "retentionSizeInMB": 1536}),
    ("1T", "3600", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1 << 20}),
    ("2M", "-1", {"retentionTimeInMinutes": -1, "retentionSizeInMB": 2}),
    ("-1", "-1", {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}),
    ("0", "0", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}),
])
def test_namespace_retention(runner: CliRunner, data: Path, size: str, time: str, expected: dict) -> None:
    run(runner, data, "namespaces", "create", "public/ns")
    assert json.loads(run(runner, data, "namespaces", "get-retention", "public/ns").output) is None
    result = run(runner, data, "namespaces", "set-retention", "public/ns", "--size", size, "--time", time)
    assert "Set retention of public/ns: size " in result.output
    got = json.loads(run(runner, data, "namespaces", "get-retention", "public/ns").output)
    with seglog.open(data) as log:
        assert got == log.admin.namespaces.get_retention("public/ns") == expected
    run(runner, data, "namespaces", "set-retention", "public/ns", "-s", "-1", "-t", "-1")  # pulsar-admin's flags
    assert json.loads(run(runner, data, "namespaces", "get-retention", "public/ns").output) == {
        "retentionTimeInMinutes": -1, "retentionSizeInMB": -1}


def test_set_retention_shows_what_it_understood(runner: CliRunner, data: Path) -> None:
    make_data(data)
    result = run(runner, data, "namespaces", "set-retention", "public/default", "--size", "1.5G", "--time", "90m")
    assert "Set retention of public/default: size 1.5 GiB, time 1h 30m" in result.output
    result = run(runner, data, "namespaces", "set-retention", "public/default", "--size", "-1", "--time", "-1")
    assert "size infinite, time infinite" in result.output


BAD_RETENTION = [
    (["--size", "lots", "--time", "3h"], "'--size' / '-s'", "'2 Ki', '10 MiB', '1 GB', 10G, 1T"),
    (["--size", "-5", "--time", "3h"], "'--size' / '-s'", "or -1 for no limit"),
    (["--size", "1.5B", "--time", "3h"], "'--size' / '-s'", "not a whole number of bytes"),
    (["--size", "10G", "--time", "3 fortnights"], "'--time' / '-t'", "'1h', '2d 10s', '7 days'"),
    (["--size", "10G", "--time", "-2h"], "'--time' / '-t'", "seconds as an int, or a duration"),
    (["--size", "0", "--time", "3h"], "'--size' / '-s'", "invalid retention size '0': a limit of 0 with the other "
                                                         "limit set (time 3h) is refused"),
    (["--size", "10", "--time", "1h"], "'--size' / '-s'", "10 B is not a whole number of MB"),
    (["--size", "10G", "--time", "10"], "'--time' / '-t'", "10s is not a whole number of minutes"),
    (["--size", "10G"], "", "Missing option '--time' / '-t'"),
    (["--time", "3h"], "", "Missing option '--size' / '-s'"),
]


@pytest.mark.parametrize(("options", "named", "accepted"), BAD_RETENTION)
def test_set_retention_refuses_bad_values_and_changes_nothing(runner: CliRunner, data: Path, options: list[str],
                                                              named: str, accepted: str) -> None:
    make_data(data)
    run(runner, data, "namespaces", "set-retention", "public/default", "--size", "1G", "--time", "1d")
    before = run(runner, data, "namespaces", "get-retention", "public/default").output
    message = one_line(run(runner, data, "namespaces", "set-retention", "public/default", *options, code=2).output)
    if named:
        assert f"Error: Invalid value for {named}: " in message
    assert accepted in message and "Traceback" not in message
    assert run(runner, data, "namespaces", "get-retention", "public/default").output == before
    with seglog.open(data) as log:
        assert log.admin.namespaces.get_retention("public/default") == {
            "retentionTimeInMinutes": 1440, "retentionSizeInMB": 1024}


def test_namespace_backlog_quotas(runner: CliRunner, data: Path) -> None:
    run(runner, data, "namespaces", "create", "public/ns")
    assert json.loads(run(runner, data, "namespaces", "get-backlog-quotas", "public/ns").output) == {}
    result = run(runner, data, "namespaces", "set-backlog-quota", "public/ns", "--limit", "2G", "--policy",
                 "producer_request_hold")
    assert "Set backlog quota destination_storage of public/ns: limit 2 GiB, policy producer_request_hold" in (
        result.output)
    result = run(runner, data, "namespaces", "set-backlog-quota", "public/ns", "-lt", "3600", "-p",
                 "consumer_backlog_eviction", "-t", "message_age")
    assert "Set backlog quota message_age of public/ns: limit 1h, policy consumer_backlog_eviction" in result.output
    expected = {"destination_storage": {"limit": 2147483648, "policy": "producer_request_hold"},
                "message_age": {"limitTime": 3600, "policy": "consumer_backlog_eviction"}}
    got = json.loads(run(runner, data, "namespaces", "get-backlog-quotas", "public/ns").output)
    with seglog.open(data) as log:
        assert got == log.admin.namespaces.get_backlog_quotas("public/ns") == expected

    run(runner, data, "namespaces", "set-backlog-quota", "public/ns", "--limitTime", "2d 1s", "--policy",
        "producer_exception", "--type", "message_age")
    run(runner, data, "namespaces", "set-backlog-quota", "public/ns", "--limit", "1 GB", "--policy",
        "producer_exception", "--type", "destination_storage")
    with seglog.open(data) as log:
        assert log.admin.namespaces.get_backlog_quotas("public/ns") == {
            "destination_storage": {"limit": 10**9, "policy": "producer_exception"},
            "message_age": {"limitTime": 172_801, "policy": "producer_exception"}}

    result = run(runner, data, "namespaces", "remove-backlog-quota", "public/ns", "--type", "message_age")
    assert "Removed backlog quota message_age of public/ns" in result.output
    assert list(json.loads(run(runner, data, "namespaces", "get-backlog-quotas", "public/ns").output)) == [
        "destination_storage"]
    run(runner, data, "namespaces", "remove-backlog-quota", "public/ns")  # destination_storage, as pulsar-admin
    assert json.loads(run(runner, data, "namespaces", "get-backlog-quotas", "public/ns").output) == {}
    with seglog.open(data) as log:
        assert log.admin.namespaces.get_backlog_quotas("public/ns") == {}


BAD_BACKLOG_QUOTA = [
    (["--limit", "2G", "--policy", "drop"], "'--policy' / '-p'",
     "'producer_request_hold', 'producer_exception', 'consumer_backlog_eviction'"),
    (["--limit", "2G", "--policy", "producer_exception", "--type", "size"], "'--type' / '-t'",
     "'destination_storage' or 'message_age'"),
    (["--limit", "lots", "--policy", "producer_exception"], "'--limit' / '-l'", "'2 Ki', '10 MiB', '1 GB', 10G"),
    (["--limit", "0", "--policy", "producer_exception"], "'--limit' / '-l'", "a limit greater than 0"),
    (["--limit", "-1", "--policy", "producer_exception"], "'--limit' / '-l'", "-1 (no limit) is not accepted"),
    (["--limitTime", "soon", "--policy", "producer_exception", "--type", "message_age"], "'--limitTime' / '-lt'",
     "seconds as an int, or a duration such as '1h'"),
    (["--limitTime", "0", "--policy", "producer_exception", "--type", "message_age"], "'--limitTime' / '-lt'",
     "a limit greater than 0"),
    (["--limitTime", "1h", "--policy", "producer_exception"], "'--limitTime' / '-lt'",
     "--type destination_storage takes --limit"),
    (["--limit", "2G", "--policy", "producer_exception", "--type", "message_age"], "'--limit' / '-l'",
     "--type message_age takes --limitTime"),
    (["--policy", "producer_exception", "--type", "message_age"], "", "Missing option '--limitTime' / '-lt'"),
    (["--policy", "producer_exception"], "", "Missing option '--limit' / '-l'"),
    (["--limit", "2G"], "", "Missing option '--policy' / '-p'"),
]


@pytest.mark.parametrize(("options", "named", "accepted"), BAD_BACKLOG_QUOTA)
def test_set_backlog_quota_refuses_bad_values_and_changes_nothing(runner: CliRunner, data: Path,
                                                                  options: list[str], named: str,
                                                                  accepted: str) -> None:
    make_data(data)
    run(runner, data, "namespaces", "set-backlog-quota", "public/default", "-l", "5G", "-p", "producer_exception")
    before = run(runner, data, "namespaces", "get-backlog-quotas", "public/default").output
    message = one_line(run(runner, data, "namespaces", "set-backlog-quota", "public/default", *options,
                           code=2).output)
    if named:
        assert f"Error: Invalid value for {named}: " in message
    assert accepted in message and "Traceback" not in message
    assert run(runner, data, "namespaces", "get-backlog-quotas", "public/default").output == before
    with seglog.open(data) as log:
        assert log.admin.namespaces.get_backlog_quotas("public/default") == {
            "destination_storage": {"limit": 5 << 30, "policy": "producer_exception"}}


def test_remove_backlog_quota_refuses_a_bad_type(runner: CliRunner, data: Path) -> None:
    make_data(data)
    run(runner, data, "namespaces", "set-backlog-quota", "public/default", "-l", "5G", "-p", "producer_exception")
    message = one_line(run(runner, data, "namespaces", "remove-backlog-quota", "public/default", "--type", "all",
                           code=2).output)
    assert "Error: Invalid value for '--type' / '-t': invalid type 'all'" in message
    assert "'destination_storage' or 'message_age'" in message
    with seglog.open(data) as log:
        assert list(log.admin.namespaces.get_backlog_quotas("public/default")) == ["destination_storage"]


@pytest.mark.parametrize(("given", "seconds", "shown"), [
    ("120", 120, "2m"), ("2h", 7200, "2h"), ("1d 1h", 90_000, "1day 1h"), ("7 days", 604_800, "7days"),
    ("0", 0, "off (0: messages are never expired)"),
])
def test_namespace_message_ttl(runner: CliRunner, data: Path, given: str, seconds: int, shown: str) -> None:
    make_data(data)
    assert json.loads(run(runner, data, "namespaces", "get-message-ttl", "public/default").output) is None
    result = run(runner, data, "namespaces", "set-message-ttl", "public/default", "--messageTTL", given)
    assert f"Set message TTL of public/default: {shown}" in result.output
    assert json.loads(run(runner, data, "namespaces", "get-message-ttl", "public/default").stdout) == seconds
    with seglog.open(data) as log:
        assert log.admin.namespaces.get_message_ttl("public/default") == seconds
    run(runner, data, "namespaces", "set-message-ttl", "public/default", "-ttl", "60")  # pulsar-admin's flag
    assert run(runner, data, "namespaces", "get-message-ttl", "public/default").output == "60\n"
    result = run(runner, data, "namespaces", "remove-message-ttl", "public/default")
    assert "Removed message TTL of public/default" in result.output
    assert run(runner, data, "namespaces", "get-message-ttl", "public/default").output == "null\n"
    with seglog.open(data) as log:
        assert log.admin.namespaces.get_message_ttl("public/default") is None


def test_a_message_ttl_of_0_says_the_ttl_is_off(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    for level, name in (("namespaces", "public/default"), ("topics", "t")):
        assert "off" in run(runner, data, level, "set-message-ttl", name, "--messageTTL", "0").output
        result = run(runner, data, level, "get-message-ttl", name)
        assert json.loads(result.stdout) == 0  # pulsar-admin's JSON, for scripts
        assert "0: the message TTL is off" in result.stderr
        run(runner, data, level, "set-message-ttl", name, "--messageTTL", "60")
        assert run(runner, data, level, "get-message-ttl", name).stderr == ""


@pytest.mark.parametrize(("value", "detail"), [("soon", "expected a number"), ("-1", "-1 (no limit) is not accepted"),
                                               ("5 fortnights", "unknown unit 'fortnights'"), ("", "it is empty")])
def test_set_message_ttl_refuses_bad_values_and_changes_nothing(runner: CliRunner, data: Path, value: str,
                                                                detail: str) -> None:
    make_data(data)
    run(runner, data, "namespaces", "set-message-ttl", "public/default", "--messageTTL", "1h")
    message = one_line(run(runner, data, "namespaces", "set-message-ttl", "public/default", "--messageTTL", value,
                           code=2).output)
    assert "Error: Invalid value for '--messageTTL' / '-ttl': invalid message TTL" in message
    assert detail in message and "accepted: seconds as an int, or a duration such as '1h', '2d 10s'" in message
    with seglog.open(data) as log:
        assert log.admin.namespaces.get_message_ttl("public/default") == 3600


CLEAR_PROMPT = "Are you sure you want to clear the backlog? [y/N]: "


def test_clear_backlog_asks_first(runner: CliRunner, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(runner, data, "namespaces", "create", "public/ns")
    cleared = []
    monkeypatch.setattr(seglog.admin.api.Namespaces, "clear_backlog",
                        lambda self, name, subscription=None: cleared.append((name, subscription)))
    for answer in ("n\n", "\n", ""):  # no, the default (no), and no answer at all (stdin closed)
        result = run(runner, data, "namespaces", "clear-backlog", "public/ns", input=answer, code=1)
        assert result.stdout.startswith(CLEAR_PROMPT) and "Cleared" not in result.stdout
        assert result.stderr.strip() == "Aborted!"
    assert cleared == []

    result = run(runner, data, "namespaces", "clear-backlog", "public/ns", input="y\n")
    assert result.stdout.startswith(CLEAR_PROMPT)
    assert "Cleared the backlog of every subscription on the topics of public/ns" in result.output
    result = run(runner, data, "namespaces", "clear-backlog", "public/ns", "-f", "-s", "audit")
    assert CLEAR_PROMPT not in result.output
    assert "Cleared the backlog of subscription audit on the topics of public/ns" in result.output
    run(runner, data, "namespaces", "clear-backlog", "public/ns", "--force", "--sub", "audit")
    assert cleared == [("public/ns", None), ("public/ns", "audit"), ("public/ns", "audit")]

    result = run(runner, data, "namespaces", "clear-backlog", "public/nope", input="y\n", code=2)
    assert CLEAR_PROMPT not in result.output and "Error: namespace public/nope does not exist" in result.output
    assert len(cleared) == 3


def test_clear_backlog_of_a_namespace_without_topics(runner: CliRunner, data: Path) -> None:
    run(runner, data, "namespaces", "create", "public/empty")
    result = run(runner, data, "namespaces", "clear-backlog", "public/empty", input="n\n", code=1)
    assert "Aborted!" in result.output
    assert "Cleared the backlog" in run(runner, data, "namespaces", "clear-backlog", "public/empty", "-f").output
    assert "Cleared the backlog" in run(runner, data, "namespaces", "clear-backlog", "public/empty",
                                        input="y\n").output


def test_clear_backlog_of_a_namespace_with_a_subscribed_topic(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    with seglog.open(data) as log:
        topic = log.topic("t")
        topic.subscribe("s", initial_position="earliest").close()
        with topic.producer() as producer:
            producer.send_batch([b"x"] * 3)
    run(runner, data, "namespaces", "clear-backlog", "public/default", "-f")
    stats = json.loads(run(runner, data, "topics", "stats", "t").output)
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0

