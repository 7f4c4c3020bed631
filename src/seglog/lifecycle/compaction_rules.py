"""When the maintenance pass compacts a partition, and how far (docs/LIFECYCLE.md, Compaction).

Kafka's model (a topic whose cleanup_policy compacts): the log's sealed segments from the view's horizon up to
the first segment that may not be compacted yet (the active one, or one holding a message newer than
`min_compaction_lag`) are its dirty part; they are compacted when they make at least
`min_cleanable_dirty_ratio` of the partition (the view's bytes and theirs), or when the oldest of their
messages is older than `max_compaction_lag`, or when a tombstone's `delete_retention` has passed, or (with
`compact,delete`) when the view holds messages older than the topic's retention_time or below its
retention_min_timestamp, which Kafka's retention deletes compacted or not. The compacted segments are then
deleted: the view stands for the log below its horizon.

Pulsar's model: a `compaction_threshold` policy compacts a topic whose messages past the view's horizon hold
at least that many bytes (Pulsar counts the backlog of its compaction cursor), up to the end offset, and
leaves the log as it is."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from seglog.catalog.config import TopicConfig
from seglog.lifecycle.retention import SegmentFate
from seglog.storage.compacted import CompactedState
from seglog.storage.partition_view import PartitionView
from seglog.storage.segment_table import SegmentTable


@dataclass(frozen=True)
class CompactionPlan:
    """A compaction the rules call for: up to `horizon`, tombstones kept per `delete_retention_ms` (None:
    dropped at once, Pulsar's rule), Kafka's model when `log_compacted`; `reason` says which rule."""
    horizon: int
    delete_retention_ms: int | None
    log_compacted: bool
    reason: str
    expire_before_ms: int = 0  # compact,delete: the view's batches whose newest message is older go


def compaction_plan(config: TopicConfig, threshold: int, view: PartitionView, table: SegmentTable,
                    state: CompactedState | None, now: int) -> CompactionPlan | None:
    """The compaction due on the partition `view` shows (`table`: its segments, the last one active), or None."""
    state = state or CompactedState()
    if config.compacted:
        return _kafka_plan(config, view, table, state, now)
    if threshold > 0:
        return _threshold_plan(threshold, table, state)
    return None


def _kafka_plan(config: TopicConfig, view: PartitionView, table: SegmentTable, state: CompactedState,
                now: int) -> CompactionPlan | None:
    expire_before = _expiry(config, now)
    start = max(state.horizon, table.earliest_offset)
    horizon = _first_uncleanable(config, table, now)
    dirty = (table.next_offsets > start) & (table.bases < horizon)
    dirty_bytes = int(table.log_sizes[dirty].sum())
    ratio = dirty_bytes / (dirty_bytes + state.size) if dirty_bytes else 0.0
    retention = config.delete_retention
    if horizon > start and ratio >= config.min_cleanable_dirty_ratio:
        reason = f"dirty ratio {ratio:.2f} >= min_cleanable_dirty_ratio {config.min_cleanable_dirty_ratio}"
    elif horizon > start and config.max_compaction_lag is not None and \
            _oldest_dirty(view, start) <= now - config.max_compaction_lag:
        reason = f"a message waited max_compaction_lag ({config.max_compaction_lag} ms)"
    elif 0 <= state.oldest_tombstone < state.cleaned_before(now - retention):
        reason = f"a tombstone's delete_retention ({retention} ms) passed"
    elif _view_expires(view, expire_before):
        reason = "compacted messages are older than the topic's retention (cleanup_policy compact,delete)"
    else:
        return None
    return CompactionPlan(max(horizon, start), retention, True, reason, expire_before)


def _expiry(config: TopicConfig, now: int) -> int:
    """With cleanup_policy compact,delete, where Kafka's retention deletes compacted data too: messages older
    than the topic's retention_time, or below its retention_min_timestamp (0: none)."""
    if config.cleanup_policy != "compact,delete":
        return 0
    return max(now - config.retention_time if config.retention_time is not None else 0,
               config.retention_min_timestamp)


def _view_expires(view: PartitionView, expire_before: int) -> bool:
    current = view.compacted.current()
    if expire_before <= 0 or current is None or current[1] is None:
        return False
    return current[1].holds_older_than(expire_before)


def _oldest_dirty(view: PartitionView, start: int) -> int:
    """The timestamp of the first message not compacted yet (at `start`)."""
    base = view.segment_for(start)
    assert base is not None
    return view.view(base).timestamp_of(start)


def _first_uncleanable(config: TopicConfig, table: SegmentTable, now: int) -> int:
    """The base offset of the first segment that may not be compacted: the active one (the last), or the
    first holding a message newer than min_compaction_lag."""
    sealed = len(table) - 1
    for i in range(sealed):
        if config.min_compaction_lag and int(table.max_timestamps[i]) > now - config.min_compaction_lag:
            return int(table.bases[i])
    return int(table.bases[sealed])


def _threshold_plan(threshold: int, table: SegmentTable, state: CompactedState) -> CompactionPlan | None:
    """Pulsar's compaction_threshold: the bytes of the segments holding messages past the horizon (a whole
    segment counted for the one the horizon falls in, so a compaction may come a little early)."""
    past = table.next_offsets > state.horizon
    backlog = int(table.log_sizes[past].sum())
    if backlog < threshold or table.end_offset <= state.horizon:
        return None
    return CompactionPlan(table.end_offset, None, False,
                          f"{backlog} bytes past the compaction horizon >= compaction_threshold {threshold}")


def explain_compaction(config: TopicConfig, fates: list[SegmentFate], table: SegmentTable, state: CompactedState | None,
                       plan: CompactionPlan | None) -> tuple[list[SegmentFate], dict[str, Any]]:
    """The segments' fates (retention.explain) as compaction changes them, and the partition's compaction as
    explain_retention shows it: a topic whose cleanup_policy is 'compact' alone keeps every segment from
    retention; the segments a due Kafka compaction deletes are marked so, with its reason."""
    if config.cleanup_policy == "compact":
        fates = [replace(fate, deleted_next_pass=False, rule="cleanup_policy", deleted_at_ms=None,
                         reason="cleanup_policy is compact: retention deletes no segment of the topic; compaction "
                                "deletes those below its horizon") if fate.rule != "active" else fate
                 for fate in fates]
    if plan is not None and plan.log_compacted:
        fates = [replace(fate, deleted_next_pass=True, rule="compaction", deleted_at_ms=None,
                         reason=f"compacted into the view and deleted at the next pass: {plan.reason}")
                 if fate.next_offset <= plan.horizon and i < len(table) - 1 else fate
                 for i, fate in enumerate(fates)]
    state = state or CompactedState()
    return fates, {
        "cleanupPolicy": config.cleanup_policy, "horizon": state.horizon, "viewMessages": state.records,
        "viewSize": state.size, "logCompacted": state.log_compacted,
        "compactedBelowHorizon": (f"offsets below {state.horizon}: each key's latest message is in the compacted "
                                  "view" + ("; their segments were deleted by compaction (the view stands for "
                                            "the log there)" if state.log_compacted else "; the log keeps them"))
        if state.generation else None,
        "nextCompaction": None if plan is None else {"horizon": plan.horizon, "reason": plan.reason}}
