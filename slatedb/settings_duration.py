"""Durations in the official settings' string form (``"100ms"``, ``"1h 2m"``, ``"1s+500ms"``).

:mod:`slatedb.config` reads and writes every duration setting through these two functions. (The
checkpoint lifetimes of the CLI use the humantime form in :mod:`slatedb.checkpoint.duration`.)
"""

from __future__ import annotations

import math
import re
from typing import Final

from slatedb.errors import InvalidArgumentError

_UNIT_SECONDS: Final[dict[str, float]] = {}
for _names, _secs in (
    (("ns", "nsec", "nanos", "nanosecond", "nanoseconds"), 1e-9),
    (("us", "µs", "usec", "micros", "microsecond", "microseconds"), 1e-6),
    (("ms", "msec", "millis", "millisecond", "milliseconds"), 1e-3),
    (("s", "sec", "secs", "second", "seconds"), 1.0),
    (("m", "min", "mins", "minute", "minutes"), 60.0),
    (("h", "hr", "hrs", "hour", "hours"), 3600.0),
    (("d", "day", "days"), 86400.0),
    (("w", "week", "weeks"), 7 * 86400.0),
    (("mon", "month", "months"), 30 * 86400.0),  # the official engine: 1mon = 2592000s
    (("y", "year", "years"), 365 * 86400.0),  # the official engine: 1y = 31536000s
):
    for _n in _names:
        _UNIT_SECONDS[_n] = _secs

_DURATION_PART = re.compile(r"\s*(\d+)\s*([a-zµ]+)\s*\+?", re.IGNORECASE)


def parse_duration(text: str, *, name: str = "duration") -> float:
    """Seconds in an official duration string (``"100ms"``, ``"1h 2m"``, ``"1s+500ms"``)."""
    pos = 0
    total = 0.0
    stripped = text.strip()
    if not stripped:
        raise InvalidArgumentError(f"{name}: empty duration")
    while pos < len(stripped):
        m = _DURATION_PART.match(stripped, pos)
        if m is None:
            raise InvalidArgumentError(f"{name}: cannot parse duration {text!r} (expected e.g. '100ms', '1s', '1h 2m')")
        unit = m.group(2).lower()
        if unit not in _UNIT_SECONDS:
            raise InvalidArgumentError(f"{name}: unknown duration unit {m.group(2)!r} in {text!r}")
        try:
            total += int(m.group(1)) * _UNIT_SECONDS[unit]
        except OverflowError:  # digits beyond a float: past any bound a setting has
            raise InvalidArgumentError(f"{name}: duration {text!r} is too long") from None
        pos = m.end()
    return total


def format_duration(seconds: float) -> str:
    """The official serializer's form: whole milliseconds, ``"5s"``, ``"050ms"``, ``"1s+500ms"``."""
    whole = math.floor(seconds)  # whole seconds apart: seconds * 1e9 loses them past 2**53 ns
    total_ms = whole * 1000 + int(round((seconds - whole) * 1e9)) // 1_000_000
    secs, ms = divmod(total_ms, 1000)
    if ms == 0:
        return f"{secs}s"
    if secs == 0:
        return f"{ms:03d}ms"
    return f"{secs}s+{ms:03d}ms"
