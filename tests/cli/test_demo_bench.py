"""`seglog demo` and `seglog bench`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import one_line, run

OPERATIONS = ["send_batch", "send()", "baseline: f.write", "read_batch", "iterate Messages", "baseline: f.read"]


def test_demo_small(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "demo", "--messages", "2000", "--size", "50")
    for operation in OPERATIONS:
        assert operation in result.stdout
    for column in ("Messages/s", "MB/s", "vs baseline", "1st round", "Best of 3 rounds"):
        assert column in result.stdout
    assert "now holds 12,000 messages" in result.stdout  # twice 2,000 in each of 3 rounds
    result = run(runner, data, "demo", "--messages", "2000", "--size", "50")  # reuses the topic
    assert "now holds 24,000 messages" in result.stdout
    assert [t["name"] for t in json.loads(run(runner, data, "topic", "list", "--json").output)] == [
        "public/default/demo"]
    assert run(runner, data, "consume", "demo", "-n", "1", "--format", "json").stdout.count("\n") == 1
    assert not [p for p in data.iterdir() if p.name.startswith(".throughput")]  # baseline file removed


def test_bench_json_with_partitions(runner: CliRunner, data: Path) -> None:
    result = run(runner, data, "bench", "--messages", "3000", "--size", "1 KiB", "--partitions", "3",
                 "--chunk", "1000", "--json")
    report = json.loads(result.stdout)
    assert (report["messages"], report["size"], report["partitions"], report["rounds"]) == (3000, 1024, 3, 3)
    assert [r["operation"] for r in report["results"]] == OPERATIONS
    for r in report["results"]:
        assert r["messages"] == (6000 if r["kind"] == "read" and not r["baseline"] else 3000)
        assert r["seconds"] > 0 and r["messages_per_second"] > 0 and r["ratio_to_baseline"] > 0
        assert r["ratio_to_baseline"] == 1.0 if r["baseline"] else True
    assert json.loads(run(runner, data, "topic", "list", "--json").output) == []  # scratch topic deleted


def test_bench_reports_the_best_round_and_the_first_apart(runner: CliRunner, data: Path) -> None:
    # The figures are warm ones: the best of --rounds rounds, each write round writing its own messages and
    # each read round reading the last write round's; the first round, which also pays once-per-process
    # work, is reported beside. No timing is asserted: only that both are there and which is which.
    result = run(runner, data, "bench", "--messages", "2000", "--chunk", "500", "--rounds", "4", "--keep",
                 "--json")
    report = json.loads(result.stdout)
    assert report["rounds"] == 4 and report["chunk"] == 500
    for r in report["results"]:
        assert r["seconds"] <= r["first_round_seconds"]
        assert r["messages_per_second"] == pytest.approx(r["messages"] / r["seconds"])
        assert r["first_round_messages_per_second"] == pytest.approx(r["messages"] / r["first_round_seconds"])
    with seglog.open(data) as log:
        assert log.topic(report["topic"]).end_offset() == 4 * 2 * 2000  # two writes in each of 4 rounds


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

