"""A topic's retention_time / max_partition_size act as its retention for acknowledged data; where they are not
whole minutes or MB (Pulsar's units: '10 GB' is 10**10 bytes, 9536.74 MB), stats, explain_retention and the
applied retention give the exact figure beside Pulsar's rounded-up one (and only there: a figure in whole units
reads as Pulsar's does)."""

import pytest

TEN_GB = 10**10
LEVEL = "topic (retention_time / max_partition_size)"


@pytest.fixture
def topic(log):
    return log.create_topic("t", max_partition_size="10 GB", retention_time="90s")


def test_stats_show_the_exact_retention_beside_pulsars_units(topic):
    assert topic.stats()["policies"]["retention"] == {
        "retentionTimeInMinutes": 2, "retentionSizeInMB": 9537,  # rounded up: never read as less
        "retentionTimeInMs": 90_000, "retentionSizeInBytes": TEN_GB, "level": LEVEL}


def test_explain_retention_and_the_admin_api_show_it_too(log, topic):
    expected = {"retentionTimeInMs": 90_000, "retentionSizeInBytes": TEN_GB}
    for shown in (topic.explain_retention()["policies"]["retention"],
                  log.admin.topics.stats("t")["policies"]["retention"],
                  log.admin.topics.describe("t")["policies"]["retention"]):
        assert expected.items() <= shown.items()


def test_a_retention_policy_in_whole_units_reads_the_same_both_ways(log):
    log.admin.namespaces.set_retention("public/default", size="10G", time="3h")
    retention = log.create_topic("t").stats()["policies"]["retention"]
    assert retention == {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10 * 1024, "level": "namespace"}


def test_only_the_figure_that_is_not_whole_gets_its_exact_one(log):
    retention = log.create_topic("t", max_partition_size="10 GB").stats()["policies"]["retention"]
    assert retention == {"retentionTimeInMinutes": -1, "retentionSizeInMB": 9537, "retentionSizeInBytes": TEN_GB,
                         "level": LEVEL}
