"""What dispatch gives a consumer and keeps of it: a Piece (messages of one stored batch handed to one
consumer), a Pending (delivered, not yet known to be acknowledged) and a ConsumerState (all dispatch keeps of
one consumer, whoever that consumer is). The dispatchers (dispatch.py), key_shared routing (key_shared.py)
and redelivery (redelivery.py) all work on them; none of those modules is needed to define them."""

from __future__ import annotations

from collections import abc, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from seglog._core._format import HEADER_BYTES, read_header
from seglog._core._mapping import Mapping
from seglog._core._messages import Message, batch_attributes, batch_offsets, messages_from_batch
from seglog.rates import ConsumerTraffic
from seglog.storage.batch import to_record_batch
from seglog.storage.compacted import CompactedFile
from seglog.storage.partition_view import SegmentView
from seglog.storage.value_bytes import value_bytes, values_bytes

_BODY_LENGTH = 9  # of read_header's fields (docs/FORMAT.md, the batch header)
MAX_READ_BYTES = 5 * 1024 * 1024  # what one read gives a consumer at most: Pulsar's dispatcherMaxReadSizeBytes
# stored batches one read gives a consumer of `entry_permits` for its permits: Pulsar's dispatcherMaxReadBatchSize
MAX_READ_ENTRIES = 100

# Pulsar reads compacted only on subscriptions with one active consumer (its clients and broker refuse it on
# shared and key_shared: which consumer would get a key's latest message?), and says so in these words
READ_COMPACTED_TYPES = ("exclusive", "failover")
READ_COMPACTED_REFUSED = "Read compacted can only be used with exclusive or failover persistent subscriptions"

HashRanges = tuple[tuple[int, int], ...]  # a sticky key_shared consumer's slots: inclusive (start, end) pairs


@dataclass
class Piece:
    """Messages of one stored batch handed to one consumer: `offsets` ascending, all inside the batch. The
    batch is a segment's, or a compacted view's (`view` then the view's file): a compacted batch's offsets
    have gaps, so its records are found by its offsets column, not by counting from `base`."""
    partition: int
    view: SegmentView | CompactedFile
    position: int
    base: int
    count: int  # messages in the stored batch
    offsets: np.ndarray
    # how many times each was sent to redelivery (Pulsar's redelivery count), for a piece of redeliveries;
    # None: all 0
    redelivery_counts: np.ndarray | None = None

    @property
    def data(self) -> Mapping:
        """The stored batch's segment, as mapped (a located batch's segment always is)."""
        data = self.view.data
        assert data is not None
        return data

    @property
    def compacted(self) -> bool:
        return isinstance(self.view, CompactedFile)

    @property
    def rows(self) -> np.ndarray:
        """The index of each of these messages in the stored batch."""
        if not self.compacted:
            return self.offsets - self.base
        return np.searchsorted(batch_offsets(self.data, self.position), self.offsets)

    def with_offsets(self, offsets: np.ndarray) -> Piece:
        """The same stored batch, other messages of it (some of these, if it has redelivery counts)."""
        counts = self.redelivery_counts
        if counts is not None:
            counts = counts[np.searchsorted(self.offsets, offsets)]
        return Piece(self.partition, self.view, self.position, self.base, self.count, offsets, counts)

    @property
    def stored_bytes(self) -> int:
        """What these messages take of their stored batch: its bytes, shared evenly among its messages."""
        body_length = read_header(self.data, self.position)[_BODY_LENGTH]
        return (HEADER_BYTES + body_length) * len(self.offsets) // self.count

    @property
    def value_bytes(self) -> int:
        """The bytes of these messages' values (what stats count as their size)."""
        offsets = self.offsets
        first, last = int(offsets[0]), int(offsets[-1])
        if last - first + 1 == len(offsets) and not self.compacted:  # one run of records (nearly always)
            return value_bytes(self.data, self.position, first - self.base, last - self.base + 1)
        return values_bytes(self.data, self.position, self.rows)

    @property
    def contiguous(self) -> bool:
        """Whether these messages are one run of the stored batch's records."""
        rows = self.rows
        return int(rows[-1]) - int(rows[0]) + 1 == len(rows)

    def record_batch(self) -> pa.RecordBatch:
        """Zero-copy when the messages are one run of the batch's records; a filtered copy otherwise."""
        rows = self.rows
        first = int(rows[0])
        span = int(rows[-1]) - first + 1
        batch = to_record_batch(self.data, self.position).slice(first, span)
        if span != len(rows):
            keep = np.zeros(span, dtype=bool)
            keep[rows - first] = True
            batch = batch.filter(pa.array(keep))
        return batch.replace_schema_metadata({b"partition": str(self.partition).encode()})

    @property
    def batch_attributes(self) -> abc.Mapping[str, str]:
        """The stored batch's attributes, read without making its messages."""
        return batch_attributes(self.data, self.position)

    def messages(self) -> list[Message]:
        rows = self.rows
        first, last = int(rows[0]), int(rows[-1])
        messages = messages_from_batch(self.data, self.position, self.partition, first, last + 1)
        if last - first + 1 == len(rows):  # (contiguous, without reading the offsets again)
            return messages
        wanted = set(self.offsets.tolist())
        return [m for m in messages if m.offset in wanted]


@dataclass
class Pending:
    """Delivered to a consumer and not yet known to be acknowledged."""
    deadline_ms: int | None
    partition: int
    offsets: np.ndarray


@dataclass(eq=False)
class ConsumerState:
    """What dispatch keeps of one consumer: an in-process Consumer holds one, and so will a remote consumer
    on a connection. Only its dispatcher changes it, holding the subscription's mutex.

    `on_forget(partition)` lets the consumer drop what it took and has not handed out yet (the
    subscription rewound or was reset: on one partition, or on all for None); `disconnect()` closes the
    consumer (a forced unsubscribe)."""
    name: str
    ack_timeout_ms: int | None
    on_forget: Callable[[int | None], None]
    disconnect: Callable[[], None]
    # delivered, not yet known to be acknowledged, and how many messages that is (changed through hold,
    # release_head and keep_pending, which keep the two agreeing)
    pending: deque[Pending] = field(default_factory=deque)
    pending_messages: int = 0
    queue: deque[Piece] = field(default_factory=deque)      # key_shared: routed to this consumer by others
    # key_shared, a consumer that joined others: per partition, the read position when it joined, until
    # everything before it is acknowledged; meanwhile its messages from there on are held
    joined_at: list[int | None] | None = None
    held: deque[Piece] = field(default_factory=deque)
    # a consumer on a connection: the messages it may still be sent (Pulsar's FLOW permits), which dispatch
    # takes what it delivers from; None for a consumer that asks for what it wants
    permits: int | None = None
    # Pulsar's default dispatcher flow control (its preciseDispatcherFlowControl off): a read may take as many
    # stored batches, whole, as the consumer has permits (at most MAX_READ_ENTRIES), however many messages they
    # hold, and its permits go below zero by the excess until its FLOWs make up for it. Off, dispatch never
    # exceeds the permits, and cuts a stored batch to fit them.
    entry_permits: bool = False
    # the partitions it consumes: a remote consumer of one partition of a partitioned topic (Pulsar's
    # clients subscribe to each partition on its own); None for every partition
    partitions: frozenset[int] | None = None
    # key_shared: the key slots it takes in Pulsar's sticky mode (key_shared.py); None: seglog's hash ring
    hash_ranges: HashRanges | None = None
    # stored batches are given whole, the last past max_messages (a geo-replicator sends each as one entry,
    # as Pulsar's does; cut to fit, a producer's batch would arrive as several)
    whole_batches: bool = False
    # Pulsar's readCompacted: below the compaction horizon it is given the compacted view (exclusive and
    # failover subscriptions only, as Pulsar's broker has it)
    read_compacted: bool = False
    # stored batches with this attribute are given whole, however many messages they hold: a batch that goes
    # out as one entry (the server's encrypted entries, which the client unpacks) is never cut to fit, or
    # the entry would go out again for its rest
    whole_if_marked: bytes | None = None
    # what one read gives it at most, in bytes of stored batches (the first batch is given however large): a
    # consumer that copies what it is given (into frames, Python messages) costs memory in proportion to one
    # read, whatever its permits or max_messages
    max_read_bytes: int | None = MAX_READ_BYTES
    # a consumer on a connection: the most messages it may hold unacknowledged before dispatch gives it no
    # more until it acknowledges some (Pulsar's maxUnackedMessagesPerConsumer); None: no bound
    max_unacked: int | None = None
    # held at max_unacked: when its pending messages are counted again (Dispatcher._may_give)
    recount_at: int | None = None
    # what it was given and gave back for redelivery, for stats (rates.py): set by its subscription
    traffic: ConsumerTraffic | None = None

    @property
    def blocked_on_unacked(self) -> bool:
        return self.recount_at is not None

    def hold(self, pending: Pending) -> None:
        self.pending.append(pending)
        self.pending_messages += len(pending.offsets)

    def release_head(self) -> Pending:
        head = self.pending.popleft()
        self.pending_messages -= len(head.offsets)
        return head

    def keep_pending(self, kept: abc.Iterable[Pending]) -> None:
        self.pending = deque(kept)
        self.pending_messages = sum(len(p.offsets) for p in self.pending)

    def covers(self, partition: int) -> bool:
        return self.partitions is None or partition in self.partitions

    def overlaps(self, other: ConsumerState) -> bool:
        """Whether the two consume a partition in common."""
        if self.partitions is None or other.partitions is None:
            return True
        return not self.partitions.isdisjoint(other.partitions)

    def forget(self, partition: int | None = None) -> None:
        """Drop what was delivered, routed or held (of one partition, or all), and tell the consumer."""
        if partition is None:
            self.keep_pending(())
            self.queue.clear()
            self.held.clear()
            self.joined_at = None
        else:
            self.keep_pending(p for p in self.pending if p.partition != partition)
            self.queue = deque(p for p in self.queue if p.partition != partition)
            self.held = deque(p for p in self.held if p.partition != partition)
            if self.joined_at is not None:
                self.joined_at[partition] = None  # the partition starts again for every consumer
        self.on_forget(partition)
