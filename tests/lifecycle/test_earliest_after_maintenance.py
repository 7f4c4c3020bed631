"""A reader made after run_maintenance() deleted segments starts at the partition's real earliest offset, in the
process that deleted them and in another one that had read them before (issue 26, the lifecycle's first defect):
the partition's view of the segments must not outlive their files."""

import pytest

import seglog
from seglog.storage.segment import list_segments

VALUE = b"v" * 1000
MESSAGES = 2600  # about 2.6 MiB: three sealed 1 MiB segments' worth and the active one


def fill(topic) -> None:
    with topic.producer() as producer:
        for start in range(0, MESSAGES, 64):
            producer.send_batch([VALUE] * min(64, MESSAGES - start))


def offsets_of(reader) -> list[int]:
    return [message.offset for message in reader]


@pytest.mark.parametrize("reader_process", ["same", "other"])
def test_a_reader_from_earliest_after_maintenance_gets_exactly_the_surviving_messages(tmp_path, clock,
                                                                                      reader_process):
    data = tmp_path / "data"
    with seglog.open(data, clock=clock, background=False) as log:
        topic = log.create_topic("t", segment_size="1 MiB", retention_time="1h")
        fill(topic)
        reading_log = log if reader_process == "same" else seglog.open(data, background=False)
        try:
            reading_topic = reading_log.topic("t")
            assert offsets_of(reading_topic.reader("earliest")) == list(range(MESSAGES))  # maps every segment
            bases = list_segments(topic.partition_directory(0))
            assert len(bases) >= 3
            clock.advance(hours=1)
            deleted = [base for _, _, base in log.run_maintenance().deleted_segments]
            assert deleted == bases[:-1]  # every sealed segment went
            survivors = list(range(bases[-1], MESSAGES))
            assert offsets_of(reading_topic.reader("earliest")) == survivors
            batch = reading_topic.reader("earliest").read_batch()
            assert batch.column("offset")[0].as_py() == bases[-1]
        finally:
            if reader_process == "other":
                reading_log.close()


def test_a_reader_from_a_deleted_offset_goes_on_at_the_earliest_and_counts_the_skipped(log, clock):
    topic = log.create_topic("t", segment_size="1 MiB", retention_time="1h")
    fill(topic)
    assert offsets_of(topic.reader(0)) == list(range(MESSAGES))  # maps every segment
    first_kept = list_segments(topic.partition_directory(0))[-1]
    clock.advance(hours=1)
    log.run_maintenance()
    reader = topic.reader(5)
    assert offsets_of(reader) == list(range(first_kept, MESSAGES))
    assert reader.skipped == first_kept - 5


def test_a_subscription_from_earliest_after_maintenance_receives_the_surviving_messages(log, clock):
    topic = log.create_topic("t", segment_size="1 MiB", retention_time="1h")
    fill(topic)
    assert offsets_of(topic.reader("earliest"))[0] == 0
    first_kept = list_segments(topic.partition_directory(0))[-1]
    clock.advance(hours=1)
    log.run_maintenance()
    with topic.subscribe("late", initial_position="earliest") as consumer:
        assert consumer.receive(timeout=5).offset == first_kept
