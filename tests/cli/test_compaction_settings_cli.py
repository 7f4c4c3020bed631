"""`seglog topics create|update|describe` with Kafka's compaction settings (issue 29): the flags, the values shown,
and one line naming the flag for each refused value, nothing changed after it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import seglog
from helpers_cli import in_a_terminal, one_line, run


def test_create_update_and_describe(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "table", "--cleanup-policy", "delete,compact", "--min-compaction-lag", "1h",
        "--max-compaction-lag", "7d", "--delete-retention", "12h", "--min-cleanable-dirty-ratio", "0.1")
    with seglog.open(data, background=False) as log:
        config = log.topic("table").config
        assert (config.cleanup_policy, config.min_compaction_lag, config.max_compaction_lag, config.delete_retention,
                config.min_cleanable_dirty_ratio) == ("compact,delete", 3_600_000, 604_800_000, 43_200_000, 0.1)
    described = one_line(in_a_terminal(runner, data, "topics", "describe", "table"))
    for row in ("Cleanup policy compact,delete", "Min compaction lag 1h", "Max compaction lag 7days",
                "Delete retention 12h", "Min cleanable dirty ratio 0.1"):
        assert row in described

    updated = run(runner, data, "topics", "update", "table", "--cleanup-policy", "compact", "--max-compaction-lag",
                  "-1", "--delete-retention", "0").output
    assert "Updated topic public/default/table: cleanup-policy compact, max-compaction-lag -1, delete-retention 0" \
        in one_line(updated)
    as_json = json.loads(run(runner, data, "topics", "describe", "table", "--json").output)
    assert {k: as_json[k] for k in ("cleanupPolicy", "maxCompactionLagMs", "deleteRetentionMs")} == {
        "cleanupPolicy": "compact", "maxCompactionLagMs": None, "deleteRetentionMs": 0}
    described = one_line(in_a_terminal(runner, data, "topics", "describe", "table"))
    assert "Max compaction lag off" in described and "Delete retention 0s" in described

    run(runner, data, "topics", "create", "plain")
    described = one_line(in_a_terminal(runner, data, "topics", "describe", "plain"))
    for row in ("Cleanup policy delete", "Min compaction lag 0s", "Max compaction lag off", "Delete retention 1day",
                "Min cleanable dirty ratio 0.5"):
        assert row in described


def test_refused_values_name_the_flag_and_change_nothing(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "table", "--cleanup-policy", "compact", "--max-compaction-lag", "2h")
    for args, said in (
            (("--cleanup-policy", "Compact"), "Invalid value for '--cleanup-policy': 'Compact': 'Compact' is neither "
                                              "'compact' nor 'delete'; accepted: 'delete', 'compact' or "
                                              "'compact,delete'"),
            (("--min-compaction-lag", "3600"), "Invalid value for '--min-compaction-lag': '3600': a bare number is "
                                               "ambiguous"),
            (("--min-compaction-lag", "3h"), "Invalid value for '--min-compaction-lag': '3h': Kafka refuses "
                                             "min.compaction.lag.ms > max.compaction.lag.ms"),
            (("--max-compaction-lag", "0"), "Invalid value for '--max-compaction-lag': '0'; accepted: a duration "
                                            "greater than 0"),
            (("--min-cleanable-dirty-ratio", "2", "--cleanup-policy", "delete"),
             "Invalid value for '--min-cleanable-dirty-ratio': '2'; accepted: a number from 0 to 1")):
        result = run(runner, data, "topics", "update", "table", *args, code=2)
        assert said in one_line(result.output), result.output
        assert "Traceback" not in result.output
    with seglog.open(data, background=False) as log:
        config = log.admin.topics.get_config("table")
    assert (config["cleanupPolicy"], config["minCompactionLagMs"], config["maxCompactionLagMs"],
            config["minCleanableDirtyRatio"]) == ("compact", 0, 7_200_000, 0.5)
    refused = run(runner, data, "topics", "create", "other", "--cleanup-policy", "", code=2)
    assert "Invalid value for '--cleanup-policy': '': it is empty" in one_line(refused.output)
    with seglog.open(data, background=False) as log:
        assert log.admin.topics.list() == ["public/default/table"]


def test_compaction_threshold_commands_at_both_levels(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topics", "create", "acme/billing/ledger")
    said = run(runner, data, "namespaces", "set-compaction-threshold", "acme/billing", "--threshold", "10M").output
    assert "Set compaction threshold of acme/billing: 10 MiB" in said
    assert run(runner, data, "namespaces", "get-compaction-threshold", "acme/billing").output == "10485760\n"
    assert run(runner, data, "topics", "get-compaction-threshold", "acme/billing/ledger").output == "null\n"
    described = one_line(in_a_terminal(runner, data, "topics", "describe", "acme/billing/ledger"))
    assert "Compaction threshold 10 MiB (namespace)" in described

    said = run(runner, data, "topics", "set-compaction-threshold", "acme/billing/ledger", "-t", "0").output
    assert "Set compaction threshold of acme/billing/ledger: 0 (no compaction by size)" in said
    got = run(runner, data, "topics", "get-compaction-threshold", "acme/billing/ledger")
    assert got.stdout == "0\n" and "0: no compaction is started by the backlog's size" in got.stderr
    described = one_line(in_a_terminal(runner, data, "topics", "describe", "acme/billing/ledger"))
    assert "Compaction threshold off (topic)" in described

    refused = run(runner, data, "topics", "set-compaction-threshold", "acme/billing/ledger", "-t", "-5", code=2)
    assert ("Invalid value for '--threshold' / '-t': invalid compaction threshold '-5': it is negative" in
            one_line(refused.output))
    assert "0 for no compaction by size" in one_line(refused.output)
    assert run(runner, data, "topics", "get-compaction-threshold", "acme/billing/ledger").stdout == "0\n"

    assert "Removed compaction threshold of acme/billing/ledger" in run(
        runner, data, "topics", "remove-compaction-threshold", "acme/billing/ledger").output
    run(runner, data, "namespaces", "remove-compaction-threshold", "acme/billing")
    described = one_line(in_a_terminal(runner, data, "topics", "describe", "acme/billing/ledger"))
    assert "Compaction threshold off (broker)" in described
