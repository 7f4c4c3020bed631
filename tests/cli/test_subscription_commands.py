"""pulsar-admin's subscription commands under `seglog topics`: create-subscription, skip, reset-cursor, ..."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import floors, one_line, run


def test_subscription_commands_as_pulsar_admin_has_them(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t", "--partitions", "2")
    run(runner, data, "produce", "t", "--partition", "0", input="a\nb\nc\nd\n")
    run(runner, data, "produce", "t", "--partition", "1", input="x\ny\n")
    assert "Created subscription new on public/default/t" in run(
        runner, data, "topics", "create-subscription", "t", "-s", "new").output
    run(runner, data, "topics", "create-subscription", "t", "-s", "all", "--messageId", "earliest")
    run(runner, data, "topics", "create-subscription", "t", "--subscription", "placed", "-m", "0:1")
    assert run(runner, data, "topics", "subscriptions", "t").output == "all\nnew\nplaced\n"
    assert json.loads(run(runner, data, "topics", "subscriptions", "t", "--json").output) == ["all", "new", "placed"]
    assert (floors(data, "new"), floors(data, "all"), floors(data, "placed")) == ([4, 2], [0, 0], [1, 2])

    peeked = run(runner, data, "topics", "peek-messages", "t", "-s", "all", "-n", "2").stdout.splitlines()
    assert [json.loads(line)["value"] for line in peeked] == ["a", "b", "x", "y"]
    assert floors(data, "all") == [0, 0]  # nothing acknowledged
    assert "Skipped 4 messages of all" in run(runner, data, "topics", "skip", "t", "-s", "all", "-n", "2").output
    assert floors(data, "all") == [2, 2]  # a, b and x, y: two a partition
    assert run(runner, data, "topics", "peek-messages", "t", "-s", "all", "--format", "value").stdout == "c\n"

    result = run(runner, data, "topics", "reset-cursor", "t", "-s", "all", "--messageId", "0:1", "-m", "1:0")
    assert "Reset the cursor of all on public/default/t to partition 0 offset 1, partition 1 offset 0" in result.output
    assert floors(data, "all") == [1, 0]
    run(runner, data, "topics", "reset-cursor", "t", "-s", "all", "-m", "0:2", "--exclude-reset-position")
    assert floors(data, "all") == [3, 0]
    run(runner, data, "topics", "reset-cursor", "t", "-s", "all", "--time", "1h")  # all were written since
    assert floors(data, "all") == [0, 0]
    assert "Expired 0 messages" in run(runner, data, "topics", "expire-messages", "t", "-s", "all", "-t", "1h").output
    result = run(runner, data, "topics", "expire-messages", "t", "-s", "all", "--expireTime", "0")
    assert "Expired 6 messages of all" in result.output and floors(data, "all") == [4, 2]

    run(runner, data, "topics", "reset-cursor", "t", "-s", "new", "-m", "0:0")
    assert "Cleared the backlog of new" in run(runner, data, "topics", "clear-backlog", "t", "-s", "new").output
    assert floors(data, "new") == [4, 2]
    assert "Subscription new has no unacknowledged message" in run(
        runner, data, "topics", "peek-messages", "t", "-s", "new").stderr
    assert "Deleted subscription placed of public/default/t" in run(
        runner, data, "topics", "unsubscribe", "t", "-s", "placed").output
    assert run(runner, data, "topics", "subscriptions", "t").output == "all\nnew\n"


@pytest.mark.parametrize(("command", "expected"), [
    (["reset-cursor", "t", "-s", "s"], "give either --time or --messageId"),
    (["reset-cursor", "t", "-s", "s", "-t", "1h", "-m", "0:0"], "give either --time or --messageId"),
    (["reset-cursor", "t", "-s", "s", "-m", "zero"], "Invalid value for '--messageId' / '-m': 'zero' is not "
                                                     "PARTITION:OFFSET"),
    (["reset-cursor", "t", "-s", "s", "-t", "soon"], "Invalid value for '--time' / '-t'"),
    (["reset-cursor", "t", "-s", "s", "-t", "1h", "-e"], "--exclude-reset-position goes with --messageId"),
    (["reset-cursor", "t", "-s", "nope", "-t", "1h"], "subscription nope of public/default/t does not exist"),
    (["skip", "t", "-s", "s", "-n", "0"], "Invalid value for '--count' / '-n'"),
    (["skip", "t", "-s", "s"], "Missing option '--count' / '-n'"),
    (["expire-messages", "t", "-s", "s", "-t", "-5"], "Invalid value for '--expireTime' / '-t'"),
    (["create-subscription", "t", "-s", "x", "-m", "5:0"], "public/default/t has partitions 0 to 0"),
    (["create-subscription", "t", "-s", "x", "-m", "soon"], "'soon' is not PARTITION:OFFSET"),
    (["clear-backlog", "t", "-s", "nope"], "Invalid value for '--subscription' / '-s'"),
    (["peek-messages", "t"], "Missing option '--subscription' / '-s'"),
    (["unsubscribe", "t", "-s", "nope"], "subscription nope of public/default/t does not exist"),
])
def test_subscription_commands_refuse_bad_input_and_change_nothing(runner: CliRunner, data: Path,
                                                                   command: list[str], expected: str) -> None:
    run(runner, data, "topic", "create", "t")
    run(runner, data, "produce", "t", input="a\nb\n")
    run(runner, data, "topics", "create-subscription", "t", "-s", "s", "-m", "0:1")
    result = run(runner, data, "topics", *command, code=2)
    assert "Error: " in result.output and expected in one_line(result.output)
    assert "Traceback" not in result.output
    assert floors(data, "s") == [1]
    assert run(runner, data, "topics", "subscriptions", "t").output == "s\n"


def test_creating_an_existing_subscription_fails_and_changes_nothing(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    run(runner, data, "produce", "t", input="a\nb\n")
    run(runner, data, "topics", "create-subscription", "t", "-s", "s", "-m", "0:1")
    result = run(runner, data, "topics", "create-subscription", "t", "-s", "s", code=1)  # a runtime failure
    assert "subscription s of public/default/t already exists" in one_line(result.output)
    assert floors(data, "s") == [1]


def test_a_consumed_subscription_is_not_changed_or_deleted_even_with_force(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    run(runner, data, "produce", "t", input="a\nb\n")
    with seglog.open(data) as log, log.topic("t").subscribe("s", initial_position="earliest"):
        for command in (["unsubscribe", "t", "-s", "s"], ["unsubscribe", "t", "-s", "s", "-f"],
                        ["skip", "t", "-s", "s", "-n", "1"], ["reset-cursor", "t", "-s", "s", "-m", "0:1"]):
            result = run(runner, data, "topics", *command, code=1)
            assert "subscription s of public/default/t is consumed by another process" in one_line(result.output)
    assert floors(data, "s") == [0]
    run(runner, data, "topics", "unsubscribe", "t", "-s", "s")
    assert run(runner, data, "topics", "subscriptions", "t").output == ""

