"""Sizes and durations as users write them: seglog.units."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import InvalidArgumentError
from seglog.units import format_duration, format_size, parse_duration, parse_size, readable_size

KiB, MiB, GiB, TiB, PiB = (1024**power for power in range(1, 6))
SECOND, MINUTE, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000
MAX = 2**63 - 1


# --- parse_size ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    (0, 0),
    (2048, 2048),
    ("2048", 2048),
    ("  2048  ", 2048),
    ("0", 0),
    # single letters are binary, as in pulsar-admin
    ("10G", 10 * GiB),
    ("10g", 10 * GiB),
    ("1T", TiB),
    ("2K", 2048),
    ("3 M", 3 * MiB),
    ("1P", PiB),
    # IEC names are binary
    ("2 Ki", 2048),
    ("10 MiB", 10 * MiB),
    ("10mib", 10 * MiB),
    ("1GiB", GiB),
    ("1 Ti", TiB),
    ("1 PiB", PiB),
    # KB, MB.. are decimal, as in Fluvio (bytesize)
    ("1 GB", 10**9),
    ("1gb", 10**9),
    ("5KB", 5000),
    ("2 MB", 2 * 10**6),
    ("1 TB", 10**12),
    ("1 PB", 10**15),
    # bytes
    ("100 B", 100),
    ("100b", 100),
    ("1 byte", 1),
    ("100 bytes", 100),
    # decimal numbers, as long as the result is whole bytes
    ("1.5K", 1536),
    ("1.5 KiB", 1536),
    ("0.5 GB", 5 * 10**8),
    ("1.25 MiB", 1_310_720),
    ("2.0", 2),
    # the largest value a signed 64-bit field holds
    (MAX, MAX),
    (str(MAX), MAX),
    ("8191 PiB", 8191 * PiB),
])
def test_parse_size_accepts(value: int | str, expected: int) -> None:
    assert parse_size(value) == expected


@pytest.mark.parametrize(("value", "detail"), [
    ("", "empty"),
    ("   ", "empty"),
    ("abc", "expected a number"),
    ("G", "expected a number"),
    ("10 X", "unknown unit 'X'"),
    ("10 EiB", "unknown unit 'EiB'"),
    ("10 GBs", "unknown unit 'GBs'"),
    ("10 G B", "expected a number"),
    ("nan", "expected a number"),
    ("NaN", "expected a number"),
    ("inf", "expected a number"),
    ("-inf", "negative"),
    ("1e3", "expected a number"),
    (".5K", "expected a number"),
    ("1.", "expected a number"),
    ("1,000", "expected a number"),
    ("1_000", "expected a number"),
    ("+5", "expected a number"),
    ("0x10", "expected a number"),
    ("\u0661\u0662", "expected a number"),  # Arabic-Indic digits are not ASCII digits
    ("0.3 B", "not a whole number of bytes"),
    ("1.1", "not a whole number of bytes"),
    ("0.001 K", "not a whole number of bytes"),
    (-2, "negative"),
    ("-2", "negative"),
    ("-1 K", "negative"),
    (-1, "-1 (no limit) is not accepted here"),
    ("-1", "-1 (no limit) is not accepted here"),
    ("10000 PB", "more than the maximum"),
    ("8192 PiB", "more than the maximum"),
    ("9" * 5000, "too many digits"),
    (True, "not bool"),
    (1.5, "not float"),
    (1024.0, "not float"),
    (None, "not NoneType"),
    (b"1K", "not bytes"),
])
def test_parse_size_refuses(value: object, detail: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        parse_size(value, argument="segment_size")  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"invalid segment_size {value!r}")
    assert detail in message
    assert "accepted: bytes as an int, or a number with a unit: 2048, '2 Ki', '10 MiB', '1 GB', 10G" in message
    assert "KB/MB/GB.. decimal" in message
    assert "-1 for no limit" not in message
    assert caught.value.argument == "segment_size"
    assert caught.value.value == value


def test_parse_size_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="invalid size 'lots'"):
        parse_size("lots")


@pytest.mark.parametrize("value", [-1, "-1", " -1 "])
def test_parse_size_minus_one_means_no_limit_when_allowed(value: int | str) -> None:
    assert parse_size(value, allow_infinite=True) == -1


@pytest.mark.parametrize("value", [-2, "-2", "-1.0", "-1 B", "infinite", "unlimited"])
def test_parse_size_allow_infinite_still_refuses_other_negatives(value: int | str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"invalid retention_size .*; accepted: .*, or -1 for no limit$"):
        parse_size(value, argument="retention_size", allow_infinite=True)


# --- format_size ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "expected"), [
    (10 * MiB, "10 MiB"),
    (1536, "1.5 KiB"),
    (100, "100 B"),
    (-1, "infinite"),
    (0, "0 B"),
    (1, "1 B"),
    (1023, "1023 B"),
    (KiB, "1 KiB"),
    (1025, "1025 B"),  # 1.0009765625 KiB: shown exactly rather than rounded
    (1280, "1.25 KiB"),
    (1152, "1152 B"),  # 1.125 KiB needs three decimals
    (int(1.75 * GiB), "1.75 GiB"),
    (GiB + MiB, "1025 MiB"),
    (10**9, "1 GB"),  # decimal where it is shorter than binary (976562.5 KiB)
    (25 * 10**6, "25 MB"),
    (1000, "1 KB"),
    (1500, "1.5 KB"),
    (1024000, "1000 KiB"),  # a tie with '1024 KB': binary
    (TiB, "1 TiB"),
    (PiB, "1 PiB"),
    (4096 * PiB, "4096 PiB"),
    (MAX, f"{MAX} B"),
])
def test_format_size(n: int, expected: str) -> None:
    assert format_size(n) == expected


@pytest.mark.parametrize("n", [-2, True, 1.0, "1K", None])
def test_format_size_refuses(n: object) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^invalid size .*; accepted: bytes as an int >= 0, or -1"):
        format_size(n)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=MAX))
def test_format_size_round_trips(n: int) -> None:
    assert parse_size(format_size(n)) == n


@given(st.integers(min_value=1, max_value=1023), st.sampled_from([KiB, MiB, GiB, TiB, PiB]),
       st.sampled_from([0, 25, 50, 75]))
def test_format_size_uses_the_largest_exact_unit(whole: int, unit: int, hundredths: int) -> None:
    """The largest binary unit, unless a decimal unit shows the size in fewer characters."""
    n = whole * unit + hundredths * unit // 100
    text = format_size(n)
    number, name = text.split(" ")
    binary = str(whole) + {0: "", 25: ".25", 50: ".5", 75: ".75"}[hundredths]
    if name.endswith("iB"):
        assert name == {KiB: "KiB", MiB: "MiB", GiB: "GiB", TiB: "TiB", PiB: "PiB"}[unit]
        assert number == binary
    else:
        assert name in ("KB", "MB", "GB", "TB", "PB") and len(number) < len(binary)
    assert parse_size(text) == n



# --- readable_size -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "expected"), [
    (0, "0 B"), (100, "100 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"), (1025, "1.0 KiB"),
    (64 * MiB, "64 MiB"), (22_439_526, "21.4 MiB"), (10**9, "953.7 MiB"), (10 * 10**9, "9.3 GiB"),
    (1024 * PiB, "1024 PiB"), (-1, "infinite"),
])
def test_readable_size(n: int, expected: str) -> None:
    """The largest binary unit reached, exact to two decimals or else rounded to one; never a decimal unit."""
    assert readable_size(n) == expected

# --- parse_duration ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    (0, 0),
    ("0", 0),
    (" 0.0 ", 0),
    ("0s", 0),
    ("6h", 6 * HOUR),
    ("3h", 3 * HOUR),
    ("1d 2h 3m 4s", DAY + 2 * HOUR + 3 * MINUTE + 4 * SECOND),
    ("1d2h3m4s", DAY + 2 * HOUR + 3 * MINUTE + 4 * SECOND),
    ("2d 10s", 2 * DAY + 10 * SECOND),
    ("7 days", 7 * DAY),
    ("1day", DAY),
    ("2days", 2 * DAY),
    ("1.5h", 90 * MINUTE),
    ("0.5s", 500),
    ("500ms", 500),
    ("1w", 7 * DAY),
    ("2 weeks", 14 * DAY),
    ("1 week", 7 * DAY),
    ("1s 500ms", 1500),
    ("10 msec", 10),
    ("10 millis", 10),
    ("10 milliseconds", 10),
    ("5 sec", 5 * SECOND),
    ("5 secs", 5 * SECOND),
    ("1 second", SECOND),
    ("5 seconds", 5 * SECOND),
    ("5m", 5 * MINUTE),
    ("5 min", 5 * MINUTE),
    ("5 mins", 5 * MINUTE),
    ("1 minute", MINUTE),
    ("5 minutes", 5 * MINUTE),
    ("2hr", 2 * HOUR),
    ("2 hrs", 2 * HOUR),
    ("1 hour", HOUR),
    ("2 hours", 2 * HOUR),
    ("3d", 3 * DAY),
    ("1H", HOUR),
    ("1D 2H", DAY + 2 * HOUR),
    ("5MS", 5),
    ("5M", 5 * MINUTE),  # case-insensitive: M is minutes, not months
    ("1h 1h", 2 * HOUR),  # parts add up
    ("30m 1h", 90 * MINUTE),  # in any order
    ("%dms" % MAX, MAX),
])
def test_parse_duration_accepts(value: int | str, expected: int) -> None:
    assert parse_duration(value) == expected


@pytest.mark.parametrize("value", [1500, "1500", " 1500 ", "0.5", MAX])
def test_parse_duration_refuses_a_bare_number_when_the_caller_names_no_unit(value: int | str) -> None:
    """Kafka's retention.ms would read 3600 as ms, pulsar-admin as seconds: a guess is off 1000 times."""
    with pytest.raises(InvalidArgumentError) as caught:
        parse_duration(value, argument="retention_time")
    message = str(caught.value)
    assert message.startswith(f"invalid retention_time {value!r}: a bare number is ambiguous here")
    assert "give its unit, e.g. '3600s', '1h' or '500ms'" in message
    assert message.endswith("accepted: a duration such as '1h', '2d 10s', '7 days', '1d 2h 3m 4s' (a number "
                            "needs its unit), or 0")


@pytest.mark.parametrize(("value", "unit", "expected"), [
    (120, "s", 120 * SECOND),
    ("120", "s", 120 * SECOND),
    ("1.5", "s", 1500),
    (5, "min", 5 * MINUTE),
    ("0.5", "min", 30 * SECOND),
    (120, "ms", 120),
    ("2h", "s", 2 * HOUR),  # a unit in the string wins
    ("500ms", "min", 500),
    (0, "s", 0),
])
def test_parse_duration_bare_numbers_are_in_the_callers_unit(value: int | str, unit: str, expected: int) -> None:
    assert parse_duration(value, unit=unit) == expected


@pytest.mark.parametrize(("value", "detail"), [
    ("", "empty"),
    ("  ", "empty"),
    ("h", "expected a number, or parts made of a number and a unit"),
    ("abc", "expected a number"),
    ("1h 30", "expected a number"),  # a bare number only on its own
    ("1 h h", "expected a number"),
    ("1h, 2m", "expected a number"),
    ("1h-2m", "expected a number"),
    ("nan", "expected a number"),
    ("inf", "expected a number"),
    ("1e3s", "unknown unit 'e'"),
    ("5 fortnights", "unknown unit 'fortnights'"),
    ("1 month", "unknown unit 'month'"),
    ("1y", "unknown unit 'y'"),
    ("1us", "unknown unit 'us'"),
    ("1.5", "not a whole number of milliseconds"),
    ("0.5ms", "not a whole number of milliseconds"),
    ("1.0005s", "not a whole number of milliseconds"),
    ("-5", "negative"),
    ("-1h", "negative"),
    (-5, "negative"),
    (-1, "-1 (no limit) is not accepted here"),
    ("-1", "-1 (no limit) is not accepted here"),
    (MAX + 1, "more than the maximum"),
    ("106751991168days", "more than the maximum"),
    ("9" * 5000 + "s", "too many digits"),
    (True, "not bool"),
    (1.5, "not float"),
    (None, "not NoneType"),
])
def test_parse_duration_refuses(value: object, detail: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        parse_duration(value, argument="retention_time", unit="ms")  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"invalid retention_time {value!r}")
    assert detail in message
    assert message.endswith("accepted: milliseconds as an int, or a duration such as "
                            "'1h', '2d 10s', '7 days', '1d 2h 3m 4s'")
    assert caught.value.argument == "retention_time"


@pytest.mark.parametrize(("unit", "word"), [("ms", "milliseconds"), ("s", "seconds"), ("min", "minutes")])
def test_parse_duration_message_names_the_callers_unit(unit: str, word: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"^invalid message_ttl 'soon': .*; accepted: {word} as an int, "):
        parse_duration("soon", argument="message_ttl", unit=unit)


def test_parse_duration_refuses_an_unknown_caller_unit() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^invalid unit 'h'; accepted: 'ms', 's', 'min' or None$"):
        parse_duration(1, unit="h")


@pytest.mark.parametrize("unit", ["ms", "s", "min"])
@pytest.mark.parametrize("value", [-1, "-1", " -1"])
def test_parse_duration_minus_one_means_no_limit_when_allowed(value: int | str, unit: str) -> None:
    assert parse_duration(value, allow_infinite=True, unit=unit) == -1  # not scaled by the unit


@pytest.mark.parametrize("value", [-2, "-2", "-1s", "-1.0", "forever"])
def test_parse_duration_allow_infinite_still_refuses_other_negatives(value: int | str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^invalid message_ttl .*, or -1 for no limit$"):
        parse_duration(value, argument="message_ttl", allow_infinite=True, unit="s")


# --- format_duration -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("ms", "expected"), [
    (93_784_000, "1day 2h 3m 4s"),
    (172_800_000, "2days"),
    (3_600_000, "1h"),
    (1500, "1s 500ms"),
    (0, "0s"),
    (-1, "infinite"),
    (1, "1ms"),
    (DAY, "1day"),
    (7 * DAY, "7days"),
    (DAY + 1, "1day 1ms"),
    (2 * DAY + 10 * SECOND, "2days 10s"),
    (59 * MINUTE + 59 * SECOND + 999, "59m 59s 999ms"),
    (MAX, "106751991167days 7h 12m 55s 807ms"),
])
def test_format_duration(ms: int, expected: str) -> None:
    assert format_duration(ms) == expected


@pytest.mark.parametrize("ms", [-2, True, 1.0, "1h", None])
def test_format_duration_refuses(ms: object) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^invalid duration .*; accepted: milliseconds as an int >= 0"):
        format_duration(ms)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=MAX))
def test_format_duration_round_trips(ms: int) -> None:
    assert parse_duration(format_duration(ms)) == ms


@given(st.integers(min_value=0, max_value=10 * 365 * DAY))
def test_format_duration_round_trips_realistic_values(ms: int) -> None:
    text = format_duration(ms)
    assert parse_duration(text) == ms
    assert "  " not in text and text == text.strip()


@given(st.lists(st.tuples(st.integers(min_value=0, max_value=10**6),
                          st.sampled_from(["ms", "s", "m", "h", "d", "w"])), min_size=1, max_size=6),
       st.sampled_from(["", " ", "  "]))
def test_parse_duration_adds_up_parts(parts: list[tuple[int, str]], separator: str) -> None:
    scale = {"ms": 1, "s": SECOND, "m": MINUTE, "h": HOUR, "d": DAY, "w": 7 * DAY}
    text = separator.join(f"{number}{unit}" for number, unit in parts)
    assert parse_duration(text) == sum(number * scale[unit] for number, unit in parts)
