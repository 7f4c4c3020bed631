"""`seglog check`, `repair`, `maintenance` and `metrics`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import seglog
from helpers_cli import flip_byte, one_line, run, segment_logs
from helpers_storage import python_command, walk_batches
from seglog.errors import InvalidArgumentError
from seglog.units import readable_size


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
    # The damaged batch is zeroed, not cut off: a reader in another process may have it mapped.
    assert log_file.read_bytes()[first_batch_end:] == bytes(log_file.stat().st_size - first_batch_end)
    assert "Rebuilt 1 index" in result.stdout and "OK: no damage remains" in result.stdout
    assert "Cut" in result.stdout and "Acknowledged batches were lost" in result.stdout
    run(runner, data, "check")
    assert run(runner, data, "consume", "t").stdout == "one\ntwo\n"
    run(runner, data, "produce", "t", "--value", "five")
    assert run(runner, data, "consume", "t", "--start", "2").stdout == "five\n"


def test_repair_refuses_a_partition_locked_by_a_writer(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t")
    with seglog.open(data) as log, log.topic("t").producer() as producer:
        producer.send(b"held")
        result = run(runner, data, "repair", code=1)
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


def test_check_reports_and_repair_refuses_a_partition_that_is_a_symbolic_link(runner: CliRunner, data: Path,
                                                                              tmp_path: Path) -> None:
    run(runner, data, "topic", "create", "t")
    run(runner, data, "produce", "t", input="a\nb\n")
    partition = segment_logs(data)[0].parent
    outside = tmp_path / "elsewhere"
    partition.rename(outside)
    partition.symlink_to(outside, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}

    result = run(runner, data, "check", code=1)
    assert f"{partition}: byte 0: is a symbolic link, which seglog does not follow" in one_line(result.stdout)
    result = run(runner, data, "repair", code=1)
    assert f"Error: {partition} is a symbolic link, which seglog does not follow" in one_line(result.output)
    assert "Traceback" not in result.output
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before


def test_topics_stats_explain_maintenance_and_metrics_agree_with_the_api(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "t", "--segment-size", "1 KiB", "--retention-time", "1h")
    with seglog.open(data) as log:
        topic = log.topic("t")
        topic.subscribe("s", initial_position="earliest").close()
        with topic.producer() as producer:
            for _ in range(5):
                producer.send_batch([b"x" * 300] * 2)
        api_stats = topic.stats()
    stats = json.loads(run(runner, data, "topics", "stats", "t").output)
    assert stats["subscriptions"]["s"]["msgBacklog"] == api_stats["subscriptions"]["s"]["msgBacklog"] == 10
    internal = json.loads(run(runner, data, "topics", "internal-stats", "t").output)
    assert internal["partitions"]["0"]["cursors"]["s"]["markDeletePosition"] == -1
    explained = run(runner, data, "topics", "explain", "t").output
    assert "backlog" in explained and "active" in explained
    assert "Deleted 0 segments" in run(runner, data, "maintenance").output
    metrics = run(runner, data, "metrics").output
    assert ('pulsar_subscription_back_log{cluster="standalone",namespace="public/default",subscription="s",'
            'topic="persistent://public/default/t"} 10.0') in metrics  # labels sorted, as Prometheus has them


def test_metrics_have_pulsars_names_and_labels(runner: CliRunner, data: Path) -> None:
    run(runner, data, "topic", "create", "acme/billing/t", "--partitions", "2")
    run(runner, data, "tenants", "create", "idle")
    run(runner, data, "topic", "create", "idle/ns/quiet")
    run(runner, data, "produce", "acme/billing/t", input="".join(f"m{i}\n" for i in range(6)))
    run(runner, data, "topics", "create-subscription", "acme/billing/t", "-s", "s", "-m", "earliest")
    metrics = run(runner, data, "metrics", "--data", str(data)).output
    labels = 'cluster="standalone",namespace="acme/billing",topic="persistent://acme/billing/t"'
    sub_labels = 'cluster="standalone",namespace="acme/billing",subscription="s",topic="persistent://acme/billing/t"'
    # (rates and counters are the live ones of the process that reads: nothing was written by this one)
    for line in (f"pulsar_msg_backlog{{{labels}}} 6.0", f"pulsar_subscriptions_count{{{labels}}} 1.0",
                 f"pulsar_rate_in{{{labels}}} 0.0", f"pulsar_in_messages_total{{{labels}}} 0.0",
                 f"pulsar_subscription_back_log{{{sub_labels}}} 6.0",
                 f"pulsar_subscription_total_msg_expired{{{sub_labels}}} 0.0",
                 'pulsar_rate_in{cluster="standalone",namespace="idle/ns",topic="persistent://idle/ns/quiet"} 0.0'):
        assert line in metrics.splitlines(), line
    assert "pulsar_storage_size{" in metrics and "# TYPE pulsar_in_messages_total counter" in metrics



# Writes two batches into a segment allocated ahead (1 MiB), then is SIGKILLed: no clean close marks it
_KILLED_WRITER = """
import os, signal, sys
import seglog
producer = seglog.open(sys.argv[1]).create_topic("t", segment_size="1 MiB").producer()
producer.send_batch([b"m%d" % i for i in range(100)])
producer.send_batch([b"m%d" % i for i in range(100, 150)])
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_repair_says_which_bytes_it_cut_were_never_written(runner: CliRunner, data: Path) -> None:
    killed = subprocess.run(python_command(_KILLED_WRITER, str(data)), capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode(errors="replace")
    (log_file,) = segment_logs(data)
    size, end = log_file.stat().st_size, walk_batches(log_file)[-1].end
    result = run(runner, data, "repair")
    assert f"Cut {size - end:,} bytes ({readable_size(size - end)}) after the last committed batches, of which " \
           f"{size - end:,} bytes were unused space ahead of the writer (never written)" in one_line(result.stdout)
    assert "Acknowledged batches were lost" not in result.stdout
    assert run(runner, data, "consume", "t", "-n", "1").stdout == "m0\n"


def test_repair_refuses_a_data_directory_with_a_file_in_the_way_as_seglog_open_does(runner: CliRunner,
                                                                                  data: Path) -> None:
    run(runner, data, "topics", "create", "t")
    shutil.rmtree(data / "topics")
    (data / "topics").write_text("not a folder")
    with pytest.raises(InvalidArgumentError) as refused:
        seglog.open(data)
    assert one_line(run(runner, data, "repair", code=2).output).endswith(f"Error: {refused.value}")
    assert (data / "topics").read_text() == "not a folder"
