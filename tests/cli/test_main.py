"""The `seglog` group itself: --version, help, --data and SEGLOG_DATA, usage errors and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import run
from seglog.cli import main


def test_version(runner: CliRunner) -> None:
    result = run(runner, None, "--version")
    assert result.output.strip() == f"seglog {seglog.__version__}"


def all_commands(command: click.Command = main, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += all_commands(sub, path + (name,))
    return found


def test_the_commands() -> None:
    policy_commands = ["get-backlog-quotas", "get-deduplication", "get-message-ttl", "get-retention",
                       "remove-backlog-quota", "remove-deduplication", "remove-message-ttl", "remove-retention",
                       "set-backlog-quota", "set-deduplication", "set-message-ttl", "set-retention",
                       "get-compaction-threshold", "remove-compaction-threshold", "set-compaction-threshold"]
    subscription_commands = ["clear-backlog", "create-subscription", "expire-messages", "peek-messages",
                             "reset-cursor", "skip", "subscriptions", "unsubscribe",
                             "get-replicated-subscription-status", "set-replicated-subscription-status"]
    topic_commands = sorted([("create",), ("delete",), ("describe",), ("explain",), ("internal-stats",), ("list",),
                             ("create-partitioned-topic",), ("get-partitioned-topic-metadata",),
                             ("list-partitioned-topics",), ("partitioned-stats",),
                             ("stats",), ("stats-internal",), ("update",), ("update-partitioned-topic",),
                             ("get-replication-clusters",), ("remove-replication-clusters",),
                             ("set-replication-clusters",), ("get-schema-compatibility-strategy",),
                             ("set-schema-compatibility-strategy",), ("remove-schema-compatibility-strategy",),
                             ("get-schema-validation-enforce",), ("set-schema-validation-enforce",),
                             ("remove-schema-validation-enforce",), ("compact",), ("compaction-status",),
                             *[(c,) for c in policy_commands + subscription_commands]])
    namespace_commands = sorted(["clear-backlog", "create", "delete", "list", "grant-permission", "permissions",
                                 "revoke-permission", "get-auto-topic-creation", "remove-auto-topic-creation",
                                 "set-auto-topic-creation", "get-clusters", "set-clusters", "get-allowed-clusters",
                                 "set-allowed-clusters", "policies", "get-schema-compatibility-strategy",
                                 "set-schema-compatibility-strategy", "get-is-allow-auto-update-schema",
                                 "set-is-allow-auto-update-schema", "get-schema-validation-enforce",
                                 "set-schema-validation-enforce", *policy_commands])
    assert sorted(all_commands()) == [(), ("bench",), ("check",), ("clusters",), ("clusters", "create"),
                                      ("clusters", "delete"), ("clusters", "get"), ("clusters", "list"),
                                      ("clusters", "update"), ("consume",), ("demo",), ("maintenance",),
                                      ("metrics",), ("namespaces",),
                                      *[("namespaces", c) for c in namespace_commands], ("produce",),
                                      ("repair",), ("schemas",), ("schemas", "compatibility"),
                                      ("schemas", "delete"), ("schemas", "get"), ("schemas", "test-compatibility"),
                                      ("schemas", "upload"), ("serve",), ("tenants",), ("tenants", "create"),
                                      ("tenants", "delete"), ("tenants", "get"), ("tenants", "list"),
                                      ("tenants", "update"), ("tokens",), ("tokens", "create"),
                                      ("tokens", "create-secret-key"), ("topic",),
                                      *[("topic", *c) for c in topic_commands],
                                      ("topics",), *[("topics", *c) for c in topic_commands]]


@pytest.mark.parametrize("path", all_commands(), ids=lambda path: " ".join(path) or "seglog")
def test_every_command_and_option_has_help(runner: CliRunner, path: tuple[str, ...]) -> None:
    command = main
    for name in path:
        command = command.commands[name]
    assert command.help and command.get_short_help_str().strip()
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"{param.name} has no help"
    result = run(runner, None, *path, "--help")
    assert result.output.startswith(f"Usage: seglog {' '.join(path)}".rstrip())
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.opts[-1] in result.output


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "seglog", "--version"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"seglog {seglog.__version__}"


def test_unknown_command_is_a_usage_error(runner: CliRunner) -> None:
    result = run(runner, None, "frobnicate", code=2)
    assert "No such command 'frobnicate'" in result.output


def test_data_option_wins_over_environment_which_wins_over_default(runner: CliRunner, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    from_env, from_option = tmp_path / "env", tmp_path / "option"
    env = {"SEGLOG_DATA": str(from_env)}
    assert runner.invoke(main, ["--data", str(from_option), "topic", "create", "a"], env=env).exit_code == 0
    assert runner.invoke(main, ["topic", "create", "b"], env=env).exit_code == 0
    assert runner.invoke(main, ["topic", "create", "c"]).exit_code == 0
    listed = {}
    for name, directory in (("option", from_option), ("env", from_env), ("default", tmp_path / "seglog-data")):
        result = run(runner, directory, "topic", "list", "--json")
        listed[name] = [t["name"] for t in json.loads(result.output)]
    assert listed == {"option": ["public/default/a"], "env": ["public/default/b"],
                      "default": ["public/default/c"]}


def leaf_commands() -> list[tuple[str, ...]]:
    return [path for path in all_commands() if path and not isinstance(_command(path), click.Group)]


def _command(path: tuple[str, ...]) -> click.Command:
    command = main
    for name in path:
        command = command.commands[name]
    return command


@pytest.mark.parametrize("path", leaf_commands(), ids=" ".join)
def test_every_command_takes_data_after_its_name(runner: CliRunner, tmp_path: Path, path: tuple[str, ...]) -> None:
    """--data after the command is parsed by the command itself: a file given there is refused by it (before
    any missing argument), as `seglog --data FILE` is."""
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    result = run(runner, None, *path, "--data", str(a_file), code=2)
    assert "Invalid value for '--data'" in result.output and "is a file" in result.output


def test_data_after_the_command_is_the_data_before_it_and_wins(runner: CliRunner, tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    run(runner, None, "topic", "create", "a", "--data", str(after))
    run(runner, before, "topic", "create", "b")

    def names(*args: str, env: dict | None = None) -> list[str]:
        result = runner.invoke(main, [*args, "--json"], env=env)
        assert result.exit_code == 0, result.output
        return [t["name"] for t in json.loads(result.output)]

    assert names("topic", "list", "--data", str(after)) == names("--data", str(after), "topic", "list") == [
        "public/default/a"]
    assert names("--data", str(before), "topic", "list", "--data", str(after)) == ["public/default/a"]
    assert names("topic", "list", "--data", str(after), env={"SEGLOG_DATA": str(before)}) == ["public/default/a"]
    assert run(runner, None, "topics", "describe", "b", "--json", "--data", str(before)).output == (
        run(runner, before, "topics", "describe", "b", "--json").output)


@pytest.mark.parametrize("command", [["topic", "list"], ["topic", "describe", "t"], ["topic", "delete", "t"],
                                     ["consume", "t"], ["produce", "t", "--value", "x"], ["check"], ["repair"],
                                     ["tenants", "list"], ["tenants", "delete", "acme"], ["namespaces", "list"],
                                     ["namespaces", "delete", "public/ns"],
                                     ["namespaces", "get-retention", "public/default"],
                                     ["namespaces", "set-message-ttl", "public/default", "--messageTTL", "60"],
                                     ["namespaces", "clear-backlog", "public/default", "-f"]])
def test_commands_that_need_data_refuse_a_missing_directory_and_create_nothing(
        runner: CliRunner, data: Path, command: list[str]) -> None:
    result = run(runner, data, *command, code=2)
    assert "no seglog data directory" in result.output
    assert str(data) in result.output
    assert not data.exists()


def test_operating_system_errors_are_one_line(runner: CliRunner, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    result = run(runner, a_file / "data", "topic", "create", "t", code=2)
    assert result.output.strip().splitlines()[-1].startswith("Error: ") and "is a file, not a folder" in result.output
    result = run(runner, a_file, "topic", "list", code=2)
    assert "Invalid value for '--data'" in result.output and "is a file" in result.output


def test_an_unusable_metadata_file_is_one_line_naming_it(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    for leftover in data.glob("meta.sqlite-*"):  # the write-ahead log of the last open
        leftover.unlink()
    (data / "meta.sqlite").write_bytes(b"not a database" * 100)
    result = run(runner, data, "topic", "list", code=1)
    assert result.output.strip() == f"Error: {data / 'meta.sqlite'}: the metadata database cannot be used: " \
                                    "file is not a database"



@pytest.mark.parametrize("command", [("topics", "create"), ("topics", "update"), ("namespaces", "set-retention"),
                                     ("namespaces", "set-backlog-quota"), ("topics", "set-retention")])
def test_every_size_option_explains_binary_and_decimal_units(runner: CliRunner, command: tuple[str, ...]) -> None:
    text = " ".join(runner.invoke(main, [*command, "--help"], terminal_width=200).output.split())
    assert "'64m' is 64 MiB, '64MB' is 61 MiB" in text
