"""`seglog topics` (and its alias `topic`): create, list, describe, update, delete and topic policies."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import floors, in_a_terminal, one_line, run
from seglog.cli import main


def test_topic_create_list_describe_delete(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "topic", "create", "events", "--partitions", "3", "--segment-size", "64 MiB",
                 "--segment-roll-time", "1h", "--segment-max-messages", "1000", "--timestamp-type",
                 "log_append_time", "--fsync", "100ms")
    assert "Created topic public/default/events with 3 partitions" in result.output
    run(runner, data, "topic", "create", "acme/billing/invoices")

    assert run(runner, data, "topic", "list").output == (  # a pipe: pulsar-admin's names, partitions each
        "persistent://acme/billing/invoices\n" + "".join(f"persistent://public/default/events-partition-{p}\n"
                                                         for p in range(3)))
    listed = in_a_terminal(runner, data, "topic", "list")
    assert ["NAME", "PARTITIONS", "RETENTION", "TIME", "SEGMENT", "SIZE", "TIMESTAMP", "TYPE"] == (
        listed.splitlines()[0].split())
    rows = [line.split() for line in listed.splitlines()[1:]]
    assert rows == [["persistent://acme/billing/invoices", "1", "-", "1", "GiB", "create_time"],
                    ["persistent://public/default/events", "3", "-", "64", "MiB", "log_append_time"]]

    as_json = json.loads(run(runner, data, "topic", "list", "--json").output)
    assert as_json[1] == {"name": "public/default/events", "partitions": 3, "segmentSize": 64 << 20,
                          "segmentRollTimeMs": 3_600_000, "segmentMaxMessages": 1000,
                          "timestampType": "log_append_time", "fsync": "100ms",
                          "retentionTimeMs": None, "maxPartitionSize": None, "retentionMinTimestampMs": 0,
                          "cleanupPolicy": "delete", "minCompactionLagMs": 0, "maxCompactionLagMs": None,
                          "deleteRetentionMs": 86_400_000, "minCleanableDirtyRatio": 0.5}

    run(runner, data, "produce", "events", "--partition", "2", input="a\nb\nc\n")
    described = run(runner, data, "topic", "describe", "events").output
    assert "Segment roll time" in described and "1h" in described
    offsets = [line.split() for line in described.splitlines() if line.split()[:1] in (["0"], ["1"], ["2"])]
    assert offsets == [["0", "0", "0", "0"], ["1", "0", "0", "0"], ["2", "0", "3", "3"]]
    description = json.loads(run(runner, data, "topic", "describe", "events", "--json").output)
    assert description["partitionOffsets"][2] == {"partition": 2, "earliestOffset": 0, "endOffset": 3}
    assert description["storageSize"] > 0

    assert "Deleted topic public/default/events" in run(runner, data, "topic", "delete", "events").output
    assert [t["name"] for t in json.loads(run(runner, data, "topic", "list", "--json").output)] == [
        "acme/billing/invoices"]
    assert not (data / "topics" / "public" / "default" / "events").exists()


def test_topic_list_never_cuts_a_name(runner: CliRunner, data: Path) -> None:
    name = "a-tenant-with-a-long-name/a-namespace-with-a-long-name/a-topic-with-a-name-longer-than-the-terminal"
    run(runner, data, "tenants", "create", "a-tenant-with-a-long-name")
    run(runner, data, "namespaces", "create", "a-tenant-with-a-long-name/a-namespace-with-a-long-name")
    run(runner, data, "topic", "create", name, "--retention-time", "1d 2h 3m 4s")
    listed = in_a_terminal(runner, data, "topic", "list", columns=40)
    assert listed.splitlines()[1].split() == [f"persistent://{name}", "1", "1day", "2h", "3m", "4s", "1", "GiB",
                                              "create_time"]
    assert "…" not in listed
    described = in_a_terminal(runner, data, "topic", "describe", name, columns=40)
    assert f"Topic {name}" in one_line(described) and "…" not in described
    assert run(runner, data, "topic", "list").output == f"persistent://{name}\n"


def test_sizes_shown_are_all_in_binary_units(runner: CliRunner, data: Path) -> None:
    """One unit system in a command's output: '10 GB' given is shown as GiB beside the GiB of the others."""
    run(runner, data, "topic", "create", "t", "--segment-size", "1 KiB", "--max-partition-size", "10 GB")
    run(runner, data, "namespaces", "set-retention", "public/default", "--size", "25M", "--time", "1h")
    run(runner, data, "namespaces", "set-backlog-quota", "public/default", "--limit", "1 GB", "-p",
        "producer_exception")
    run(runner, data, "produce", "t", input="".join(f"message {i}\n" for i in range(200)))
    outputs = [in_a_terminal(runner, data, *command) for command in (
        ["topic", "list"], ["topic", "describe", "t"], ["topic", "explain", "t"], ["maintenance"], ["check"])]
    described = outputs[1]
    for size in ("1 KiB", "9.3 GiB", "953.7 MiB"):
        assert size in described
    for output in outputs:
        assert not re.search(r"\d (KB|MB|GB|TB)\b(?!/s)", output), output  # rates stay MB/s, as demo's
    assert "KiB)" in outputs[4]  # check: the bytes checked, and rounded in binary units


def test_topic_create_retention_settings_and_list(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "topic", "create", "kept", "--retention-time", "1d 2h 3m 4s",
                 "--max-partition-size", "10 GB", "--retention-min-timestamp", "1700000000000")
    assert "Created topic public/default/kept" in result.output
    run(runner, data, "topic", "create", "weekly", "--retention-time", "7 days", "--max-partition-size", "20G")
    run(runner, data, "topic", "create", "off", "--retention-time", "-1", "--max-partition-size", "-1")
    with seglog.open(data) as log:
        assert log.admin.topics.get_config("kept") == {
            **log.admin.topics.get_config("off"), "retentionTimeMs": 93_784_000,
            "maxPartitionSize": 10**10, "retentionMinTimestampMs": 1_700_000_000_000}
        assert (log.topic("weekly").config.retention_time, log.topic("weekly").config.max_partition_size) == (
            7 * 86_400_000, 20 << 30)
        assert (log.topic("off").config.retention_time, log.topic("off").config.max_partition_size) == (
            None, None)

    listed = in_a_terminal(runner, data, "topics", "list")  # pulsar-admin's plural
    rows = {line.split()[0].removeprefix("persistent://"): line for line in listed.splitlines()[1:]}
    assert rows.keys() == {"public/default/kept", "public/default/off", "public/default/weekly"}
    assert " 1day 2h 3m 4s " in rows["public/default/kept"]
    assert " 7days " in rows["public/default/weekly"]
    assert rows["public/default/off"].split()[:3] == ["persistent://public/default/off", "1", "-"]
    as_json = {t["name"]: t for t in json.loads(run(runner, data, "topics", "list", "--json").output)}
    assert as_json["public/default/kept"]["retentionTimeMs"] == 93_784_000
    assert as_json["public/default/kept"]["maxPartitionSize"] == 10**10
    assert as_json["public/default/kept"]["retentionMinTimestampMs"] == 1_700_000_000_000
    assert as_json["public/default/off"]["retentionTimeMs"] is None

    run(runner, data, "namespaces", "set-backlog-quota", "public/default", "-lt", "1h", "-p", "producer_exception",
        "-t", "message_age")
    described = {line.split("  ")[0].strip(): line.split("  ", 1)[1].strip()
                 for line in run(runner, data, "topic", "describe", "kept").output.splitlines()[:21] if line.strip()}
    assert described["Retention time"] == "1day 2h 3m 4s"
    assert described["Max partition size"] == "9.3 GiB"  # 10 GB: binary units, as the other sizes shown
    assert described["Retention min timestamp"].startswith("1700000000000 (2023-11-14T22:13:20.000+00:00")
    assert described["Retention"].startswith("time 1day 2h 3m 4s, size 9.3 GiB (topic")  # Fluvio's limits act
    assert described["Message TTL"] == "off (broker)"
    assert described["Backlog quota message_age"] == "1h, producer_exception (namespace)"
    policies = json.loads(run(runner, data, "topic", "describe", "kept", "--json").output)["policies"]
    with seglog.open(data) as log:
        assert policies == log.topic("kept").stats()["policies"]


def test_topics_is_the_group_and_topic_a_hidden_alias_of_it(runner: CliRunner, data: Path) -> None:
    assert main.commands["topics"].commands is main.commands["topic"].commands
    assert main.commands["topic"].hidden and not main.commands["topics"].hidden
    listed = [line.split()[0] for line in run(runner, None, "--help").output.splitlines() if line.startswith("  ")]
    assert "topics" in listed and "topic" not in listed
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
    (["--fsync", "sometimes"], "'--fsync'", "'never', 'always', or an interval with its unit, such as '100ms'"),
    (["--fsync", "100"], "'--fsync'", "a bare number is ambiguous here"),
    (["--partitions", "0"], "'--partitions'", "1<=x<=10000"),
    (["--retention-time", "a week"], "'--retention-time'", "'2d 10s', '7 days'"),
    (["--retention-time", "-5s"], "'--retention-time'", "a duration such as '1h'"),
    (["--retention-time", "3600"], "'--retention-time'", "give its unit, e.g. '3600s', '1h' or '500ms'"),
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
    assert "already exists" in run(runner, data, "topic", "create", "t", code=1).output
    for command in (["topic", "describe", "nope"], ["topic", "delete", "nope"], ["consume", "nope"],
                    ["produce", "nope", "--value", "x"]):
        result = run(runner, data, *command, code=2)
        assert "public/default/nope does not exist" in result.output
        assert "Traceback" not in result.output


def test_topic_policies_override_the_namespace_and_fall_back_when_removed(runner: CliRunner, data: Path) -> None:
    """The same commands at topic level (pulsar-admin topics set-retention ...): the CLI, the API and the
    policies in force in stats agree at each step."""
    run(runner, data, "topic", "create", "events")

    def in_force() -> dict:
        with seglog.open(data) as log:
            return log.topic("events").stats()["policies"]

    run(runner, data, "namespaces", "set-retention", "public/default", "--size", "1G", "--time", "1d")
    run(runner, data, "namespaces", "set-message-ttl", "public/default", "--messageTTL", "1h")
    assert json.loads(run(runner, data, "topics", "get-retention", "events").output) is None
    result = run(runner, data, "topics", "set-retention", "events", "--size", "10G", "--time", "3h")
    assert "Set retention of public/default/events: size 10 GiB, time 3h" in result.output
    run(runner, data, "topics", "set-message-ttl", "events", "--messageTTL", "120")
    run(runner, data, "topics", "set-backlog-quota", "events", "-l", "2G", "-p", "producer_exception")
    cli = {command: json.loads(run(runner, data, "topics", command, "events").output)
           for command in ("get-retention", "get-message-ttl", "get-backlog-quotas")}
    assert cli == {"get-retention": {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240},
                   "get-message-ttl": 120,
                   "get-backlog-quotas": {"destination_storage": {"limit": 2 << 30, "policy": "producer_exception"}}}
    with seglog.open(data) as log:
        topics = log.admin.topics
        assert cli == {"get-retention": topics.get_retention("events"),
                       "get-message-ttl": topics.get_message_ttl("events"),
                       "get-backlog-quotas": topics.get_backlog_quotas("events")}
    policies = in_force()
    assert policies["retention"] == {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240, "level": "topic"}
    assert policies["messageTTLInSeconds"] == {"value": 120, "level": "topic"}

    assert "Removed retention of public/default/events" in run(runner, data, "topics", "remove-retention",
                                                               "events").output
    run(runner, data, "topics", "remove-message-ttl", "events")
    run(runner, data, "topics", "remove-backlog-quota", "events")
    assert json.loads(run(runner, data, "topics", "get-retention", "events").output) is None
    assert json.loads(run(runner, data, "topics", "get-backlog-quotas", "events").output) == {}
    policies = in_force()
    assert policies["retention"] == {"retentionTimeInMinutes": 1440, "retentionSizeInMB": 1024, "level": "namespace"}
    assert policies["messageTTLInSeconds"] == {"value": 3600, "level": "namespace"}
    assert policies["backlogQuotas"] == {}

    result = run(runner, data, "namespaces", "remove-retention", "public/default")
    assert "Removed retention of public/default" in result.output
    assert json.loads(run(runner, data, "namespaces", "get-retention", "public/default").output) is None
    assert in_force()["retention"] == {"retentionTimeInMinutes": 10080, "retentionSizeInMB": -1, "level": "broker"}


def test_topic_policy_commands_refuse_a_missing_topic_and_bad_values(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "events")
    message = one_line(run(runner, data, "topics", "set-retention", "nope", "-s", "1G", "-t", "1h", code=2).output)
    assert "Error: topic public/default/nope does not exist" in message
    message = one_line(run(runner, data, "topics", "set-retention", "events", "-s", "1G", "-t", "0", code=2).output)
    assert "Error: Invalid value for '--time' / '-t': invalid retention time '0': a limit of 0 with the other limit " \
           "set (size 1G) is refused" in message and "Traceback" not in message
    message = one_line(run(runner, data, "topics", "set-backlog-quota", "events", "-lt", "1h", "-p",
                           "producer_exception", code=2).output)
    assert "--type destination_storage takes --limit" in message
    with seglog.open(data) as log:
        assert log.admin.topics.get_retention("events") is None
        assert log.admin.topics.get_backlog_quotas("events") == {}


def test_update_partitioned_topic_grows_only(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t", "--partitions", "2")
    run(runner, data, "topics", "create-subscription", "t", "-s", "s", "-m", "earliest")
    result = run(runner, data, "topics", "update-partitioned-topic", "t", "-p", "4")
    assert "Updated topic public/default/t: 4 partitions" in result.output
    for fewer in ("4", "1"):
        message = one_line(run(runner, data, "topics", "update-partitioned-topic", "t", "--partitions", fewer,
                               code=2).output)
        assert "Error: Invalid value for '--partitions' / '-p'" in message
        assert "more than the 4 partitions public/default/t has (a partition is never removed)" in message
    assert "Missing option '--partitions'" in run(runner, data, "topics", "update-partitioned-topic", "t",
                                                  code=2).output
    run(runner, data, "produce", "t", "--partition", "3", "--value", "new")
    assert run(runner, data, "consume", "t", "--subscription", "s").stdout == "new\n"
    assert floors(data, "s") == [0, 0, 0, 1]


def test_topic_update_changes_settings_after_creation(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t", "--segment-size", "1 MiB")
    result = run(runner, data, "topic", "update", "t", "--retention-time", "7 days", "--segment-size", "2 MiB")
    assert "Updated topic public/default/t: retention-time 7 days, segment-size 2 MiB" in result.output
    config = json.loads(run(runner, data, "topic", "describe", "t", "--json").output)
    assert (config["retentionTimeMs"], config["segmentSize"]) == (7 * 86_400_000, 2 << 20)
    for options, named in ((["--segment-size", "lots"], "'--segment-size'"),
                           (["--max-partition-size", "1 KiB"], "'--max-partition-size'")):
        message = one_line(run(runner, data, "topic", "update", "t", *options, code=2).output)
        assert f"Error: Invalid value for {named}" in message
    assert "no setting given to change" in run(runner, data, "topic", "update", "t", code=2).output
    assert "public/default/nope does not exist" in run(runner, data, "topic", "update", "nope", "--fsync",
                                                       "always", code=2).output
    after = json.loads(run(runner, data, "topic", "describe", "t", "--json").output)
    assert (after["retentionTimeMs"], after["segmentSize"], after["maxPartitionSize"]) == (
        7 * 86_400_000, 2 << 20, None)


def test_stats_internal_is_internal_stats(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    assert run(runner, data, "topics", "stats-internal", "t").output == (
        run(runner, data, "topics", "internal-stats", "t").output)



def test_explain_fits_80_columns_in_a_pipe(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "t", "--segment-size", "1 KiB", "--retention-time", "1h")
    run(runner, data, "produce", "t", input="".join(f"message number {i} with some padding\n" for i in range(60)))
    narrow = runner.invoke(main, ["--data", str(data), "topics", "explain", "t"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    lines = narrow.stdout.splitlines()
    assert lines and all(len(line) <= 80 for line in lines)
    assert "…" not in narrow.stdout and "time 1h not yet reached" in one_line(narrow.stdout)
    assert one_line(narrow.stdout).startswith("Partition 0, segment at offset 0 (")
    wide = in_a_terminal(runner, data, "topics", "explain", "t", columns=250)
    assert wide.splitlines()[0].split()[:3] == ["PARTITION", "BASE", "OFFSET"]


def test_create_partitioned_topic_and_its_metadata(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "topics", "create-partitioned-topic", "p", "-p", "4")
    assert "Created partitioned topic public/default/p with 4 partitions" in result.output
    assert json.loads(run(runner, data, "topics", "get-partitioned-topic-metadata", "p").stdout) == {"partitions": 4}
    assert "Missing option '--partitions'" in run(runner, data, "topics", "create-partitioned-topic", "q",
                                                  code=2).output
    assert "public/default/nope does not exist" in run(runner, data, "topics", "get-partitioned-topic-metadata",
                                                       "nope", code=2).output


def test_partitioned_stats_as_pulsar_admin_prints_them(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create-partitioned-topic", "events", "-p", "2")
    run(runner, data, "produce", "events", "--partition", "1", input="a\nb\n")
    stats = json.loads(run(runner, data, "topics", "partitioned-stats", "events").output)
    assert stats["metadata"] == {"partitions": 2} and stats["partitions"] == {}
    assert stats["publishers"] == [] and stats["replication"] == {} and stats["storageSize"] > 0
    each = json.loads(run(runner, data, "topics", "partitioned-stats", "events", "--per-partition").output)
    assert list(each["partitions"]) == [f"persistent://public/default/events-partition-{p}" for p in (0, 1)]
    assert each["partitions"]["persistent://public/default/events-partition-0"]["storageSize"] == 0
    run(runner, data, "topics", "create", "one")
    refused = run(runner, data, "topics", "partitioned-stats", "one", code=2)
    assert one_line(refused.output) == ("Error: partitioned topic public/default/one does not exist "
                                        "(public/default/one is non-partitioned)")
