"""The `seglog` command line, through click's CliRunner against a data directory under tmp_path."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import seglog
from seglog.cli import main


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"SEGLOG_DATA": None, "COLUMNS": "200", "NO_COLOR": "1"})


def run(runner: CliRunner, data: Path | None, *args: str, input: str | bytes | None = None,
        code: int = 0) -> Result:
    """Invoke `seglog [--data DATA] ARGS` and check the exit code."""
    argv = (["--data", str(data)] if data is not None else []) + list(args)
    result = runner.invoke(main, argv, input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, result.output
    return result


def one_line(text: str) -> str:
    return " ".join(text.split())


def segment_logs(data: Path, topic: str = "t", partition: int = 0) -> list[Path]:
    return sorted((data / "topics" / "public" / "default" / topic / str(partition)).glob("*.log"))


def flip_byte(path: Path, position: int) -> None:
    content = bytearray(path.read_bytes())
    content[position] ^= 0xFF
    path.write_bytes(bytes(content))


# --- the group, --data, --version, help -------------------------------------------------------------------

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
    topic_commands = [("create",), ("delete",), ("describe",), ("list",)]
    assert sorted(all_commands()) == [(), ("bench",), ("check",), ("consume",), ("demo",), ("produce",),
                                      ("repair",), ("tenants",), ("tenants", "create"), ("tenants", "delete"),
                                      ("tenants", "list"), ("topic",), *[("topic", *c) for c in topic_commands],
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


@pytest.mark.parametrize("command", [["topic", "list"], ["topic", "describe", "t"], ["topic", "delete", "t"],
                                     ["consume", "t"], ["produce", "t", "--value", "x"], ["check"], ["repair"],
                                     ["tenants", "list"], ["tenants", "delete", "acme"]])
def test_commands_that_need_data_refuse_a_missing_directory_and_create_nothing(
        runner: CliRunner, data: Path, command: list[str]) -> None:
    result = run(runner, data, *command, code=2)
    assert "no seglog data directory" in result.output
    assert str(data) in result.output
    assert not data.exists()


def test_operating_system_errors_are_one_line(runner: CliRunner, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    result = run(runner, a_file / "data", "topic", "create", "t", code=1)
    assert result.output.strip() == f"Error: Not a directory: {a_file / 'data'}"
    result = run(runner, a_file, "topic", "list", code=2)
    assert "Invalid value for '--data'" in result.output and "is a file" in result.output


# --- topic ----------------------------------------------------------------------------------------------------

def test_topic_create_list_describe_delete(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "topic", "create", "events", "--partitions", "3", "--segment-size", "64 MiB",
                 "--segment-roll-time", "1h", "--segment-max-messages", "1000", "--timestamp-type",
                 "log_append_time", "--fsync", "100ms")
    assert "Created topic public/default/events with 3 partitions" in result.output
    run(runner, data, "topic", "create", "acme/billing/invoices")

    listed = run(runner, data, "topic", "list").output
    assert ["NAME", "PARTITIONS", "RETENTION", "TIME", "SEGMENT", "SIZE", "TIMESTAMP", "TYPE"] == (
        listed.splitlines()[0].split())
    rows = [line.split() for line in listed.splitlines()[1:]]
    assert rows == [["acme/billing/invoices", "1", "-", "1", "GiB", "create_time"],
                    ["public/default/events", "3", "-", "64", "MiB", "log_append_time"]]

    as_json = json.loads(run(runner, data, "topic", "list", "--json").output)
    assert as_json[1] == {"name": "public/default/events", "partitions": 3, "segment_size": 64 << 20,
                          "segment_roll_time": 3_600_000, "segment_max_messages": 1000,
                          "timestamp_type": "log_append_time", "fsync": "100ms",
                          "retention_time": None, "max_partition_size": None, "retention_min_timestamp": 0}

    run(runner, data, "produce", "events", "--partition", "2", input="a\nb\nc\n")
    described = run(runner, data, "topic", "describe", "events").output
    assert "Segment roll time" in described and "1h" in described
    offsets = [line.split() for line in described.splitlines() if line.split()[:1] in (["0"], ["1"], ["2"])]
    assert offsets == [["0", "0", "0", "0"], ["1", "0", "0", "0"], ["2", "0", "3", "3"]]
    description = json.loads(run(runner, data, "topic", "describe", "events", "--json").output)
    assert description["partition_offsets"][2] == {"partition": 2, "earliest_offset": 0, "end_offset": 3}
    assert description["storage_bytes"] > 0

    assert "Deleted topic public/default/events" in run(runner, data, "topic", "delete", "events").output
    assert [t["name"] for t in json.loads(run(runner, data, "topic", "list", "--json").output)] == [
        "acme/billing/invoices"]
    assert not (data / "topics" / "public" / "default" / "events").exists()


def test_topic_create_retention_settings_and_list(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "topic", "create", "kept", "--retention-time", "1d 2h 3m 4s",
                 "--max-partition-size", "10 GB", "--retention-min-timestamp", "1700000000000")
    assert "Created topic public/default/kept" in result.output
    run(runner, data, "topic", "create", "weekly", "--retention-time", "7 days", "--max-partition-size", "20G")
    run(runner, data, "topic", "create", "off", "--retention-time", "-1", "--max-partition-size", "-1")
    with seglog.open(data) as log:
        assert log.topic("kept").config.to_dict() == {
            **log.topic("off").config.to_dict(), "retention_time": 93_784_000,
            "max_partition_size": 10**10, "retention_min_timestamp": 1_700_000_000_000}
        assert (log.topic("weekly").config.retention_time, log.topic("weekly").config.max_partition_size) == (
            7 * 86_400_000, 20 << 30)
        assert (log.topic("off").config.retention_time, log.topic("off").config.max_partition_size) == (
            None, None)

    listed = run(runner, data, "topics", "list").output  # pulsar-admin's plural
    rows = {line.split()[0]: line for line in listed.splitlines()[1:]}
    assert rows.keys() == {"public/default/kept", "public/default/off", "public/default/weekly"}
    assert " 1day 2h 3m 4s " in rows["public/default/kept"]
    assert " 7days " in rows["public/default/weekly"]
    assert rows["public/default/off"].split()[:3] == ["public/default/off", "1", "-"]
    as_json = {t["name"]: t for t in json.loads(run(runner, data, "topics", "list", "--json").output)}
    assert as_json["public/default/kept"]["retention_time"] == 93_784_000
    assert as_json["public/default/kept"]["max_partition_size"] == 10**10
    assert as_json["public/default/kept"]["retention_min_timestamp"] == 1_700_000_000_000
    assert as_json["public/default/off"]["retention_time"] is None


def test_topics_is_the_topic_group_under_pulsar_admins_name(runner: CliRunner, data: Path) -> None:
    assert main.commands["topics"] is main.commands["topic"]
    assert "Created topic public/default/t" in run(runner, data, "topics", "create", "t").output
    assert run(runner, data, "topics", "describe", "t", "--json").output == (
        run(runner, data, "topic", "describe", "t", "--json").output)
    assert run(runner, None, "topics", "list", "--help").output.startswith("Usage: seglog topics list")
    run(runner, data, "topics", "delete", "t")
    assert json.loads(run(runner, data, "topic", "list", "--json").output) == []


BAD_CREATE_OPTIONS = [
    (["--segment-size", "lots"], "'--segment-size'", "'10 MiB'"),
    (["--segment-size", "100"], "'--segment-size'", "a size from 1 KiB to 2 GiB"),
    (["--segment-roll-time", "5 fortnights"], "'--segment-roll-time'", "'1h'"),
    (["--segment-max-messages", "-3"], "'--segment-max-messages'", "a positive int"),
    (["--segment-max-messages", "many"], "'--segment-max-messages'", "is not a valid integer"),
    (["--timestamp-type", "wall_clock"], "'--timestamp-type'", "'create_time' or 'log_append_time'"),
    (["--fsync", "sometimes"], "'--fsync'", "'never', 'always', or an interval such as '100ms'"),
    (["--partitions", "0"], "'--partitions'", "1<=x<=10000"),
    (["--retention-time", "a week"], "'--retention-time'", "'2d 10s', '7 days'"),
    (["--retention-time", "-5s"], "'--retention-time'", "a duration such as '1h'"),
    (["--max-partition-size", "huge"], "'--max-partition-size'", "'2 Ki', '10 MiB', '1 GB', 10G, 1T"),
    (["--max-partition-size", "1M"], "'--max-partition-size'", "a size of at least the segment_size"),
    (["--retention-min-timestamp", "-1"], "'--retention-min-timestamp'", "ms since the epoch as an int"),
    (["--retention-min-timestamp", "yesterday"], "'--retention-min-timestamp'", "is not a valid integer"),
]


@pytest.mark.parametrize(("options", "named", "accepted"), BAD_CREATE_OPTIONS)
def test_topic_create_refuses_bad_values_and_creates_nothing(runner: CliRunner, data: Path, options: list[str],
                                                            named: str, accepted: str) -> None:
    result = run(runner, data, "topic", "create", "t", *options, code=2)
    message = one_line(result.output)
    assert "Error: Invalid value for " + named in message
    assert accepted in message
    assert "Traceback" not in result.output
    assert not data.exists()


@pytest.mark.parametrize(("options", "named", "accepted"), BAD_CREATE_OPTIONS)
def test_bad_values_leave_an_existing_directory_unchanged(runner: CliRunner, data: Path, options: list[str],
                                                         named: str, accepted: str) -> None:
    run(runner, data, "topic", "create", "kept")
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    run(runner, data, "topic", "create", "t", *options, code=2)
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before
    assert [t["name"] for t in json.loads(run(runner, data, "topic", "list", "--json").output)] == [
        "public/default/kept"]


def test_topic_name_is_checked_by_the_library(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "topic", "create", "no spaces please", code=2)
    message = one_line(result.output)
    assert "Invalid value for 'NAME'" in message and "contains whitespace" in message
    assert "'tenant/namespace/topic'" in message
    assert not data.exists()


def test_topic_errors_on_existing_and_missing_topics(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    assert "already exists" in run(runner, data, "topic", "create", "t", code=2).output
    for command in (["topic", "describe", "nope"], ["topic", "delete", "nope"], ["consume", "nope"],
                    ["produce", "nope", "--value", "x"]):
        result = run(runner, data, *command, code=2)
        assert "public/default/nope does not exist" in result.output
        assert "Traceback" not in result.output


# --- tenants ---------------------------------------------------------------------------------------------------

def test_tenants_create_list_delete(runner: CliRunner, data: Path) -> None:
    assert "Created tenant acme" in run(runner, data, "tenants", "create", "acme").output  # creates the directory
    run(runner, data, "tenants", "create", "geo", "--allowed-clusters", "us-east, eu-west")
    assert run(runner, data, "tenants", "list").stdout == "acme\ngeo\npublic\n"
    with seglog.open(data) as log:
        listed = log.admin.tenants.list()
        assert log.admin.tenants.get("geo") == {"allowedClusters": ["us-east", "eu-west"]}
        assert log.admin.tenants.get("acme") == {"allowedClusters": None}
    assert json.loads(run(runner, data, "tenants", "list", "--json").output) == listed == ["acme", "geo", "public"]

    assert "Deleted tenant geo" in run(runner, data, "tenants", "delete", "geo").output
    with seglog.open(data) as log:
        assert log.admin.tenants.list() == ["acme", "public"]


def test_tenants_refusals(runner: CliRunner, data: Path) -> None:
    message = one_line(run(runner, data, "tenants", "create", "no spaces", code=2).output)
    assert "Error: Invalid value for 'NAME': invalid tenant name 'no spaces'" in message
    assert "accepted: 1 to 255 characters" in message
    message = one_line(run(runner, data, "tenants", "create", "acme", "-c", "a,,b", code=2).output)
    assert "Invalid value for '--allowed-clusters' / '-c': 'a,,b' is not a comma-separated list" in message
    assert not data.exists()

    run(runner, data, "tenants", "create", "acme")
    assert "Error: tenant acme already exists" in run(runner, data, "tenants", "create", "acme", code=2).output
    assert "Error: tenant nope does not exist" in run(runner, data, "tenants", "delete", "nope", code=2).output
    message = one_line(run(runner, data, "tenants", "delete", "public", code=2).output)
    assert "Invalid value for 'NAME'" in message and "a tenant other than 'public'" in message
    with seglog.open(data) as log:
        log.admin.namespaces.create("acme/billing")
    message = one_line(run(runner, data, "tenants", "delete", "acme", code=2).output)
    assert "Error: tenant acme still has namespaces: acme/billing; delete them first" in message
    assert "Traceback" not in message
    assert run(runner, data, "tenants", "list").stdout == "acme\npublic\n"


# --- produce and consume --------------------------------------------------------------------------------------

def test_produce_stdin_then_consume_back(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t", "--partitions", "2")
    result = run(runner, data, "produce", "t", "--partition", "1", input="first\nsecond line\r\n\nlast")
    assert "Wrote 4 messages" in result.output
    assert "MessageId(partition=1, offset=0)" in result.output
    assert "MessageId(partition=1, offset=3)" in result.output
    result = run(runner, data, "consume", "t", "--partition", "1")
    assert result.stdout == "first\nsecond line\n\nlast\n"
    assert run(runner, data, "consume", "t").stdout == ""  # partition 0 is empty

    assert run(runner, data, "consume", "t", "-p", "1", "--start", "1", "-n", "2").stdout == "second line\n\n"
    assert run(runner, data, "consume", "t", "-p", "1", "--start", "latest").stdout == ""
    assert run(runner, data, "consume", "t", "-p", "1", "-n", "0").stdout == ""


def test_produce_value_with_key_and_properties_then_consume_json(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    result = run(runner, data, "produce", "t", "--value", "héllo", "--key", "user-1", "--property", "a=b",
                 "--property", "trace=x=y")
    assert "Wrote 1 message to public/default/t" in result.output
    run(runner, data, "produce", "t", input=b"\xff\xfe raw\n")
    lines = run(runner, data, "consume", "t", "--format", "json").stdout.splitlines()
    first, second = map(json.loads, lines)
    assert first["partition"] == 0 and first["offset"] == 0 and first["timestamp"] > 0
    assert (first["key"], first["key_encoding"], first["value"], first["value_encoding"]) == (
        "user-1", "utf-8", "héllo", "utf-8")
    assert first["properties"] == {"a": "b", "trace": "x=y"}
    assert second["offset"] == 1 and second["key"] is None and second["key_encoding"] is None
    assert second["value_encoding"] == "base64"
    assert base64.b64decode(second["value"]) == b"\xff\xfe raw"
    assert second["properties"] == {}
    # value format: undecodable bytes replaced
    assert run(runner, data, "consume", "t", "--start", "1").stdout == "\ufffd\ufffd raw\n"


def test_consume_from_timestamp(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    with seglog.open(data) as log, log.topic("t").producer() as producer:
        for i, stamp in enumerate((1000, 2000, 3000)):
            producer.send(f"m{i}".encode(), timestamp=stamp)
    assert run(runner, data, "consume", "t", "--from-timestamp", "1500").stdout == "m1\nm2\n"
    assert run(runner, data, "consume", "t", "--from-timestamp", "9000").stdout == ""
    result = run(runner, data, "consume", "t", "--from-timestamp", "1500", "--start", "0", code=2)
    assert "--start and --from-timestamp cannot be used together" in result.output


@pytest.mark.parametrize(("options", "named", "accepted"), [
    (["--start", "middle"], "'--start'", "'earliest', 'latest', an offset"),
    (["--start", "-1"], "'--start'", "an offset (int >= 0)"),
    (["--partition", "5"], "'--partition'", "an int from 0 to 0"),
    (["--format", "xml"], "'--format'", "'value', 'json'"),
    (["--count", "-1"], "'--count'", "x>=0"),
])
def test_consume_refuses_bad_values(runner: CliRunner, data: Path, options: list[str], named: str,
                                    accepted: str) -> None:
    run(runner, data, "topic", "create", "t")
    result = run(runner, data, "consume", "t", *options, code=2)
    message = one_line(result.output)
    assert "Invalid value for " + named in message and accepted in message


def test_produce_refuses_bad_values_and_writes_nothing(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t", "--partitions", "2")
    message = one_line(run(runner, data, "produce", "t", "--partition", "2", "--value", "x", code=2).output)
    assert "Invalid value for '--partition'" in message and "an int from 0 to 1" in message
    message = one_line(run(runner, data, "produce", "t", "--property", "novalue", "--value", "x", code=2).output)
    assert "Invalid value for '--property'" in message and "KEY=VALUE" in message
    description = json.loads(run(runner, data, "topic", "describe", "t", "--json").output)
    assert [p["end_offset"] for p in description["partition_offsets"]] == [0, 0]


def test_produce_empty_stdin(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    assert "No messages written" in run(runner, data, "produce", "t", input="").output


def test_consume_follow_waits_for_new_messages_until_count(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    run(runner, data, "produce", "t", "--value", "before")
    followed = threading.Event()

    def produce_later() -> None:
        time.sleep(0.3)
        with seglog.open(data) as log, log.topic("t").producer() as producer:
            producer.send(b"after-1")
            producer.flush()
            time.sleep(0.2)
            producer.send(b"after-2")
            producer.flush()
            # Closing trims the index files under the following reader's maps (SIGBUS, see the report):
            # keep the writer open until the consumer is done.
            followed.wait(60)

    writer = threading.Thread(target=produce_later)
    writer.start()
    started = time.monotonic()
    try:
        result = run(runner, data, "consume", "t", "--follow", "-n", "3")
    finally:
        followed.set()
        writer.join()
    assert result.stdout == "before\nafter-1\nafter-2\n"
    assert time.monotonic() - started >= 0.3


def test_consume_follow_stops_on_ctrl_c(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    run(runner, data, "produce", "t", "--value", "only")
    # Python leaves SIGINT ignored if this process was started with it ignored (a background job): restore it.
    program = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
               "from seglog.cli import main; main(sys.argv[1:], prog_name='seglog')")
    process = subprocess.Popen([sys.executable, "-c", program, "--data", str(data), "consume", "t", "--follow"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "only\n"  # the stored message; then it waits for more
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "Stopped after 1 message." in err
    assert "Traceback" not in err


# --- check and repair -----------------------------------------------------------------------------------------

def test_check_healthy_directory(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t", "--partitions", "2")
    run(runner, data, "produce", "t", input="".join(f"message {i}\n" for i in range(100)))
    result = run(runner, data, "check")
    summary = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()
               if line.split()[:1] in (["Partitions"], ["Segments"], ["Batches"])}
    assert (summary["Partitions"], summary["Segments"]) == ("2", "2")
    assert int(summary["Batches"]) >= 2  # one a partition, more if the linger flusher wrote part early
    assert "GB/s" in result.stdout and "OK: no damage" in result.stdout


def test_check_finds_a_flipped_byte_and_repair_cuts_it(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    run(runner, data, "produce", "t", input="one\ntwo\n")
    (log_file,) = segment_logs(data)
    first_batch_end = log_file.stat().st_size
    run(runner, data, "produce", "t", input="three\nfour\n")
    flip_byte(log_file, log_file.stat().st_size - 3)  # inside the second batch's values

    result = run(runner, data, "check", code=1)
    assert f"{log_file}: byte {first_batch_end}: CRC32C mismatch" in result.stdout
    assert "1 problem found" in result.stdout

    result = run(runner, data, "consume", "t", code=1)  # reads stop at the damage, with its position
    assert result.stdout == "one\ntwo\n"
    assert f"{log_file}: corrupt record batch at byte {first_batch_end}" in one_line(result.stderr)

    result = run(runner, data, "repair")
    cut = log_file.stat().st_size
    assert cut == first_batch_end
    assert "Rebuilt 1 index" in result.stdout and "OK: no damage remains" in result.stdout
    assert "Cut" in result.stdout
    run(runner, data, "check")
    assert run(runner, data, "consume", "t").stdout == "one\ntwo\n"
    run(runner, data, "produce", "t", "--value", "five")
    assert run(runner, data, "consume", "t", "--start", "2").stdout == "five\n"


def test_repair_refuses_a_partition_locked_by_a_writer(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    with seglog.open(data) as log, log.topic("t").producer() as producer:
        producer.send(b"held")
        result = run(runner, data, "repair", code=2)
    message = one_line(result.output)
    assert "Error: partition is being written by process" in message
    assert str(os.getpid()) in message and ".lock" in message
    assert "Traceback" not in result.output
    run(runner, data, "repair")  # released


def test_repair_reports_damage_inside_a_sealed_segment(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t", "--segment-max-messages", "2")
    run(runner, data, "produce", "t", input="a\nb\n")
    run(runner, data, "produce", "t", input="c\nd\n")
    sealed = segment_logs(data)[0]
    flip_byte(sealed, sealed.stat().st_size - 2)
    assert str(sealed) in run(runner, data, "check", code=1).stdout
    result = run(runner, data, "repair", code=1)
    assert "Damage remains" in result.stdout and f"{sealed}: byte 0" in result.stdout


# --- demo and bench -------------------------------------------------------------------------------------------

OPERATIONS = ["send_batch", "send()", "baseline: f.write", "read_batch", "iterate Messages", "baseline: f.read"]


def test_demo_small(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "demo", "--messages", "2000", "--size", "50")
    for operation in OPERATIONS:
        assert operation in result.stdout
    assert "Messages/s" in result.stdout and "MB/s" in result.stdout and "vs baseline" in result.stdout
    assert "now holds 4,000 messages" in result.stdout
    result = run(runner, data, "demo", "--messages", "2000", "--size", "50")  # reuses the topic
    assert "now holds 8,000 messages" in result.stdout
    assert [t["name"] for t in json.loads(run(runner, data, "topic", "list", "--json").output)] == [
        "public/default/demo"]
    assert run(runner, data, "consume", "demo", "-n", "1", "--format", "json").stdout.count("\n") == 1
    assert not [p for p in data.iterdir() if p.name.startswith(".throughput")]  # baseline file removed


def test_bench_json_with_partitions(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "bench", "--messages", "3000", "--size", "1 KiB", "--partitions", "3",
                 "--chunk", "1000", "--json")
    report = json.loads(result.stdout)
    assert (report["messages"], report["size"], report["partitions"]) == (3000, 1024, 3)
    assert [r["operation"] for r in report["results"]] == OPERATIONS
    for r in report["results"]:
        assert r["messages"] == (6000 if r["kind"] == "read" and not r["baseline"] else 3000)
        assert r["seconds"] > 0 and r["messages_per_second"] > 0 and r["ratio_to_baseline"] > 0
        assert r["ratio_to_baseline"] == 1.0 if r["baseline"] else True
    assert json.loads(run(runner, data, "topic", "list", "--json").output) == []  # scratch topic deleted


def test_bench_table_and_keep(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "bench", "--messages", "1000", "--keep")
    for operation in OPERATIONS:
        assert operation in result.stdout
    (kept,) = json.loads(run(runner, data, "topic", "list", "--json").output)
    assert kept["name"].startswith("public/default/bench-") and f"Kept topic {kept['name']}" in result.stdout


@pytest.mark.parametrize("command", ["demo", "bench"])
def test_demo_and_bench_refuse_bad_sizes(runner: CliRunner, data: Path, command: str) -> None:
    message = one_line(run(runner, data, command, "--size", "big", code=2).output)
    assert "Invalid value for '--size'" in message and "'10 MiB'" in message
    message = one_line(run(runner, data, command, "--messages", "0", code=2).output)
    assert "Invalid value for '--messages'" in message
    assert not data.exists()
