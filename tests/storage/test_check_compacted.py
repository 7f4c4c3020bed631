"""check_log checks each partition's compacted view (docs/LIFECYCLE.md, Compaction): its state parses, the
file it names is there and sound, its batches hold the state's message count; files the state does not name
are an unfinished compaction's leftovers, reported as notes, not damage."""

import json
from pathlib import Path

import seglog
from seglog.storage.check import check_log
from seglog.storage.compacted import STATE_NAME, compacted_directory

FIRST = "00000000000000000001.compacted"


def compacted_topic(data: Path) -> Path:
    """A topic whose partition 0 was compacted once (3 keys kept of 6 messages); its view's directory."""
    with seglog.open(data) as log:
        topic = log.create_topic("t")
        with topic.producer() as producer:
            for key, value in [(b"a", b"a0"), (b"b", b"b0"), (b"a", b"a1"), (None, b"keyless"), (b"c", b"c0"),
                               (b"b", None)]:
                producer.send(value, key=key, partition=0)
        log.admin.topics.compact("t")
        return compacted_directory(topic.partition_view(0).directory)


def reasons(report) -> list[str]:
    return [str(problem) for problem in report.problems]


def edit_state(directory: Path, **fields) -> None:
    state = json.loads((directory / STATE_NAME).read_text())
    state.update(fields)
    (directory / STATE_NAME).write_text(json.dumps(state))


def test_a_sound_view_is_checked_and_passes(tmp_path):
    directory = compacted_topic(tmp_path / "data")
    assert json.loads((directory / STATE_NAME).read_text())["records"] == 2
    report = check_log(tmp_path / "data")
    assert report.ok and report.notes == []


def test_a_state_that_is_not_json_is_damage(tmp_path):
    directory = compacted_topic(tmp_path / "data")
    (directory / STATE_NAME).write_text("{half")
    assert reasons(check_log(tmp_path / "data")) == [
        f"{directory / STATE_NAME}: byte 0: not a compacted view's state (not JSON) (removed by `seglog repair`; the "
        "next compaction makes the view again from the log)"]


def test_a_missing_data_file_is_damage(tmp_path):
    directory = compacted_topic(tmp_path / "data")
    (directory / FIRST).unlink()
    (problem,) = reasons(check_log(tmp_path / "data"))
    assert problem.startswith(f"{directory / FIRST}: byte 0: missing: the compacted view's state names it")


def test_a_flipped_byte_in_the_view_is_damage(tmp_path):
    directory = compacted_topic(tmp_path / "data")
    data = bytearray((directory / FIRST).read_bytes())
    data[-3] ^= 0xFF
    (directory / FIRST).write_bytes(bytes(data))
    (problem,) = reasons(check_log(tmp_path / "data"))
    assert problem.startswith(f"{directory / FIRST}: byte 0: CRC32C mismatch")


def test_a_message_count_other_than_the_states_is_damage(tmp_path):
    directory = compacted_topic(tmp_path / "data")
    size = (directory / FIRST).stat().st_size
    edit_state(directory, records=3)
    (problem,) = reasons(check_log(tmp_path / "data"))
    assert problem.startswith(f"{directory / FIRST}: byte 0: holds 2 messages in {size} bytes, its state says 3 "
                              f"messages in {size} bytes")


def test_a_horizon_past_the_logs_end_is_damage(tmp_path):
    directory = compacted_topic(tmp_path / "data")
    edit_state(directory, horizon=100)
    (problem,) = reasons(check_log(tmp_path / "data"))
    assert "the compacted view's horizon, 100, is past the log's end offset, 6 (the log lost messages" in problem


def test_an_unfinished_compactions_files_are_notes_not_damage(tmp_path):
    directory = compacted_topic(tmp_path / "data")
    (directory / "00000000000000000002.compacted").write_bytes(b"half a batch")
    (directory / (STATE_NAME + ".tmp")).write_text('{"vers')
    report = check_log(tmp_path / "data")
    assert report.ok
    assert [str(note) for note in report.notes] == [
        f"{directory / '00000000000000000002.compacted'}: a compacted view's data file its state does not name, left "
        "by a compaction that did not finish (removed by the next compaction or `seglog repair`)",
        f"{directory / (STATE_NAME + '.tmp')}: a compacted view's state a compaction did not finish writing "
        "(replaced by the next compaction, removed by `seglog repair`)"]


def test_data_files_without_a_state_are_leftovers(tmp_path):
    directory = compacted_topic(tmp_path / "data")
    (directory / STATE_NAME).unlink()  # the first compaction, killed before its commit
    report = check_log(tmp_path / "data")
    assert report.ok and [Path(note.path).name for note in report.notes] == [FIRST]
