"""What a client's acks and redeliveries of the batch entries it was sent name (consumers.SentEntries, docs/
SERVER.md "Consuming"): an entry's every message by its id, those an ack_set clears, up to the first set
for a cumulative ack; an entry forgotten once acknowledged whole, redelivered, or cumulatively passed."""

from __future__ import annotations

import sys
import threading

from seglog.server.consumers import SentEntries
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.encryption import ack_set


def ids(*pairs: tuple[int, list[int] | None]) -> list[api.MessageIdData]:
    out = []
    for entry, unacked in pairs:
        mid = api.MessageIdData(ledger_id=0, entry_id=entry)
        if unacked is not None:
            mid.ack_set.extend(ack_set(unacked))
        out.append(mid)
    return out


def test_an_entry_is_acknowledged_whole_by_its_id_or_in_part_by_its_ack_set():
    entries = SentEntries()
    entries.sent([(10, 5), (15, 100)])
    assert entries.acknowledged(ids((15, list(range(3, 100))))).tolist() == [15, 16, 17]
    assert entries.acknowledged(ids((10, None))).tolist() == [10, 11, 12, 13, 14]
    assert entries.acknowledged(ids((10, None))).tolist() == [10]  # (forgotten: its first message)
    assert entries.acknowledged_through(ids((15, [70, 99]))) == [84]  # cumulative: up to the first set
    assert entries.acknowledged_through(ids((15, None))) == [114]
    entries.sent([(115, 5), (120, 5)])
    entries.forget_through(119)  # (a cumulative ack up to 119 passed: what it covers is forgotten)
    assert entries.redelivered(ids((115, None), (120, None))).tolist() == [115, 120, 121, 122, 123, 124]


def test_a_redelivered_entry_names_its_messages():
    entries = SentEntries()
    entries.sent([(0, 3)])
    named = [*ids((0, None)), api.MessageIdData(ledger_id=0, entry_id=7, batch_index=2)]
    assert entries.redelivered(named).tolist() == [0, 1, 2, 9]
    assert entries.redelivered(named).tolist() == [0, 9]


def test_entries_sent_by_dispatch_while_acks_forget_others_are_neither_lost_nor_a_crash():
    """Dispatch records entries in the thread pool while an ACK, on the loop or in another pool thread,
    forgets those a cumulative ack passed: every entry sent past the last ack stays known (it was lost, or
    the forgetting raised RuntimeError, when the two interleaved). Bounded: 20,000 entries, 10 s."""
    entries = SentEntries()
    errors: list[BaseException] = []
    done = threading.Event()
    interval = sys.getswitchinterval()

    def send() -> None:
        try:
            for i in range(20_000):
                entries.sent([(10 * i, 10)])
        except BaseException as error:  # (reported by the assertion below)
            errors.append(error)
        done.set()

    def forget() -> None:
        offset = 0
        try:
            while not done.is_set() and offset < 100_000:
                entries.forget_through(offset)
                offset += 3
        except BaseException as error:
            errors.append(error)

    sys.setswitchinterval(1e-6)  # (switch threads as often as the interpreter can, to interleave them)
    try:
        threads = [threading.Thread(target=send), threading.Thread(target=forget)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    entries.forget_through(100_000)
    assert entries.acknowledged(ids((199_990, None))).tolist() == list(range(199_990, 200_000))
