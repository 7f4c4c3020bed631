"""The source's and sink's options, read and checked once, as Spark's Kafka source names them.

    path                      a seglog data directory this machine sees (its executors too), or
    serviceUrl                the HTTP URL of a `seglog serve` (http://HOST:PORT or https://), which the driver
                              plans with and the executors read from (its Flight port): one of the two
    authToken                 with serviceUrl: the token of a role allowed to (a server with authentication)
    tlsTrustCertsFilePath     with an https:// serviceUrl: the CA certificates (PEM) the server's is signed by,
                              when the system's do not
    topic                     the topic, 'name' or 'tenant/namespace/name', or
    topics                    topics separated by commas, or
    topicsPattern             a regex over the topics of public/default, or of 'tenant/namespace/REGEX': exactly
                              one of the three (topic_selection.py: topics are named as given)
    startingOffsets           'earliest', 'latest' (streaming only) or JSON {"TOPIC": {"0": 23, "1": -2}, ...}
                              (-2 earliest, -1 latest; every topic read and every partition named); default:
                              batch 'earliest', streaming 'latest'
    endingOffsets             batch only: 'latest' (default) or JSON as above (-1 latest; no -2)
    startingOffsetsByTimestamp
                              JSON {"TOPIC": {"0": ms, "1": ms}, ...}: each partition starts at its first message
                              at or after its time (over startingOffsets, as in Spark)
    startingTimestamp         ms since the epoch, the same for every partition (over both of the above)
    startingOffsetsByTimestampStrategy
                              where no message is that recent: 'error' (default: fail the query, as Spark)
                              or 'latest' (start at the end)
    endingOffsetsByTimestamp, endingTimestamp
                              batch only: each partition ends before its first message at or after the time (at
                              its end if none is), over endingOffsets, endingTimestamp over both
    maxRecordsPerPartition    split a seglog partition into Spark input partitions of at most this many
                              offsets
    maxOffsetsPerTrigger      streaming: at most this many offsets per micro-batch, over all partitions
    minOffsetsPerTrigger      streaming: a micro-batch waits for at least this many offsets, over all partitions,
                              until maxTriggerDelay passed since the last micro-batch
    maxTriggerDelay           with minOffsetsPerTrigger: '15m' (default), a number and a unit (ms, s, m or min,
                              h, d; ms if none), as Spark's time options
    failOnDataLoss            'true' (default): fail when messages to read were deleted (retention);
                              'false': go on at the earliest message still there
    subscription              streaming: a seglog subscription acknowledged up to what Spark committed
    valueSchema               'binary' (default: the value column as stored) or 'topic': the value column typed
                              by the topic's schema (value_schema.py; JSON and AVRO as a struct of the record's
                              fields, STRING and the primitives as their Spark type)
    readCompacted             batch only: 'false' (default) or 'true': each partition's compacted view below its
                              compaction horizon (each key's latest message, tombstones left out), then the log

Every invalid value raises InvalidArgumentError naming the option and what it accepts."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

from pyspark_seglog.sessions import Location
from pyspark_seglog.topic_selection import TopicSelection
from seglog.errors import InvalidArgumentError

EARLIEST, LATEST = -2, -1
VALUE_BINARY, VALUE_TOPIC = "binary", "topic"  # the valueSchema option's values
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000  # Spark's Kafka source: '15m'


@dataclass(frozen=True)
class ByTimestamp:
    """Offsets found by time, each partition's first offset whose timestamp is at or after its time: `every`
    (ms since the epoch) for every partition, or `by_topic` {topic: {partition: ms}}; `option` names where
    the times came from."""
    option: str
    every: int | None = None
    by_topic: Mapping[str, Mapping[int, int]] | None = None


# Where reads start or end: 'earliest' / 'latest', {topic: {partition: offset}} with -2 / -1 for earliest /
# latest, or ByTimestamp
Bound = Union[str, dict[str, dict[int, int]], ByTimestamp]

_OFFSETS_ACCEPTED = ("'earliest', 'latest', or JSON such as {{\"{topic}\": {{\"0\": 23, \"1\": -2}}}} naming every "
                     "partition (-2: earliest, -1: latest)")
_TIMES_ACCEPTED = ("JSON such as {{\"{topic}\": {{\"0\": 1700000000000, \"1\": 1700000000000}}}} naming every "
                   "partition of every topic read, with ms since the epoch")
_STREAMING_ONLY = ("subscription", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
_BATCH_ONLY = ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}

# Why a stream may not read compacted: Spark runs a micro-batch again after a failure or a restart and needs the
# same rows, which a compaction in between changes (Spark's Kafka source and Pulsar's connector have no such
# option for streams either)
_READ_COMPACTED_IN_BATCHES = ("only in batch queries: a micro-batch run again must read the same rows, and a "
                              "compaction in between changes them. Read the compacted view in a batch query, then "
                              "stream from its ending offsets")


def lowered(options: Mapping[str, str]) -> dict[str, str]:
    """The options by lower-case name: Spark hands them over case-insensitively."""
    return {key.lower(): value for key, value in options.items()}


@dataclass(frozen=True)
class SourceOptions:
    """A read's options, checked (see the module docstring). `starting` and `ending` are the bounds the options
    give, by Spark's precedence: startingTimestamp over startingOffsetsByTimestamp over startingOffsets (and the
    same for the ending ones)."""
    location: Location
    selection: TopicSelection
    starting: Bound
    ending: Bound
    timestamp_strategy: str
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    subscription: str | None
    value_schema: str = VALUE_BINARY
    read_compacted: bool = False
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS

    @property
    def topic(self) -> str:
        """The one topic read (valueSchema 'topic' needs one)."""
        return value_schema_topic(self.selection)

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        given = lowered(options)
        selection = TopicSelection.parse(given)
        for name in _STREAMING_ONLY if not streaming else ():
            if name.lower() in given:
                raise InvalidArgumentError(name, given[name.lower()], "only in streaming queries")
        for name in _BATCH_ONLY if streaming else ():
            if name.lower() in given:
                raise InvalidArgumentError(name, given[name.lower()], "only in batch queries (a stream has no end)")
        if streaming and "readcompacted" in given:
            raise InvalidArgumentError("readCompacted", given["readcompacted"], _READ_COMPACTED_IN_BATCHES)
        starting = _bound(given, "starting", selection, "latest" if streaming else "earliest")
        ending = _bound(given, "ending", selection, "latest")
        if not streaming and (starting == "latest" or (isinstance(starting, dict) and any(
                LATEST in offsets.values() for offsets in starting.values()))):
            raise InvalidArgumentError("startingOffsets", given.get("startingoffsets"),
                                       "'earliest' or offsets (-2: earliest) for a batch query: 'latest' would "
                                       "read nothing")
        if ending == "earliest" or (isinstance(ending, dict) and any(
                EARLIEST in offsets.values() for offsets in ending.values())):
            raise InvalidArgumentError("endingOffsets", given.get("endingoffsets"),
                                       "'latest' or offsets (-1: latest); 'earliest' would read nothing")
        strategy = given.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise InvalidArgumentError("startingOffsetsByTimestampStrategy", strategy, "'error' or 'latest'")
        max_offsets = _int(given, "maxOffsetsPerTrigger", minimum=1)
        min_offsets = _int(given, "minOffsetsPerTrigger", minimum=1)
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise InvalidArgumentError("minOffsetsPerTrigger", min_offsets, f"at most maxOffsetsPerTrigger "
                                       f"({max_offsets}): a micro-batch takes at most that many")
        return cls(location=parse_location(given), selection=selection, starting=starting, ending=ending,
                   timestamp_strategy=strategy,
                   max_records_per_partition=_int(given, "maxRecordsPerPartition", minimum=1),
                   max_offsets_per_trigger=max_offsets, min_offsets_per_trigger=min_offsets,
                   max_trigger_delay_ms=_duration_ms(given, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
                   fail_on_data_loss=_bool(given, "failOnDataLoss", default=True),
                   subscription=given.get("subscription") or None, value_schema=parse_value_schema(options),
                   read_compacted=_bool(given, "readCompacted", default=False))


@dataclass(frozen=True)
class SinkOptions:
    """A write's options: where, and the topic."""
    location: Location
    topic: str

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        given = lowered(options)
        return cls(location=parse_location(given), topic=_required(given, "topic"))


def parse_location(given: Mapping[str, str]) -> Location:
    """The path option, or serviceUrl with authToken and tlsTrustCertsFilePath (`given`: lowered())."""
    path, url = given.get("path") or None, given.get("serviceurl") or None
    token, trust = given.get("authtoken") or None, given.get("tlstrustcertsfilepath") or None
    if path is not None and url is not None:
        raise InvalidArgumentError("serviceUrl", url, "either path (a data directory this machine sees) or "
                                   "serviceUrl (a seglog serve), not both: path is given too")
    if url is None:
        if path is None:
            raise InvalidArgumentError("path", None, "the option path (a seglog data directory) or serviceUrl "
                                       "(http://HOST:PORT, the HTTP URL seglog serve prints)")
        for name, value in (("authToken", token), ("tlsTrustCertsFilePath", trust)):
            if value is not None:
                raise InvalidArgumentError(name, "(given)" if name == "authToken" else value,
                                           "only with serviceUrl: a data directory takes no credentials")
        return Location(path=path)
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1].strip("/")) == 0:
        raise InvalidArgumentError("serviceUrl", url, "the HTTP URL seglog serve prints: http://HOST:PORT or "
                                   "https://HOST:PORT")
    if trust is not None and not url.startswith("https://"):
        raise InvalidArgumentError("tlsTrustCertsFilePath", trust, "only with an https:// serviceUrl")
    return Location(service_url=url.rstrip("/"), auth_token=token, trust_file=trust)


def value_schema_topic(selection: TopicSelection) -> str:
    """The one topic whose schema types the values (valueSchema 'topic'); an error naming the options when they
    select several, or a pattern: a column has one type, and topics may have different schemas."""
    single = selection.single
    if single is None:
        raise InvalidArgumentError("valueSchema", VALUE_TOPIC, f"'{VALUE_BINARY}' when several topics are read "
                                   f"({selection.describe()}): 'topic' types values by one topic's schema; read "
                                   "one topic with the option topic")
    return single


def parse_value_schema(options: Mapping[str, str]) -> str:
    """The valueSchema option: 'binary' (the default) or 'topic'."""
    text = lowered(options).get("valueschema", VALUE_BINARY)
    if text.strip().lower() not in (VALUE_BINARY, VALUE_TOPIC):
        raise InvalidArgumentError("valueSchema", text, f"'{VALUE_BINARY}' (the value as stored, the default) or "
                                   f"'{VALUE_TOPIC}' (typed by the topic's schema)")
    return text.strip().lower()


def _required(given: dict[str, str], name: str) -> str:
    value = given.get(name.lower())
    if not value:
        raise InvalidArgumentError(name, value, f"the {name} option: .option({name!r}, ...)")
    return value


def _int(given: dict[str, str], name: str, *, minimum: int) -> int | None:
    text = given.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise InvalidArgumentError(name, text, f"an integer >= {minimum}")
    return value


def _bool(given: dict[str, str], name: str, *, default: bool) -> bool:
    text = given.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise InvalidArgumentError(name, text, "'true' or 'false'")
    return text.strip().lower() == "true"


def _bound(given: dict[str, str], which: str, selection: TopicSelection, default: str) -> Bound:
    """Where reads start (`which` 'starting') or end ('ending'): the timestamp option, else the by-timestamp
    JSON, else the offsets option, else `default`."""
    timestamp = _int(given, f"{which}Timestamp", minimum=0)
    if timestamp is not None:
        return ByTimestamp(f"{which}Timestamp", every=timestamp)
    name = f"{which}OffsetsByTimestamp"
    if name.lower() in given:
        return ByTimestamp(name, by_topic=_by_topic(given[name.lower()].strip(), name, selection, minimum=0,
                                                     accepted=_TIMES_ACCEPTED))
    text = given.get(f"{which}Offsets".lower(), default).strip()
    if text in ("earliest", "latest"):
        return text
    return _by_topic(text, f"{which}Offsets", selection, minimum=EARLIEST, accepted=_OFFSETS_ACCEPTED)


def _by_topic(text: str, name: str, selection: TopicSelection, *, minimum: int,
              accepted: str) -> dict[str, dict[int, int]]:
    """{topic: {partition: int >= minimum}} from JSON; the topics must be those named by topic or topics (a
    pattern's are checked when the read is planned)."""
    example = selection.names[0] if selection.names else "TOPIC"
    accepted = accepted.format(topic=example)
    try:
        parsed = json.loads(text)
    except ValueError:
        raise InvalidArgumentError(name, text, accepted) from None
    if not isinstance(parsed, dict) or not parsed or not all(isinstance(v, dict) for v in parsed.values()):
        raise InvalidArgumentError(name, text, accepted)
    if selection.pattern is None and set(parsed) != set(selection.names):
        topics = ", ".join(repr(topic) for topic in selection.names)
        raise InvalidArgumentError(name, text, accepted + f" (one object per topic read, as given: for the topic"
                                   f"{'s' if len(selection.names) > 1 else ''} {topics})")
    by_topic: dict[str, dict[int, int]] = {}
    for topic, values in parsed.items():
        by_topic[topic] = {}
        for partition, value in values.items():
            if not (partition.isascii() and partition.isdigit()) or isinstance(value, bool) \
                    or not isinstance(value, int) or value < minimum:
                raise InvalidArgumentError(name, text, accepted + f" (not {partition!r}: {value!r})")
            by_topic[topic][int(partition)] = value
    return by_topic


def _duration_ms(given: dict[str, str], name: str, default: int) -> int:
    """A time as Spark's time options take it (JavaUtils.timeStringAsMs): a number and a unit, ms if none."""
    text = given.get(name.lower())
    if text is None:
        return default
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if match is None or match[2] not in ("", *_TIME_UNITS_MS):
        raise InvalidArgumentError(name, text, "a duration: a number >= 0 and a unit, us, ms, s, m or min, h or d "
                                   "(ms if none), such as '15m'")
    return int(int(match[1]) * _TIME_UNITS_MS[match[2] or "ms"])
