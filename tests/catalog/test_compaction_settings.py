"""Kafka's compaction settings of a topic (issue 29): cleanup_policy, min/max_compaction_lag, delete_retention and
min_cleanable_dirty_ratio, with Kafka's defaults and checks, set at create_topic, by set_config and as the
defaults of seglog.open or broker.conf; each refusal names the setting and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import seglog
from seglog.errors import ConfigFileError, InvalidArgumentError

KAFKA_DEFAULTS = {"cleanupPolicy": "delete", "minCompactionLagMs": 0, "maxCompactionLagMs": None,
                  "deleteRetentionMs": 86_400_000, "minCleanableDirtyRatio": 0.5}


def compaction_settings(config: dict) -> dict:
    return {name: config[name] for name in KAFKA_DEFAULTS}


def test_kafka_defaults_and_admin_names(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        topic = log.create_topic("plain")
        assert compaction_settings(log.admin.topics.get_config("plain")) == KAFKA_DEFAULTS
        assert (topic.config.cleanup_policy, topic.config.compacted) == ("delete", False)
        described = log.admin.topics.describe("plain")
        assert compaction_settings(described) == KAFKA_DEFAULTS


@pytest.mark.parametrize(("given", "kept"), [
    ("compact", "compact"), ("delete", "delete"), ("compact,delete", "compact,delete"),
    ("delete,compact", "compact,delete"), ("compact , delete", "compact,delete"), (" compact", "compact"),
    ("compact,compact", "compact"), (["delete", "compact"], "compact,delete"), (("compact",), "compact"),
])
def test_cleanup_policy_is_kafkas_list_kept_in_one_form(tmp_path: Path, given, kept) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        topic = log.create_topic("t", cleanup_policy=given)
        assert topic.config.cleanup_policy == kept
        assert topic.config.compacted is ("compact" in kept)
        assert log.admin.topics.get_config("t")["cleanupPolicy"] == kept
    with seglog.open(tmp_path / "data", background=False) as log:  # as stored, read back
        assert log.topic("t").config.cleanup_policy == kept


@pytest.mark.parametrize(("given", "detail"), [
    ("COMPACT", "'COMPACT' is neither 'compact' nor 'delete'"),  # Kafka's check is case-sensitive
    ("Delete", "'Delete' is neither"), ("compacted", "'compacted' is neither"), ("", "it is empty"),
    ("compact,", "it has an empty entry"), ("compact;delete", "'compact;delete' is neither"),
    (["compact", 1], None), (5, None), (None, None),
])
def test_cleanup_policy_refused_names_the_accepted_forms(tmp_path: Path, given, detail) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        with pytest.raises(InvalidArgumentError) as refused:
            log.create_topic("t", cleanup_policy=given)
        assert refused.value.argument == "cleanup_policy"
        assert "'delete', 'compact' or 'compact,delete'" in str(refused.value)
        if detail is not None:
            assert detail in str(refused.value)
        assert log.admin.topics.list() == []  # nothing created


def test_durations_follow_the_unit_rule(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        log.create_topic("t", cleanup_policy="compact", min_compaction_lag="1h", max_compaction_lag="7 days",
                         delete_retention="30m", min_cleanable_dirty_ratio=0.1)
        assert compaction_settings(log.admin.topics.get_config("t")) == {
            "cleanupPolicy": "compact", "minCompactionLagMs": 3_600_000, "maxCompactionLagMs": 604_800_000,
            "deleteRetentionMs": 1_800_000, "minCleanableDirtyRatio": 0.1}
        # a bare number other than 0 would be ms to Kafka (min.compaction.lag.ms) and seconds to pulsar-admin
        for setting in ("min_compaction_lag", "max_compaction_lag", "delete_retention"):
            with pytest.raises(InvalidArgumentError, match="a bare number is ambiguous") as refused:
                log.admin.topics.set_config("t", **{setting: 3600})
            assert refused.value.argument == setting
        log.admin.topics.set_config("t", min_compaction_lag=0, delete_retention="0")  # 0 needs no unit
        log.admin.topics.set_config("t", max_compaction_lag=-1)  # no bound, Kafka's Long.MAX_VALUE
        config = log.admin.topics.get_config("t")
        assert (config["minCompactionLagMs"], config["deleteRetentionMs"], config["maxCompactionLagMs"]) == (0, 0, None)


def test_max_compaction_lag_is_at_least_1_ms(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        log.create_topic("t", max_compaction_lag="1d")
        with pytest.raises(InvalidArgumentError, match="a duration greater than 0") as refused:
            log.admin.topics.set_config("t", max_compaction_lag=0)  # Kafka: atLeast(1)
        assert refused.value.argument == "max_compaction_lag"
        assert log.admin.topics.get_config("t")["maxCompactionLagMs"] == 86_400_000


def test_min_compaction_lag_above_max_is_refused_whichever_changes(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        with pytest.raises(InvalidArgumentError, match=r"at most max_compaction_lag \(2h\)"):
            log.create_topic("t", min_compaction_lag="3h", max_compaction_lag="2h")
        assert log.admin.topics.list() == []
        log.create_topic("t", min_compaction_lag="1h", max_compaction_lag="2h")
        with pytest.raises(InvalidArgumentError, match=r"at most max_compaction_lag \(2h\)") as raised:
            log.admin.topics.set_config("t", min_compaction_lag="3h")
        assert raised.value.argument == "min_compaction_lag"
        assert "Kafka refuses min.compaction.lag.ms > max.compaction.lag.ms" in str(raised.value)
        with pytest.raises(InvalidArgumentError, match=r"at least min_compaction_lag \(1h\)") as raised:
            log.admin.topics.set_config("t", max_compaction_lag="30m")
        assert raised.value.argument == "max_compaction_lag"
        log.admin.topics.set_config("t", min_compaction_lag="2h")  # equal is accepted, as in Kafka
        config = log.admin.topics.get_config("t")
        assert (config["minCompactionLagMs"], config["maxCompactionLagMs"]) == (7_200_000, 7_200_000)


@pytest.mark.parametrize("given", [1.5, -0.1, "half", True, float("nan"), None, "1.01"])
def test_min_cleanable_dirty_ratio_is_from_0_to_1(tmp_path: Path, given) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        log.create_topic("t", cleanup_policy="compact")
        with pytest.raises(InvalidArgumentError, match="a number from 0 to 1") as refused:
            log.admin.topics.set_config("t", min_cleanable_dirty_ratio=given, cleanup_policy="delete")
        assert refused.value.argument == "min_cleanable_dirty_ratio"
        # nothing half-applied: the cleanup policy given beside it is not changed either
        assert compaction_settings(log.admin.topics.get_config("t")) == {**KAFKA_DEFAULTS, "cleanupPolicy": "compact"}
        for accepted, kept in ((0, 0.0), (1, 1.0), ("0.25", 0.25), (0.75, 0.75)):
            log.admin.topics.set_config("t", min_cleanable_dirty_ratio=accepted)
            assert log.admin.topics.get_config("t")["minCleanableDirtyRatio"] == kept


def test_defaults_of_every_topic_from_open_and_broker_conf(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "broker.conf").write_text("cleanup_policy=compact\nmin_cleanable_dirty_ratio=0.2\n"
                                      "delete_retention=2h\nmax_compaction_lag=-1\n")
    with seglog.open(data, background=False, min_compaction_lag="5m") as log:
        log.create_topic("t")
        log.create_topic("kept", cleanup_policy="delete")
        assert compaction_settings(log.admin.topics.get_config("t")) == {
            "cleanupPolicy": "compact", "minCompactionLagMs": 300_000, "maxCompactionLagMs": None,
            "deleteRetentionMs": 7_200_000, "minCleanableDirtyRatio": 0.2}
        assert log.admin.topics.get_config("kept")["cleanupPolicy"] == "delete"
    (data / "broker.conf").write_text("# compaction\ncleanup_policy=COMPACT\n")
    with pytest.raises(ConfigFileError) as refused:
        seglog.open(data, background=False)
    assert "line 2" in str(refused.value) and "cleanup_policy" in str(refused.value)
