"""What users meet in the lifecycle settings (issue 10): one meaning for a bare number, retention kept and
reported exactly, backlog quotas that hold at their limit, broker.conf errors that name the line, and
Pulsar's camelCase in every admin and stats answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from seglog.catalog.config import BrokerConfig
from seglog.catalog.policies import InForce
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
    assert f"Error: Invalid value for '{option}': '3600': " in one_line(output)
    assert "a bare number is ambiguous here" in one_line(output) and "Traceback" not in output
    assert not (tmp_path / "data").exists()


# --- 1. retention kept and reported exactly: what would not read back as given is refused --------------------

@pytest.mark.parametrize(("size", "time", "detail"), [
    (10, 10, "10s is not a whole number of minutes (retentionTimeInMinutes)"),
    ("10M", 90, "1m 30s is not a whole number of minutes"),
    ("10M", "1h 30s", "1h 30s is not a whole number of minutes"),
    (10, "1h", "10 B is not a whole number of MB (retentionSizeInMB, 1 MB = 1 MiB = 1048576 bytes)"),
    ("2 Ki", -1, "2 KiB is not a whole number of MB"),
    ("1 GB", "7 days", "1 GB is not a whole number of MB"),
])
def test_a_retention_that_would_not_read_back_as_given_is_refused(log, size: object, time: object,
                                                                  detail: str) -> None:
    log.admin.namespaces.set_retention("public/default", size="1G", time="1d")
    with pytest.raises(InvalidArgumentError, match="^invalid retention (size|time) .*" + detail.replace("(", r"\(")
                       .replace(")", r"\)") + ".*; accepted: whole "):
        log.admin.namespaces.set_retention("public/default", size=size, time=time)
    assert log.admin.namespaces.get_retention("public/default") == {"retentionTimeInMinutes": 1440,
                                                                    "retentionSizeInMB": 1024}


@pytest.mark.parametrize(("size", "time", "refusal"), [
    ("10G", 0, "invalid retention time 0: a limit of 0 with the other limit set (size 10G) is refused"),
    (0, "3h", "invalid retention size 0: a limit of 0 with the other limit set (time 3h) is refused"),
    ("0", 3600, "invalid retention size '0': a limit of 0 with the other limit set (time 3600 seconds) is refused"),
    (10 << 30, "0", "invalid retention time '0': a limit of 0 with the other limit set (size 10737418240 bytes)"),
    (0, -1, "invalid retention size 0: a limit of 0 with the other limit set (time -1) is refused"),
])
def test_a_limit_of_0_with_the_other_set_names_the_0_and_the_other_as_typed(log, size: object, time: object,
                                                                             refusal: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        log.admin.namespaces.set_retention("public/default", size=size, time=time)
    assert str(refused.value).startswith(refusal)
    assert str(refused.value).endswith("; accepted: both limits 0 (keep nothing), or neither: -1 (no limit) or a "
                                       "positive value for each")
    assert log.admin.namespaces.get_retention("public/default") is None


@pytest.mark.parametrize(("size", "time", "expected"), [
    ("10M", 600, (10, 10)), ("1.5G", "1.5h", (1536, 90)), (1 << 20, "1m", (1, 1)), (-1, "7 days", (-1, 10080)),
    (0, 0, (0, 0)),
])
def test_a_retention_in_whole_units_reads_back_exactly(log, size: object, time: object,
                                                       expected: tuple[int, int]) -> None:
    log.admin.namespaces.set_retention("public/default", size=size, time=time)
    got = log.admin.namespaces.get_retention("public/default")
    assert (got["retentionSizeInMB"], got["retentionTimeInMinutes"]) == expected


@pytest.mark.parametrize(("setter", "value", "detail"), [
    ("set_message_ttl", "500ms", "500ms is not a whole number of seconds"),
    ("set_message_ttl", "1.5s", "1s 500ms is not a whole number of seconds"),
    ("set_backlog_quota", "1500ms", "1s 500ms is not a whole number of seconds (limitTime)"),
])
def test_a_ttl_or_age_limit_that_would_not_read_back_in_seconds_is_refused(log, setter: str, value: str,
                                                                          detail: str) -> None:
    admin = log.admin.namespaces
    call = (lambda v: admin.set_message_ttl("public/default", v)) if setter == "set_message_ttl" else (
        lambda v: admin.set_backlog_quota("public/default", limit_time=v, type="message_age",
                                          policy="producer_exception"))
    with pytest.raises(InvalidArgumentError, match=detail.replace("(", r"\(").replace(")", r"\)")):
        call(value)
    assert admin.get_message_ttl("public/default") is None and admin.get_backlog_quotas("public/default") == {}


def test_cli_set_retention_refuses_what_would_read_back_as_keep_nothing(runner: CliRunner, tmp_path: Path) -> None:
    """pulsar-admin stores --size 10 --time 10 as 0 MB and 0 minutes: keep nothing. seglog refuses it."""
    data = tmp_path / "data"
    run(runner, data, "namespaces", "create", "public/ns")
    output = one_line(run(runner, data, "namespaces", "set-retention", "public/ns", "--size", "10", "--time", "10",
                          code=2))
    assert "Error: Invalid value for '--time' / '-t': invalid retention time '10': 10s is not a whole number of " \
           "minutes" in output and "Traceback" not in output
    assert run(runner, data, "namespaces", "get-retention", "public/ns") == "null\n"


def test_cli_set_retention_names_the_limit_that_is_0_and_the_other_as_typed(runner: CliRunner,
                                                                           tmp_path: Path) -> None:
    data = tmp_path / "data"
    run(runner, data, "namespaces", "create", "public/ns")
    output = one_line(run(runner, data, "namespaces", "set-retention", "public/ns", "--size", "10G", "--time", "0",
                          code=2))
    assert "Error: Invalid value for '--time' / '-t': invalid retention time '0': a limit of 0 with the other limit " \
           "set (size 10G) is refused, as in Pulsar; accepted: both limits 0 (keep nothing)" in output


@pytest.mark.parametrize(("segment_size", "shown"), [("64 MiB", "64 MiB"), ("64MB", "64MB"),
                                                     (1 << 26, "67108864 bytes")])
def test_the_segment_size_a_max_partition_size_is_below_is_shown_as_typed(log, segment_size: object,
                                                                          shown: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        log.create_topic("t", segment_size=segment_size, max_partition_size="10M")
    assert str(refused.value).endswith(f"accepted: a size of at least the segment_size ({shown})")
    log.create_topic("t", segment_size="64 MiB")
    with pytest.raises(InvalidArgumentError) as refused:  # (set before: in the unit that shows it shortest)
        log.admin.topics.set_config("t", max_partition_size="1M")
    assert str(refused.value).endswith("accepted: a size of at least the segment_size (64 MiB)")


def test_fluvio_limits_acting_as_retention_are_reported_rounded_up_never_as_keep_nothing(log) -> None:
    topic = log.create_topic("t", retention_time="90s", max_partition_size="1500 KiB", segment_size="1 MiB")
    retention = topic.stats()["policies"]["retention"]
    assert (retention["retentionTimeInMinutes"], retention["retentionSizeInMB"]) == (2, 2)
    assert (topic.config.retention_time, topic.config.max_partition_size) == (90_000, 1500 << 10)  # kept exactly


# --- 4. broker.conf: Pulsar's names, and errors that name the file and the line ------------------------------

def test_broker_conf_takes_pulsars_names(tmp_path: Path) -> None:
    (tmp_path / "broker.conf").write_text(
        "# as in Pulsar's conf/broker.conf\ndefaultRetentionTimeInMinutes=60\ndefaultRetentionSizeInMB=-1\n"
        "ttlDurationDefaultInSeconds=120\nbacklogQuotaDefaultLimitBytes=1048576\nbacklogQuotaDefaultLimitSecond=600\n"
        "backlogQuotaDefaultRetentionPolicy=producer_exception\n")
    with seglog.open(tmp_path) as log:
        policies = log.create_topic("t").stats()["policies"]
    assert policies["retention"] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1, "level": "broker"}
    assert policies["messageTTLInSeconds"] == {"value": 120, "level": "broker"}
    assert policies["backlogQuotas"] == {
        "destination_storage": {"limit": 1 << 20, "policy": "producer_exception", "level": "broker"},
        "message_age": {"limitTime": 600, "policy": "producer_exception", "level": "broker"}}


def test_broker_conf_takes_pulsars_replicated_subscription_settings(tmp_path: Path) -> None:
    default = BrokerConfig()
    assert (default.enable_replicated_subscriptions, default.replicated_subscriptions_snapshot_frequency_ms,
            default.replicated_subscriptions_snapshot_timeout_seconds,
            default.replicated_subscriptions_snapshot_max_cached_per_subscription) == (True, 1000, 30, 30)
    (tmp_path / "broker.conf").write_text(
        "enableReplicatedSubscriptions=false\nreplicatedSubscriptionsSnapshotFrequencyMillis=500\n"
        "replicatedSubscriptionsSnapshotTimeoutSeconds=60\nreplicatedSubscriptionsSnapshotMaxCachedPerSubscription=50\n")
    config = BrokerConfig.load(tmp_path, {})
    assert (config.enable_replicated_subscriptions, config.replicated_subscriptions_snapshot_frequency_ms,
            config.replicated_subscriptions_snapshot_timeout_seconds,
            config.replicated_subscriptions_snapshot_max_cached_per_subscription) == (False, 500, 60, 50)
    assert BrokerConfig.load(tmp_path, {"replicated_subscriptions_snapshot_max_cached_per_subscription": 3}
                             ).replicated_subscriptions_snapshot_max_cached_per_subscription == 3


def test_broker_conf_takes_pulsars_replication_producer_queue_size(tmp_path: Path) -> None:
    assert BrokerConfig().replication_producer_queue_size == 1000  # (Pulsar's default)
    (tmp_path / "broker.conf").write_text("replicationProducerQueueSize=5000\n")
    assert BrokerConfig.load(tmp_path, {}).replication_producer_queue_size == 5000


BAD_BROKER_CONF = [
    (b"verify_crc=true\nttl=\xff\xfe\n", "line 2", r"invalid line b'ttl=\\xff\\xfe': byte 0xff is not UTF-8"),
    (b"# Pulsar's\nclusterName=standalone\n", "line 2", "invalid broker setting 'clusterName'; accepted: "
                                                        "allowAutoTopicCreation, allowAutoTopicCreationType, "),
    (b"defaultRetentionSizeInMB=ten\n", "line 1", "invalid default_retention_size_mb 'ten'; accepted: MB as an int"),
    (b"\nsegment_roll_time=3600\n", "line 2", "invalid segment_roll_time '3600': a bare number is ambiguous"),
    (b"just some words\n", "line 1", "invalid line 'just some words'; accepted: UTF-8 text of 'name=value' lines"),
    (b"defaultRetentionTimeInMinutes=0\nverify_crc=true\ndefault_retention_size_mb=7\n", "lines 1 and 3",
     r"invalid retention time '0 minutes': a limit of 0 with the other limit set \(size 7 MiB\) is refused"),
    (b"allowAutoTopicCreation=yes\n", "line 1", "invalid allow_auto_topic_creation 'yes'; accepted: true or false"),
    (b"allowAutoTopicCreationType=sharded\n", "line 1",
     "invalid allow_auto_topic_creation_type 'sharded'; accepted: 'non-partitioned' or 'partitioned'"),
    (b"defaultNumPartitions=0\n", "line 1", "invalid default_num_partitions 0; accepted: a partition count of at "
                                           "least 1"),
    (b"enableReplicatedSubscriptions=on\n", "line 1",
     "invalid enable_replicated_subscriptions 'on'; accepted: true or false"),
    (b"replicationProducerQueueSize=0\n", "line 1",
     "invalid replication_producer_queue_size 0; accepted: messages as an int of at least 1"),
    (b"replicatedSubscriptionsSnapshotFrequencyMillis=0\n", "line 1",
     "invalid replicated_subscriptions_snapshot_frequency_ms 0; accepted: ms as an int of at least 1"),
    (b"replicatedSubscriptionsSnapshotFrequencyMillis=1s\n", "line 1",
     "invalid replicated_subscriptions_snapshot_frequency_ms '1s'; accepted: ms as an int of at least 1"),
    (b"replicatedSubscriptionsSnapshotTimeoutSeconds=-1\n", "line 1",
     "invalid replicated_subscriptions_snapshot_timeout_seconds -1; accepted: seconds as an int of at least 1"),
    (b"replicatedSubscriptionsSnapshotMaxCachedPerSubscription=2\n", "line 1",
     r"invalid replicated_subscriptions_snapshot_max_cached_per_subscription 2; accepted: an int of at least 3 \(a "
     "subscription's first and last snapshots are always kept\\)"),
]


@pytest.mark.parametrize(("content", "where", "reason"), BAD_BROKER_CONF)
def test_a_bad_broker_conf_is_refused_naming_the_file_and_the_line(tmp_path: Path, content: bytes, where: str,
                                                                   reason: str) -> None:
    (tmp_path / "broker.conf").write_bytes(content)
    with pytest.raises(InvalidArgumentError) as caught:
        seglog.open(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'broker.conf'}, {where}: ")
    assert re.search(reason, str(caught.value))


def test_a_keyword_of_open_overrides_a_bad_line_and_its_own_errors_name_no_file(tmp_path: Path) -> None:
    (tmp_path / "broker.conf").write_text("default_retention_size_mb=ten\n")
    with seglog.open(tmp_path, default_retention_size_mb=5):
        pass
    with pytest.raises(InvalidArgumentError, match="^invalid default_retention_size_mb 'five'; accepted: MB as an"):
        seglog.open(tmp_path, default_retention_size_mb="five")


@pytest.mark.parametrize(("content", "where", "reason"), BAD_BROKER_CONF)
def test_cli_reports_a_bad_broker_conf_in_one_line_and_check_lists_it(runner: CliRunner, tmp_path: Path,
                                                                       content: bytes, where: str,
                                                                       reason: str) -> None:
    data = tmp_path / "data"
    run(runner, data, "topic", "create", "t")
    (data / "broker.conf").write_bytes(content)
    output = run(runner, data, "topics", "get-retention", "t", code=1)  # the command is right, the file is not
    assert output.startswith(f"Error: {data / 'broker.conf'}, {where}: ") and output.count("\n") == 1
    assert "Usage:" not in output and "Traceback" not in output
    checked = run(runner, data, "check", code=1)
    assert f"{data / 'broker.conf'}: line {where.split()[1]}: " in checked and "1 problem found:" in checked
    assert "seglog repair" not in checked  # repair mends segments and indexes, not broker.conf


# --- 3. a backlog quota holds at its limit, in the bytes stats() reports ---------------------------------------

STORED = 184  # a 100-byte value stored alone in a batch: header, offsets, timestamp and padding included


@pytest.fixture
def quota_topic(log):
    """A topic under a 2 KiB producer_exception quota, with one subscription that acknowledges nothing."""
    log.admin.namespaces.set_backlog_quota("public/default", limit="2 KiB", policy="producer_exception")
    topic = log.create_topic("q")
    topic.subscribe("s", initial_position="earliest").close()
    return topic


@pytest.mark.parametrize("send", ["send and flush", "send_batch"])
def test_a_backlog_quota_refuses_the_send_that_would_reach_it(quota_topic, send: str) -> None:
    """Counted in the value's bytes, 20 sends of 100 bytes passed a 2 KiB quota with the backlog at 3,680."""
    with quota_topic.producer() as producer:
        def send_one() -> None:
            if send == "send_batch":
                producer.send_batch([b"x" * 100])
            else:
                producer.send(b"x" * 100)
                producer.flush()

        for count in range(1, 12):
            send_one()
            assert quota_topic.stats()["backlogSize"] == count * STORED
        with pytest.raises(seglog.errors.ProducerBlockedQuotaExceededError,
                           match=r"has a backlog of 2,024 bytes, and this send of 184 bytes would take it to "
                                 r"2,208, at or above the destination_storage limit of 2 KiB \(2,048 bytes\)"):
            send_one()
    stats = quota_topic.stats()
    assert (stats["backlogSize"], stats["backlogQuotaUsage"]["size"], quota_topic.end_offset()) == (2024, 2024, 11)


def test_queued_sends_count_once_written_and_never_pass_the_quota(quota_topic) -> None:
    """send() queues: its messages count what they would take alone until the quota is near, then the queue
    is written and the backlog counted from the index, as stats() counts it."""
    with quota_topic.producer(linger_ms="1h") as producer:  # only the quota check writes the queue
        backlogs = []
        with pytest.raises(seglog.errors.ProducerBlockedQuotaExceededError, match="backlog of 2,008 bytes"):
            while True:
                producer.send(b"x" * 100)
                backlogs.append(quota_topic.stats()["backlogSize"])
        producer.flush()
    assert backlogs == [0] * 11 + [1304] * 4 + [1824]  # 11 queued, then written as one batch of 1,304 bytes
    assert quota_topic.stats()["backlogSize"] == 2008 and quota_topic.end_offset() == 16
    assert 2008 + STORED >= 2048


def test_a_send_larger_than_the_quota_is_refused_even_without_a_backlog(quota_topic) -> None:
    with quota_topic.producer() as producer:
        with pytest.raises(seglog.errors.ProducerBlockedQuotaExceededError, match="backlog of 0 bytes"):
            producer.send_batch([b"x" * 100] * 30)
    assert quota_topic.end_offset() == 0


def test_eviction_makes_room_for_the_send_below_the_quota(log) -> None:
    log.admin.namespaces.set_backlog_quota("public/default", limit="2 KiB", policy="consumer_backlog_eviction")
    topic = log.create_topic("q")
    topic.subscribe("s", initial_position="earliest").close()
    with topic.producer() as producer:
        for _ in range(40):
            producer.send_batch([b"x" * 100] * 3)  # 392 bytes each
            assert topic.stats()["backlogSize"] < 2048
    assert topic.stats()["subscriptions"]["s"]["msgEvicted"] > 0


# --- 10. every key of the admin and stats JSON is camelCase, as Pulsar's ----------------------------------------

# Keys that are values rather than field names: Pulsar's backlog quota types, subscription and topic names.
NAMES = {"destination_storage", "message_age", "sub_1", "public/default/kept_t"}


def snake_case_keys(document: object, path: str = "") -> list[str]:
    """The paths of the keys in `document` that hold an underscore and are no names."""
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            if "_" in key and key not in NAMES:
                found.append(f"{path}/{key}")
            found += snake_case_keys(value, f"{path}/{key}")
    elif isinstance(document, list):
        for value in document:
            found += snake_case_keys(value, f"{path}[]")
    return found


@pytest.fixture
def busy_data(tmp_path: Path) -> Path:
    """A topic with every kind of policy and setting, a subscription and messages."""
    data = tmp_path / "data"
    with seglog.open(data) as log:
        admin = log.admin.namespaces
        admin.set_retention("public/default", size="1G", time="1h")
        admin.set_message_ttl("public/default", "1h")
        admin.set_backlog_quota("public/default", limit="1G", policy="producer_exception")
        admin.set_backlog_quota("public/default", limit_time="1h", type="message_age", policy="producer_exception")
        topic = log.create_topic("kept_t", retention_time="1h", max_partition_size="2G", segment_roll_time="1d",
                                 retention_min_timestamp=1)
        topic.subscribe("sub_1", initial_position="earliest").close()
        with topic.producer() as producer:
            producer.send_batch([b"x"] * 10)
    return data


def test_admin_and_stats_answers_are_camel_case(busy_data: Path) -> None:
    with seglog.open(busy_data) as log:
        topics, namespaces = log.admin.topics, log.admin.namespaces
        answers = {"stats": topics.stats("kept_t"), "internal_stats": topics.internal_stats("kept_t"),
                   "explain_retention": topics.explain_retention("kept_t"), "get_config": topics.get_config("kept_t"),
                   "get_retention": namespaces.get_retention("public/default"),
                   "get_backlog_quotas": namespaces.get_backlog_quotas("public/default"),
                   "tenants.get": log.admin.tenants.get("public")}
    assert {name: snake_case_keys(answer) for name, answer in answers.items()} == dict.fromkeys(answers, [])
    assert answers["explain_retention"]["retentionTimeMs"] == answers["get_config"]["retentionTimeMs"] == 3_600_000
    assert answers["get_config"]["maxPartitionSize"] == 2 << 30


@pytest.mark.parametrize("command", [["topics", "stats", "kept_t"], ["topics", "internal-stats", "kept_t"],
                                     ["topics", "explain", "kept_t", "--json"],
                                     ["topic", "describe", "kept_t", "--json"],
                                     ["topics", "get-backlog-quotas", "kept_t"],
                                     ["namespaces", "get-retention", "public/default"]])
def test_cli_json_answers_are_camel_case(runner: CliRunner, busy_data: Path, command: list[str]) -> None:
    assert snake_case_keys(json.loads(run(runner, busy_data, *command))) == []


def test_deduplication_is_set_per_namespace_and_topic_with_the_broker_default_below(tmp_path):
    with seglog.open(tmp_path / "off") as log:
        topic = log.create_topic("t")
        assert topic.policies().deduplication == InForce(False, "broker")
        log.admin.namespaces.set_deduplication("public/default", True)
        assert log.admin.namespaces.get_deduplication("public/default") is True
        assert topic.policies().deduplication == InForce(True, "namespace")
        log.admin.topics.set_deduplication("public/default/t", False)
        assert topic.policies().deduplication == InForce(False, "topic")
        log.admin.topics.remove_deduplication("public/default/t")
        log.admin.namespaces.remove_deduplication("public/default")
        assert log.admin.namespaces.get_deduplication("public/default") is None
        assert topic.policies().deduplication == InForce(False, "broker")
        with pytest.raises(InvalidArgumentError, match="True or False"):
            log.admin.namespaces.set_deduplication("public/default", "yes")
    (tmp_path / "on").mkdir()
    (tmp_path / "on" / "broker.conf").write_text("brokerDeduplicationEnabled=true\n")
    with seglog.open(tmp_path / "on") as log:
        assert log.create_topic("t").policies().deduplication == InForce(True, "broker")


# --- 5. topic auto-creation (seglog serve): broker.conf's rule and a namespace's override ---------------------

def test_auto_topic_creation_is_the_namespace_override_else_broker_conf(tmp_path: Path) -> None:
    (tmp_path / "broker.conf").write_text("allowAutoTopicCreationType=partitioned\ndefaultNumPartitions=4\n")
    with seglog.open(tmp_path) as log:
        namespaces = log.admin.namespaces
        assert namespaces.get_auto_topic_creation("public/default") is None
        namespaces.set_auto_topic_creation("public/default", False)
        assert namespaces.get_auto_topic_creation("public/default") == {"allowAutoTopicCreation": False,
                                                                        "topicType": "non-partitioned"}
    with seglog.open(tmp_path) as log:  # kept in the catalog
        namespaces = log.admin.namespaces
        assert namespaces.get_auto_topic_creation("public/default")["allowAutoTopicCreation"] is False
        namespaces.remove_auto_topic_creation("public/default")
        assert namespaces.get_auto_topic_creation("public/default") is None


@pytest.mark.parametrize(("arguments", "reason"), [
    ((True, "partitioned", None), "invalid defaultNumPartitions None; accepted: a partition count of at least 1"),
    ((True, "partitioned", -2), "invalid defaultNumPartitions -2; accepted: a partition count of at least 1"),
    ((True, "non-partitioned", 3), "invalid defaultNumPartitions 3; accepted: no partition count with topicType"),
    ((True, "global", None), "invalid topicType 'global'; accepted: 'non-partitioned' or 'partitioned'"),
    (("true", "partitioned", 2), "invalid allowAutoTopicCreation 'true'; accepted: true or false"),
])
def test_an_invalid_auto_topic_creation_is_refused_and_changes_nothing(log, arguments: tuple, reason: str) -> None:
    log.admin.namespaces.set_auto_topic_creation("public/default", True, "partitioned", 2)
    with pytest.raises(InvalidArgumentError, match=f"^{re.escape(reason)}"):
        log.admin.namespaces.set_auto_topic_creation("public/default", *arguments)
    assert log.admin.namespaces.get_auto_topic_creation("public/default") == {
        "allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 2}
