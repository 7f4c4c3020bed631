"""A partition's view is shared by the threads of a process: readers in the server's thread pool rescan it
while the lifecycle's deletions rescan it too. Two rescans that both found a deleted segment's view to let go
raised KeyError in the one that came second, which failed a maintenance pass (seen in bench_soak)."""

import sys
import threading

import seglog
from seglog.storage.partition_view import PartitionView
from seglog.storage.segment import delete_segments


def test_views_rescanned_from_several_threads_while_segments_are_deleted(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock) as log:
        with log.create_topic("t", segment_size="1MiB").producer() as producer:
            for _ in range(40):
                producer.send_batch([bytes(100_000)] * 9)  # a segment each
    directory = next((tmp_path / "data").rglob("*.log")).parent
    view = PartitionView(directory)
    errors: list[BaseException] = []
    stop = threading.Event()

    def rescan_and_read() -> None:
        try:
            while not stop.is_set():
                view.rescan(force=True)
                for base in view.bases[:8]:
                    try:
                        view.view(base)
                    except FileNotFoundError:  # deleted since listed: a reader lists again (Reader.locate)
                        pass
        except BaseException as error:  # (reported below)
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: the race shows in a few deletions
    threads = [threading.Thread(target=rescan_and_read) for _ in range(3)]
    try:
        for thread in threads:
            thread.start()
        for base in view.bases[:-1]:
            delete_segments(directory, [base])
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        sys.setswitchinterval(interval)
    assert errors == []
    view.close()
