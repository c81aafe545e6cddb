"""Human-friendly durations for checkpoint lifetimes and the CLI: ``"7days 30min 10s"`` (the
official CLI's ``humantime`` format: a sequence of ``<number><unit>`` terms, spaces optional),
plus what people type besides: decimals (``"1.5h"``, ``"0.5 days"``) and a bare number, which
is **seconds** (``"90"`` = ``"90s"``). Negative, non-finite and unit-less terms after the first
are refused."""

from __future__ import annotations

import re

from slatedb.errors import InvalidArgumentError

_UNITS_S: dict[str, float] = {}
for names, seconds in (
    (("nsec", "ns"), 1e-9),
    (("usec", "us"), 1e-6),
    (("msec", "ms"), 1e-3),
    (("seconds", "second", "secs", "sec", "s"), 1.0),
    (("minutes", "minute", "mins", "min", "m"), 60.0),
    (("hours", "hour", "hrs", "hr", "h"), 3600.0),
    (("days", "day", "d"), 86400.0),
    (("weeks", "week", "w"), 7 * 86400.0),
    (("months", "month", "M"), 30.44 * 86400.0),
    (("years", "year", "y"), 365.25 * 86400.0),
):
    for name in names:
        _UNITS_S[name] = seconds

_TERM = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z]+)\s*")
_BARE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; :class:`InvalidArgumentError` naming the bad part otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError(f"duration must be a non-empty string like '7days 30min 10s', got {text!r}")
    bare = _BARE.fullmatch(text)
    if bare is not None:  # a bare number: seconds
        return float(bare.group(1))
    total = 0.0
    pos = 0
    while pos < len(text):
        m = _TERM.match(text, pos)
        if m is None or m.end() == pos:
            raise InvalidArgumentError(
                f"malformed duration {text!r} at {text[pos:]!r}: expected terms like '7days 30min 10s'")
        number, unit = m.groups()
        if unit not in _UNITS_S:
            raise InvalidArgumentError(f"malformed duration {text!r}: unknown unit {unit!r}")
        total += float(number) * _UNITS_S[unit]
        pos = m.end()
    return total


def format_duration(seconds: float) -> str:
    """The inverse for whole seconds (``93610`` -> ``"1day 2h 10s"``)."""
    s = int(seconds)
    if s <= 0:
        return "0s"
    parts = []
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        n, s = divmod(s, size)
        if n:
            parts.append(f"{n}{unit}{'s' if unit == 'day' and n > 1 else ''}")
    return " ".join(parts)
