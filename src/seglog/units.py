"""Sizes and durations as users write them, in options, configuration and the CLI.

Sizes are returned in bytes, durations in milliseconds, always as ints; -1 means "no limit" and is only
accepted where the caller says so (``allow_infinite=True``), as in Kafka's ``retention.bytes=-1`` and
Pulsar's ``--size -1``.

Size units, case-insensitive:

* ``K M G T P`` (single letters) are binary, 1K = 1024 bytes, because that is what pulsar-admin means by
  ``--size 10G`` and we want its command lines and their values to carry over unchanged.
* ``Ki Mi Gi Ti Pi`` and ``KiB MiB GiB TiB PiB`` are binary, as their IEC names say.
* ``KB MB GB TB PB`` are decimal, 1KB = 1000 bytes, as in Fluvio (which parses sizes with the bytesize
  crate): ``1 GB`` there is 10**9 bytes, and silently reading it as 2**30 would be 7% off.
* ``B``, ``byte`` and ``bytes`` are bytes; a bare number is bytes too.

Durations follow Rust's humantime, which Fluvio uses: one or more ``<number><unit>`` parts, such as
``1d 2h 3m 4s`` or ``7 days``, with units from milliseconds to weeks. A bare number is read in the unit the
caller names (seconds for pulsar-admin's ``--messageTTL 120``; milliseconds only where the setting's name
says so, as ``linger_ms``); where the caller names none, a bare number other than 0 is refused, because
tools differ (Kafka's ``retention.ms`` is milliseconds, pulsar-admin's ``--time`` seconds, Fluvio asks for
a unit) and guessing would be off by a factor of 1000. docs/GUIDE.md, "Units", has the table of which is which.

Numbers may have a decimal part (``1.5K``, ``1.5h``) as long as the result is a whole number of bytes or
milliseconds; nothing is rounded. Results are at most 2**63 - 1, the largest value a Kafka ``long``
configuration or a signed 64-bit field on disk can hold.

Timeouts, how long a call may wait in real time, are seconds as floats (``parse_timeout``): an int or float
>= 0, ``math.inf`` for no limit, or a duration string as above; None means what the API says it means.

Sizes are shown exactly by ``format_size`` (what a setting reads back as) and, in texts people read at a
glance (the CLI's tables, the retention explanation's reasons), by ``readable_size``: binary units only,
rounded where need be, so that the sizes of one output compare.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable
from datetime import datetime
from fractions import Fraction

from seglog.errors import InvalidArgumentError

__all__ = ["format_duration", "format_size", "parse_duration", "parse_size", "parse_timeout", "readable_size"]

_MAX = 2**63 - 1
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_NO_LIMIT = ", or -1 for no limit"

_KIB, _MIB, _GIB, _TIB, _PIB = (1024**power for power in range(1, 6))
_SIZE_UNITS: dict[str, int] = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "k": _KIB, "ki": _KIB, "kib": _KIB, "kb": 10**3,
    "m": _MIB, "mi": _MIB, "mib": _MIB, "mb": 10**6,
    "g": _GIB, "gi": _GIB, "gib": _GIB, "gb": 10**9,
    "t": _TIB, "ti": _TIB, "tib": _TIB, "tb": 10**12,
    "p": _PIB, "pi": _PIB, "pib": _PIB, "pb": 10**15,
}
_SIZE_TEXT = re.compile(rf"(?P<number>{_NUMBER})\s*(?P<unit>[a-z]*)", re.ASCII | re.IGNORECASE)
_SIZE_ACCEPTED = ("bytes as an int, or a number with a unit: 2048, '2 Ki', '10 MiB', '1 GB', 10G, 1T "
                  "(K/M/G/T/P and KiB.. are binary, KB/MB/GB.. decimal)")
# Largest first; format_size uses the largest in which the size is exact to two decimals.
_SIZE_FORMAT = ((_PIB, "PiB"), (_TIB, "TiB"), (_GIB, "GiB"), (_MIB, "MiB"), (_KIB, "KiB"))
_DECIMAL_SIZE_FORMAT = ((10**15, "PB"), (10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "KB"))

_SECOND = 1000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_WEEK = 7 * _DAY
_DURATION_UNITS: dict[str, int] = {
    **dict.fromkeys(("ms", "msec", "msecs", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), _SECOND),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), _MINUTE),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), _HOUR),
    **dict.fromkeys(("d", "day", "days"), _DAY),
    **dict.fromkeys(("w", "week", "weeks"), _WEEK),
}
# The units a bare number (or an int) may be given in, with the word used in error messages.
_PLAIN_UNITS: dict[str, tuple[int, str]] = {"ms": (1, "milliseconds"), "s": (_SECOND, "seconds"),
                                             "min": (_MINUTE, "minutes")}
_DURATION_PART = rf"({_NUMBER})\s*([a-z]+)\s*"
_DURATION_TEXT = re.compile(rf"(?:{_DURATION_PART})+", re.ASCII | re.IGNORECASE)
_DURATION_PARTS = re.compile(_DURATION_PART, re.ASCII | re.IGNORECASE)
_PLAIN_NUMBER = re.compile(_NUMBER, re.ASCII)
_DURATION_EXAMPLES = "a duration such as '1h', '2d 10s', '7 days', '1d 2h 3m 4s'"
_UNIT_NEEDED = ("a bare number is ambiguous here (Kafka's *.ms settings read it as milliseconds, pulsar-admin "
                "as seconds): give its unit, e.g. '3600s', '1h' or '500ms'")


def parse_size(value: int | str, *, argument: str = "size", allow_infinite: bool = False) -> int:
    """Return the size `value` in bytes: an int of bytes, or a string such as '2048', '10 MiB', '1 GB', '10G'.

    Single letters (K, M, G, T, P) and Ki/KiB.. are binary, KB/MB/GB.. decimal. -1 (int or '-1') is
    returned as is when `allow_infinite`, meaning no limit. Raises InvalidArgumentError naming `argument`."""
    return _parse_amount(value, argument=argument, allow_infinite=allow_infinite, accepted=_SIZE_ACCEPTED,
                         scale=1, parse_text=_bytes_in, whole="bytes")


def format_size(n: int) -> str:
    """Return `n` bytes in the unit that shows it shortest: 10485760 -> '10 MiB', 1536 -> '1.5 KiB',
    25000000 -> '25 MB', 100 -> '100 B', -1 -> 'infinite'.

    The result is exact, never rounded: a unit is used only where `n` has at most two decimals in it, the
    largest such binary unit and the largest such decimal one compete (binary wins a tie), down to bytes
    (1025 -> '1025 B'), so parse_size(format_size(n)) == n."""
    _check_formattable(n, argument="size", accepted="bytes as an int >= 0, or -1 for no limit")
    if n == -1:
        return "infinite"
    candidates = [_exactly_in(n, _SIZE_FORMAT), _exactly_in(n, _DECIMAL_SIZE_FORMAT), (str(n), "B")]
    number, name = min((c for c in candidates if c is not None), key=lambda c: len(c[0]))
    return f"{number} {name}"


def readable_size(n: int) -> str:
    """`n` bytes in the largest binary unit it reaches: exact where two decimals are ('64 MiB', '1.5 KiB',
    '100 B'), else rounded to one ('21.4 MiB', '9.3 GiB' for 10 GB); -1, no limit, is 'infinite'.

    Binary units only, so the sizes of one output compare at a glance (format_size, which must be exact,
    may pick '10 GB' for one size and '1 GiB' for the next); the JSON outputs keep exact bytes."""
    if n == -1:
        return "infinite"
    for unit, name in _SIZE_FORMAT:
        if n >= unit:
            exact = _exactly_in(n, ((unit, name),))
            return f"{exact[0]} {name}" if exact is not None else f"{n / unit:.1f} {name}"
    return f"{n} B"


def _exactly_in(n: int, units: tuple[tuple[int, str], ...]) -> tuple[str, str] | None:
    """(number, unit name) of `n` in the largest of `units` where it has at most two decimals, if any."""
    for unit, name in units:
        if n >= unit and n * 100 % unit == 0:
            whole, hundredths = divmod(n * 100 // unit, 100)
            decimals = f".{hundredths:02d}".rstrip("0") if hundredths else ""
            return f"{whole}{decimals}", name
    return None


def parse_duration(value: int | str, *, argument: str = "duration", allow_infinite: bool = False,
                   unit: str | None = None) -> int:
    """Return the duration `value` in milliseconds.

    A string may be humantime-style parts such as '6h', '1d 2h 3m 4s', '7 days', '500ms', '1w'. An int or a
    bare number ('120', '1.5') is read in `unit` ('ms', 's' or 'min'); with no `unit`, one other than 0 is
    refused as ambiguous. -1 (int or '-1') is returned as is when `allow_infinite`, meaning no limit. Raises
    InvalidArgumentError naming `argument`."""
    if unit is None:
        accepted = f"{_DURATION_EXAMPLES} (a number needs its unit), or 0"
        if _is_bare_positive_number(value):
            raise InvalidArgumentError(argument, value, accepted + (_NO_LIMIT if allow_infinite else ""),
                                       _UNIT_NEEDED)
        scale = 1  # only 0 and -1 are left to be read bare, the same in any unit
    elif unit in _PLAIN_UNITS:
        scale, unit_name = _PLAIN_UNITS[unit]
        accepted = f"{unit_name} as an int, or {_DURATION_EXAMPLES}"
    else:
        raise InvalidArgumentError("unit", unit, ", ".join(map(repr, _PLAIN_UNITS)) + " or None")
    return _parse_amount(value, argument=argument, allow_infinite=allow_infinite, accepted=accepted,
                         scale=scale, parse_text=lambda text: _milliseconds_in(text, scale), whole="milliseconds")


def as_typed(value: object, unit: str) -> str:
    """A size or duration as a message shows it, in the unit the user gave it: text as typed ('10G', '3h'),
    a number with the unit a bare number counts (`unit`: '10737418240 bytes', '3600 seconds'), -1 as is."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool) and value != -1:
        return f"{value} {unit}"
    return str(value)


def _is_bare_positive_number(value: object) -> bool:
    """Whether `value` is a number without a unit, above 0: an int, or a string of digits."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > 0
    return isinstance(value, str) and _PLAIN_NUMBER.fullmatch(value.strip()) is not None \
        and any(digit in "123456789" for digit in value)


def format_duration(ms: int) -> str:
    """Return `ms` milliseconds as humantime-style parts: 93784000 -> '1day 2h 3m 4s', 172800000 -> '2days',
    1500 -> '1s 500ms', 0 -> '0s', -1 -> 'infinite'. parse_duration reads the result back exactly."""
    _check_formattable(ms, argument="duration", accepted="milliseconds as an int >= 0, or -1 for no limit")
    if ms == -1:
        return "infinite"
    days, rest = divmod(ms, _DAY)
    parts = [f"{days}day" if days == 1 else f"{days}days"] if days else []
    for size, name in ((_HOUR, "h"), (_MINUTE, "m"), (_SECOND, "s"), (1, "ms")):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{name}")
    return " ".join(parts) or "0s"


def parse_timeout(value: object, *, argument: str = "timeout", none: float) -> float:
    """Seconds to wait, as every seglog call that takes a timeout reads it: an int or float >= 0, math.inf
    for no limit, or a duration such as '500ms', '30s', '1m 30s'. None stands for `none` (0: do not wait,
    or math.inf), as the calling API documents. NaN, negatives and anything else raise InvalidArgumentError
    naming `argument` and saying what is accepted."""
    if value is None:
        return none
    if isinstance(value, str):
        return parse_duration(value, argument=argument, unit="s") / 1000
    accepted = (f"seconds as an int or float >= 0 (math.inf: no limit), a duration such as '500ms' or '30s', "
                f"or None ({'no limit' if none == math.inf else 'do not wait'})")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(argument, value, accepted, f"expected a number or a str, not {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:
        raise InvalidArgumentError(argument, value, accepted, "it is too large for a float") from None
    if math.isnan(seconds):
        raise InvalidArgumentError(argument, value, accepted, "it is NaN")
    if seconds < 0:
        raise InvalidArgumentError(argument, value, accepted, "it is negative")
    return seconds


def parse_time_ms(value: object, *, argument: str = "time") -> int:
    """A moment as ms since the epoch: an int >= 0 (ms since the epoch, as Pulsar's clients take
    deliver_at) or a datetime (a naive one is local time, as datetime.timestamp() reads it)."""
    accepted = "ms since the epoch as an int >= 0, or a datetime"
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(argument, value, accepted,
                                   f"expected an int or a datetime, not {type(value).__name__}")
    if not 0 <= value < 2**63:
        raise InvalidArgumentError(argument, value, accepted)
    return value


def _parse_amount(value: object, *, argument: str, allow_infinite: bool, accepted: str, scale: int,
                  parse_text: Callable[[str], Fraction], whole: str) -> int:
    """The checks parse_size and parse_duration share. An int is multiplied by `scale`; a string is
    converted by `parse_text`, which raises ValueError saying what is wrong with it. The result must be
    a whole number of `whole` (bytes or milliseconds) between 0 and 2**63 - 1, or -1 if `allow_infinite`."""
    if allow_infinite:
        accepted += _NO_LIMIT

    def refuse(detail: str) -> InvalidArgumentError:
        return InvalidArgumentError(argument, value, accepted, detail)

    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise refuse(f"expected an int or a str, not {type(value).__name__}")
    if value == -1 or (isinstance(value, str) and value.strip() == "-1"):
        if allow_infinite:
            return -1
        raise refuse("-1 (no limit) is not accepted here")
    if isinstance(value, int):
        amount = Fraction(value * scale)
    else:
        text = value.strip()
        if not text:
            raise refuse("it is empty")
        if text.startswith("-"):
            raise refuse("it is negative")
        try:
            amount = parse_text(text)
        except ValueError as exc:
            raise refuse(str(exc)) from None
    if amount < 0:
        raise refuse("it is negative")
    if amount.denominator != 1:
        raise refuse(f"it is not a whole number of {whole}")
    if amount > _MAX:
        raise refuse(f"it is more than the maximum, {_MAX} {whole}")
    return int(amount)


def _number(text: str) -> Fraction:
    """`text`, digits with an optional decimal part, as an exact Fraction."""
    try:
        return Fraction(text)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        raise ValueError("the number has too many digits") from None


def _bytes_in(text: str) -> Fraction:
    match = _SIZE_TEXT.fullmatch(text)
    if match is None:
        raise ValueError("expected a number, optionally followed by a unit")
    unit = match["unit"].lower()
    if unit not in _SIZE_UNITS:
        raise ValueError(f"unknown unit {match['unit']!r}")
    return _number(match["number"]) * _SIZE_UNITS[unit]


def _milliseconds_in(text: str, scale: int) -> Fraction:
    if _PLAIN_NUMBER.fullmatch(text):
        return _number(text) * scale
    if not _DURATION_TEXT.fullmatch(text):
        raise ValueError("expected a number, or parts made of a number and a unit")
    total = Fraction(0)
    for number, unit in _DURATION_PARTS.findall(text):
        if unit.lower() not in _DURATION_UNITS:
            raise ValueError(f"unknown unit {unit!r} (use ms, s, m, h, d or w)")
        total += _number(number) * _DURATION_UNITS[unit.lower()]
    return total


def _check_formattable(n: object, *, argument: str, accepted: str) -> None:
    """Refuse what format_size and format_duration cannot show: anything but an int >= -1."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidArgumentError(argument, n, accepted, f"expected an int, not {type(n).__name__}")
    if n < -1:
        raise InvalidArgumentError(argument, n, accepted, "it is negative")
