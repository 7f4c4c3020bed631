"""Pulsar's compaction_threshold policy (issue 29): the backlog in bytes that starts a compaction, set on a
namespace or a topic (the topic's wins, the namespace's over broker.conf's brokerServiceCompactionThresholdInBytes,
0 by default: off), read back exactly, and refused with one line naming it when it is not a size of 0 or more."""

from __future__ import annotations

from pathlib import Path

import pytest

import seglog
from seglog.catalog.policies import InForce
from seglog.errors import ConfigFileError, InvalidArgumentError, NotFoundError, TopicNotFoundError


def in_force(log: seglog.Log, topic: str) -> tuple[int, str]:
    threshold = log.admin.topics.describe(topic)["policiesInForce"]["compactionThreshold"]
    return threshold["value"], threshold["level"]


def test_topic_over_namespace_over_broker(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        log.create_topic("acme/billing/ledger")
        namespaces, topics = log.admin.namespaces, log.admin.topics
        assert (namespaces.get_compaction_threshold("acme/billing"), topics.get_compaction_threshold(
            "acme/billing/ledger")) == (None, None)
        assert in_force(log, "acme/billing/ledger") == (0, "broker")  # Pulsar's default: off

        namespaces.set_compaction_threshold("acme/billing", "10M")  # pulsar-admin's 10M: 10 MiB
        assert namespaces.get_compaction_threshold("acme/billing") == 10 << 20
        assert namespaces.policies("acme/billing")["compaction_threshold"] == 10 << 20
        assert in_force(log, "acme/billing/ledger") == (10 << 20, "namespace")

        topics.set_compaction_threshold("acme/billing/ledger", 1_000_000)  # a bare number is bytes
        assert topics.get_compaction_threshold("acme/billing/ledger") == 1_000_000
        assert in_force(log, "acme/billing/ledger") == (1_000_000, "topic")
        topics.set_compaction_threshold("acme/billing/ledger", 0)  # 0 at the topic: off there, whatever is above
        assert in_force(log, "acme/billing/ledger") == (0, "topic")
        assert log.topic("acme/billing/ledger").policies().compaction_threshold == InForce(0, "topic")

    with seglog.open(tmp_path / "data", background=False) as log:  # kept in the metadata
        assert log.admin.topics.get_compaction_threshold("acme/billing/ledger") == 0
        log.admin.topics.remove_compaction_threshold("acme/billing/ledger")
        assert in_force(log, "acme/billing/ledger") == (10 << 20, "namespace")
        log.admin.namespaces.remove_compaction_threshold("acme/billing")
        assert log.admin.namespaces.get_compaction_threshold("acme/billing") is None
        assert in_force(log, "acme/billing/ledger") == (0, "broker")


def test_broker_default_from_broker_conf_by_pulsars_name(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "broker.conf").write_text("brokerServiceCompactionThresholdInBytes=104857600\n")
    with seglog.open(data, background=False) as log:
        log.create_topic("t")
        assert in_force(log, "t") == (100 << 20, "broker")
    with seglog.open(data, background=False, broker_service_compaction_threshold_in_bytes=0) as log:
        assert in_force(log, "t") == (0, "broker")
    (data / "broker.conf").write_text("\nbrokerServiceCompactionThresholdInBytes=-1\n")
    with pytest.raises(ConfigFileError) as refused:
        seglog.open(data, background=False)
    assert "line 2" in str(refused.value) and "bytes as an int, 0 for no compaction by size" in str(refused.value)


@pytest.mark.parametrize("given", [-1, "-5", "1.5", "10 parsecs", True, None, 2.0, ""])
def test_refused_thresholds_name_the_policy_and_change_nothing(tmp_path: Path, given) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        log.create_topic("t")
        log.admin.namespaces.set_compaction_threshold("public/default", "1G")
        log.admin.topics.set_compaction_threshold("t", "64 MiB")
        for level, name in ((log.admin.namespaces, "public/default"), (log.admin.topics, "t")):
            with pytest.raises(InvalidArgumentError, match="0 for no compaction by size") as refused:
                level.set_compaction_threshold(name, given)
            assert refused.value.argument == "compaction threshold"
        assert log.admin.namespaces.get_compaction_threshold("public/default") == 1 << 30
        assert log.admin.topics.get_compaction_threshold("t") == 64 << 20


def test_a_missing_namespace_or_topic_is_not_found(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        with pytest.raises(NotFoundError):
            log.admin.namespaces.set_compaction_threshold("public/nope", "1M")
        with pytest.raises(TopicNotFoundError):
            log.admin.topics.set_compaction_threshold("nope", "1M")
