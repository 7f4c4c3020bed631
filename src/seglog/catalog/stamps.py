"""When and on which cluster a change to replicated configuration was made, and which of two changes wins.

The rule is that of Pulsar's configuration events (PIP-136): the later time wins; at the same time, the change
from the cluster whose name sorts first. Every cluster that applies it to the same changes, in any order, ends
with the same one. Global topic policies (policies.GlobalPolicies) and the synchronized configuration store
(replication/config_sync.py) are stamped so."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stamp:
    """A change made on cluster `origin` at `time_ms` (its broker's clock, ms since the epoch). Stamp() stamps
    nothing: every real stamp supersedes it."""
    time_ms: int = 0
    origin: str = ""

    def supersedes(self, other: Stamp) -> bool:
        """Whether this change is newer than `other`: a later time, or the same time from a cluster whose name
        sorts first. A stamp never supersedes itself, so a change applied twice changes nothing the second time."""
        return (self.time_ms, other.origin) > (other.time_ms, self.origin)

    def following(self, origin: str, now_ms: int) -> Stamp:
        """The stamp of a change made on cluster `origin` at `now_ms` to what this stamp stamps: one that
        supersedes it even when `now_ms` is behind its time (another cluster's clock may run ahead). Otherwise
        the cluster making the change would keep it while every other cluster skipped it as older."""
        return Stamp(max(now_ms, self.time_ms + 1), origin)
