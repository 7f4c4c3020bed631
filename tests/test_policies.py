"""What users meet in the lifecycle settings (issue 10): one meaning for a bare number, retention kept and
reported exactly, backlog quotas that hold at their limit, broker.conf errors that name the line, and
Pulsar's camelCase in every admin and stats answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from seglog.cli import main
from seglog.errors import InvalidArgumentError


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"SEGLOG_DATA": None, "COLUMNS": "200", "NO_COLOR": "1"})


def run(runner: CliRunner, data: Path, *args: str, code: int = 0) -> str:
    """`seglog --data DATA ARGS`: its output, after checking the exit code and that no exception escaped."""
    result = runner.invoke(main, ["--data", str(data), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, result.output
    return result.output


def one_line(text: str) -> str:
    return " ".join(text.split())


# --- 2. a bare number means one unit for one kind of setting, or is refused ----------------------------------

@pytest.mark.parametrize(("setting", "value"), [
    ("retention_time", 3600), ("retention_time", "3600"), ("segment_roll_time", 60_000), ("fsync", 100),
    ("fsync", "100"),
])
def test_a_topic_duration_given_as_a_bare_number_is_refused(log, setting: str, value: object) -> None:
    """Kafka's retention.ms reads 3600 as 3.6 s, pulsar-admin's --time as an hour: seglog asks for the unit."""
    with pytest.raises(InvalidArgumentError, match=rf"^invalid {setting} {value!r}: a bare number is ambiguous "
                                                   r"here .*give its unit, e.g. '3600s', '1h' or '500ms'"):
        log.create_topic("t", **{setting: value})
    assert log.list_topics() == []


@pytest.mark.parametrize(("setting", "value", "expected"), [
    ("retention_time", "1h", 3_600_000), ("retention_time", "3600s", 3_600_000), ("retention_time", 0, None),
    ("retention_time", -1, None), ("segment_roll_time", "1h 30m", 5_400_000), ("fsync", "100ms", "100ms"),
    ("fsync", 0, "always"),
])
def test_a_topic_duration_with_its_unit_or_zero_is_accepted(log, setting: str, value: object,
                                                            expected: object) -> None:
    assert getattr(log.create_topic("t", **{setting: value}).config, setting) == expected


@pytest.mark.parametrize("setting", ["maintenance_interval", "cursor_persist_interval"])
def test_a_broker_interval_given_as_a_bare_number_is_refused(tmp_path: Path, setting: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"^invalid {setting} 60000: a bare number is ambiguous"):
        seglog.open(tmp_path / "data", **{setting: 60000})
    with seglog.open(tmp_path / "data", **{setting: "1 min"}) as log:
        assert getattr(log.config, setting) == 60_000


def test_policy_durations_read_a_bare_number_as_seconds_as_pulsar_admin_does(log) -> None:
    admin = log.admin.namespaces
    admin.set_retention("public/default", time=3600, size=-1)
    admin.set_message_ttl("public/default", "120")
    admin.set_backlog_quota("public/default", limit_time=600, type="message_age", policy="producer_exception")
    assert admin.get_retention("public/default")["retentionTimeInMinutes"] == 60
    assert admin.get_message_ttl("public/default") == 120
    assert admin.get_backlog_quotas("public/default")["message_age"]["limitTime"] == 600


def test_a_topic_stored_by_an_earlier_version_keeps_its_durations(tmp_path: Path) -> None:
    """Topics keep their settings as parsed (ms as ints): they are read back as they are, not as input."""
    with seglog.open(tmp_path) as log:
        log.create_topic("t", retention_time="1h", segment_roll_time="2h", fsync="100ms")
        log.admin.topics.set_config("t", max_partition_size="2 GiB")
    with seglog.open(tmp_path) as log:
        config = log.topic("t").config
        assert (config.retention_time, config.segment_roll_time, config.fsync) == (3_600_000, 7_200_000, "100ms")
        assert config.max_partition_size == 2 << 30


@pytest.mark.parametrize("option", ["--retention-time", "--segment-roll-time"])
def test_cli_topic_create_refuses_a_bare_number_of_time(runner: CliRunner, tmp_path: Path, option: str) -> None:
    output = run(runner, tmp_path / "data", "topic", "create", "t", option, "3600", code=2)
    assert f"Error: Invalid value for '{option}': invalid " in one_line(output)
    assert "a bare number is ambiguous here" in one_line(output) and "Traceback" not in output
    assert not (tmp_path / "data").exists()
