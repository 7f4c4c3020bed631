"""The source's and sink's options, read and checked once, as Spark's Kafka source names them.

    path                      a seglog data directory this machine sees (its executors too), or
    serviceUrl                the HTTP URL of a `seglog serve` (http://HOST:PORT or https://), which the driver
                              plans with and the executors read from (its Flight port): one of the two
    authToken                 with serviceUrl: the token of a role allowed to (a server with authentication)
    tlsTrustCertsFilePath     with an https:// serviceUrl: the CA certificates (PEM) the server's is signed by,
                              when the system's do not
    topic                     the topic, 'name' or 'tenant/namespace/name' (required)
    startingOffsets           'earliest', 'latest' (streaming only) or JSON {"TOPIC": {"0": 23, "1": -2}}
                              (-2 earliest, -1 latest; every partition named); default: batch 'earliest',
                              streaming 'latest'
    endingOffsets             batch only: 'latest' (default) or JSON as above (-1 latest; no -2)
    startingTimestamp         ms since the epoch: each partition starts at its first message at or after it
                              (over startingOffsets, as in Spark)
    startingOffsetsByTimestampStrategy
                              where no message is that recent: 'error' (default: fail the query, as Spark)
                              or 'latest' (start at the end)
    maxRecordsPerPartition    split a seglog partition into Spark input partitions of at most this many
                              offsets
    maxOffsetsPerTrigger      streaming: at most this many offsets per micro-batch, over all partitions
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

from pyspark_seglog.sessions import Location
from seglog.errors import InvalidArgumentError

EARLIEST, LATEST = -2, -1
VALUE_BINARY, VALUE_TOPIC = "binary", "topic"  # the valueSchema option's values
# 'earliest' / 'latest', or {partition: offset} with -2 / -1 for earliest / latest
OffsetSpec = Union[str, dict[int, int]]

_OFFSETS_ACCEPTED = ("'earliest', 'latest', or JSON such as {{\"{topic}\": {{\"0\": 23, \"1\": -2}}}} naming every "
                     "partition (-2: earliest, -1: latest)")

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
    """A read's options, checked (see the module docstring)."""
    location: Location
    topic: str
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    timestamp_strategy: str
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    subscription: str | None
    value_schema: str = VALUE_BINARY
    read_compacted: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        given = lowered(options)
        topic = _required(given, "topic")
        starting = _offsets(given, "startingOffsets", topic, "latest" if streaming else "earliest")
        ending = _offsets(given, "endingOffsets", topic, "latest")
        if not streaming and (starting == "latest" or (isinstance(starting, dict) and LATEST in starting.values())):
            raise InvalidArgumentError("startingOffsets", given.get("startingoffsets"),
                                       "'earliest' or offsets (-2: earliest) for a batch query: 'latest' would "
                                       "read nothing")
        if ending == "earliest" or (isinstance(ending, dict) and EARLIEST in ending.values()):
            raise InvalidArgumentError("endingOffsets", given.get("endingoffsets"),
                                       "'latest' or offsets (-1: latest); 'earliest' would read nothing")
        if streaming and "endingoffsets" in given:
            raise InvalidArgumentError("endingOffsets", given["endingoffsets"],
                                       "only in batch queries (a stream has no end)")
        for name in ("subscription", "maxOffsetsPerTrigger"):
            if not streaming and name.lower() in given:
                raise InvalidArgumentError(name, given[name.lower()], "only in streaming queries")
        if streaming and "readcompacted" in given:
            raise InvalidArgumentError("readCompacted", given["readcompacted"], _READ_COMPACTED_IN_BATCHES)
        strategy = given.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise InvalidArgumentError("startingOffsetsByTimestampStrategy", strategy, "'error' or 'latest'")
        return cls(location=parse_location(given), topic=topic, starting=starting, ending=ending,
                   starting_timestamp=_int(given, "startingTimestamp", minimum=0), timestamp_strategy=strategy,
                   max_records_per_partition=_int(given, "maxRecordsPerPartition", minimum=1),
                   max_offsets_per_trigger=_int(given, "maxOffsetsPerTrigger", minimum=1),
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


def _offsets(given: dict[str, str], name: str, topic: str, default: str) -> OffsetSpec:
    text = given.get(name.lower(), default).strip()
    if text in ("earliest", "latest"):
        return text
    accepted = _OFFSETS_ACCEPTED.format(topic=topic)
    try:
        parsed = json.loads(text)
    except ValueError:
        raise InvalidArgumentError(name, text, accepted) from None
    if not isinstance(parsed, dict) or set(parsed) != {topic} or not isinstance(parsed[topic], dict):
        raise InvalidArgumentError(name, text, accepted + f" (one object, for the topic {topic!r} as given)")
    offsets = {}
    for partition, offset in parsed[topic].items():
        if not (partition.isascii() and partition.isdigit()) or isinstance(offset, bool) \
                or not isinstance(offset, int) or offset < EARLIEST:
            raise InvalidArgumentError(name, text, accepted + f" (not {partition!r}: {offset!r})")
        offsets[int(partition)] = offset
    return offsets
