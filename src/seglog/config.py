"""Topic and broker settings: their names, defaults, accepted forms and validation.

A topic's settings are the broker's defaults (given to `seglog.open`) overridden by what `create_topic`
was given; both go through the same parsers, so `segment_size='10 MiB'` and `segment_size=10485760` are
the same setting and a bad value is refused with the setting's name and the accepted forms."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Mapping

from seglog.errors import InvalidArgumentError
from seglog.units import parse_duration, parse_size

GiB = 1 << 30
MIN_SEGMENT_SIZE = 1024
MAX_SEGMENT_SIZE = 2 * GiB  # batch offsets are int32, as in Arrow's binary arrays
TIMESTAMP_TYPES = ("create_time", "log_append_time")


def _segment_size(value: Any) -> int:
    size = parse_size(value, argument="segment_size")
    if not MIN_SEGMENT_SIZE <= size <= MAX_SEGMENT_SIZE:
        raise InvalidArgumentError("segment_size", value, "a size from 1 KiB to 2 GiB, e.g. '64 MiB' or 1073741824")
    return size


def _optional_duration(name: str) -> Callable[[Any], int | None]:
    def parse(value: Any) -> int | None:
        if value is None or value in (-1, "-1", 0, "0"):
            return None
        return parse_duration(value, argument=name)
    return parse


def _optional_count(name: str) -> Callable[[Any], int | None]:
    def parse(value: Any) -> int | None:
        if value is None or value in (-1, 0):
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(name, value, "a positive int, or None / -1 for no limit")
        return value
    return parse


def _timestamp_type(value: Any) -> str:
    if value not in TIMESTAMP_TYPES:
        raise InvalidArgumentError("timestamp_type", value, " or ".join(map(repr, TIMESTAMP_TYPES)))
    return value


def _fsync(value: Any) -> str:
    """'never' (leave it to the OS), 'always' (every batch), or an interval: fsync when one has passed."""
    if value in ("never", "always"):
        return value
    try:
        interval = parse_duration(value, argument="fsync")
    except InvalidArgumentError:
        raise InvalidArgumentError("fsync", value, "'never', 'always', or an interval such as '100ms', '1s' "
                                   "or an int of ms") from None
    return "always" if interval == 0 else f"{interval}ms"


@dataclass(frozen=True)
class TopicConfig:
    """The settings of a topic. Sizes in bytes, durations in ms, None for off / no limit."""
    segment_size: int = GiB
    segment_roll_time: int | None = None
    segment_max_messages: int | None = None
    timestamp_type: str = "create_time"
    fsync: str = "never"

    @property
    def fsync_interval_ms(self) -> int | None:
        """None: never fsync; 0: after every batch; N: when N ms passed since the last fsync."""
        if self.fsync == "never":
            return None
        return 0 if self.fsync == "always" else int(self.fsync[:-2])

    @property
    def log_append_time(self) -> bool:
        return self.timestamp_type == "log_append_time"

    def updated(self, options: Mapping[str, Any]) -> TopicConfig:
        """A copy with `options` parsed and applied; unknown names are refused with the accepted ones."""
        return replace(self, **parse_options(options, TOPIC_SETTINGS, "topic setting"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


TOPIC_SETTINGS: dict[str, Callable[[Any], Any]] = {
    "segment_size": _segment_size,
    "segment_roll_time": _optional_duration("segment_roll_time"),
    "segment_max_messages": _optional_count("segment_max_messages"),
    "timestamp_type": _timestamp_type,
    "fsync": _fsync,
}
assert set(TOPIC_SETTINGS) == {f.name for f in fields(TopicConfig)}


def _verify_crc(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError("verify_crc", value, "True or False")
    return value


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of an opened data directory: the defaults of its topics and of its readers."""
    topic_defaults: TopicConfig = TopicConfig()
    verify_crc: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> BrokerConfig:
        topic_options = {k: v for k, v in options.items() if k in TOPIC_SETTINGS}
        own = parse_options({k: v for k, v in options.items() if k not in TOPIC_SETTINGS},
                            BROKER_SETTINGS, "broker setting", also=TOPIC_SETTINGS)
        return cls(topic_defaults=TopicConfig().updated(topic_options), **own)


BROKER_SETTINGS: dict[str, Callable[[Any], Any]] = {"verify_crc": _verify_crc}


def parse_options(options: Mapping[str, Any], settings: Mapping[str, Callable[[Any], Any]], what: str,
                  also: Mapping[str, Any] = {}) -> dict[str, Any]:
    unknown = sorted(set(options) - set(settings))
    if unknown:
        accepted = ", ".join(sorted({*settings, *also}))
        raise InvalidArgumentError(what, unknown[0], accepted)
    return {name: settings[name](value) for name, value in options.items()}
