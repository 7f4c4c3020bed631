"""The options of a topic's settings, shared by `seglog topic create` (a setting not given follows the data
directory's default) and `seglog topic update` (a setting not given keeps its value)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from seglog.catalog.config import CLEANUP_POLICIES, TIMESTAMP_TYPES
from seglog.cli.options import SIZE_UNITS

F = TypeVar("F", bound=Callable[..., Any])

# (flag, click keywords, help, the default create shows)
_SETTINGS: tuple[tuple[str, dict[str, Any], str, str], ...] = (
    ("--segment-size", {"metavar": "SIZE"},
     f"Bytes per segment file, 1 KiB to 2 GiB: '64 MiB', '1G', 1073741824. {SIZE_UNITS}.", "1 GiB"),
    ("--segment-roll-time", {"metavar": "DURATION"},
     "Start a new segment when the active one is this old: '1h', '2d 10s' (a number needs its unit).", "off"),
    ("--segment-max-messages", {"type": int, "metavar": "N"}, "Start a new segment after N messages.",
     "no limit"),
    ("--timestamp-type", {"metavar": "|".join(TIMESTAMP_TYPES)},
     f"Message timestamps: the producer's ({TIMESTAMP_TYPES[0]}) or the time of the append ({TIMESTAMP_TYPES[1]}).",
     TIMESTAMP_TYPES[0]),
    ("--fsync", {"metavar": "never|always|INTERVAL"},
     "When to fsync: 'never' (leave it to the OS), 'always' (every batch) or at most every INTERVAL, e.g. "
     "'100ms' (a number needs its unit).", "never"),
    ("--retention-time", {"metavar": "DURATION"},
     "Delete a sealed segment once it was last written this long ago, acknowledged or not (Fluvio's "
     "retention-time): '1d 2h', '7 days' (a number needs its unit); -1 for off.", "off"),
    ("--max-partition-size", {"metavar": "SIZE"},
     "Delete a partition's oldest sealed segments while it is larger than this (Fluvio's max-partition-size), "
     f"at least --segment-size: '10 GB', '20G'; -1 for off. {SIZE_UNITS}.", "off"),
    ("--retention-min-timestamp", {"type": int, "metavar": "MS"},
     "Delete sealed segments whose newest timestamp is below MS (ms since the epoch), as Kafka's retention "
     "minimum timestamp.", "0, off"),
    ("--cleanup-policy", {"metavar": "|".join(CLEANUP_POLICIES)},
     "Kafka's cleanup.policy: delete old segments by the retention rules, keep the latest message per key "
     "(compact; every message then needs a key), or both.", CLEANUP_POLICIES[0]),
    ("--min-compaction-lag", {"metavar": "DURATION"},
     "Compaction leaves messages younger than this alone (Kafka's min.compaction.lag.ms): '1h' (a number needs "
     "its unit).", "0"),
    ("--max-compaction-lag", {"metavar": "DURATION"},
     "A message is compacted at the latest this long after it was written (Kafka's max.compaction.lag.ms): "
     "'7d' (a number needs its unit); -1 for no bound.", "no bound"),
    ("--delete-retention", {"metavar": "DURATION"},
     "How long compaction keeps a tombstone (a message with a null value) (Kafka's delete.retention.ms): "
     "'1d' (a number needs its unit).", "1 day"),
    ("--min-cleanable-dirty-ratio", {"metavar": "RATIO"},
     "Compact once this share of a partition is not compacted yet (Kafka's min.cleanable.dirty.ratio): a "
     "number from 0 to 1.", "0.5"),
)
SETTING_FLAGS = tuple(flag for flag, *_ in _SETTINGS)


def setting_options(*, show_defaults: bool) -> Callable[[F], F]:
    """A decorator adding every setting's option (keyword arguments segment_size, ..., None when not given);
    `show_defaults` adds the default to each help text."""
    def decorate(function: F) -> F:
        for flag, keywords, text, default in reversed(_SETTINGS):
            function = click.option(flag, **keywords,
                                    help=f"{text} [default: {default}]" if show_defaults else text)(function)
        return function
    return decorate
