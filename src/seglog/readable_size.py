"""Sizes as people read them in seglog's texts (the CLI's tables, the retention explanation's reasons).

Binary units only, so the sizes of one output compare at a glance (units.format_size, which must be exact,
may pick '10 GB' for one size and '1 GiB' for the next); the JSON outputs keep exact bytes."""

from __future__ import annotations

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def readable_size(n: int) -> str:
    """`n` bytes in the largest binary unit it reaches: exact where two decimals are ('64 MiB', '1.5 KiB',
    '100 B'), else rounded to one ('21.4 MiB', '9.3 GiB' for 10 GB); -1, no limit, is 'infinite'."""
    if n == -1:
        return "infinite"
    power = min((n.bit_length() - 1) // 10, len(_BINARY_UNITS) - 1) if n > 0 else 0
    unit = 1024**power
    if n * 100 % unit:
        return f"{n / unit:.1f} {_BINARY_UNITS[power]}"
    whole, hundredths = divmod(n * 100 // unit, 100)
    decimals = f".{hundredths:02d}".rstrip("0") if hundredths else ""
    return f"{whole}{decimals} {_BINARY_UNITS[power]}"
