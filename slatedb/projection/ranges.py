"""Key ranges for projection and union: the user's ``KeyRange`` (start inclusive, end
exclusive, either side open), its typed form ``a..m``, and conversions to the manifest's
``BytesRange`` and the read path's :class:`~slatedb.lsm.view.KeyBounds`.
"""

from __future__ import annotations

import re

import attrs

from slatedb.lsm.view import UNBOUNDED, KeyBounds, bounds_of
from slatedb.errors import InvalidProjectionError
from slatedb.format.types import BoundType, BytesBound, BytesRange, CompactedSsTableV2, CompactedSsTableView


@attrs.frozen
class KeyRange:
    """``[start, end)``; ``None`` is open on that side. ``KeyRange()`` is every key."""

    start: bytes | None = None
    end: bytes | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("start", "end"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, (bytes, bytearray)):
                raise InvalidProjectionError(f"KeyRange.{name} must be bytes or None, not {type(v).__name__}")
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise InvalidProjectionError(f"empty key range {format_range(self)} (start must be below end)")

    @property
    def bounds(self) -> KeyBounds:
        return KeyBounds(self.start, True, self.end, False)

    def contains(self, key: bytes) -> bool:
        return self.bounds.contains(key)

    def __str__(self) -> str:
        return format_range(self)


FULL_RANGE = KeyRange()


def bytes_range(b: KeyBounds) -> BytesRange:
    """The manifest form of ``b``."""
    lo = BytesBound(None, BoundType.UNBOUNDED) if b.lo is None else BytesBound(
        b.lo, BoundType.INCLUDED if b.lo_inclusive else BoundType.EXCLUDED)
    hi = BytesBound(None, BoundType.UNBOUNDED) if b.hi is None else BytesBound(
        b.hi, BoundType.INCLUDED if b.hi_inclusive else BoundType.EXCLUDED)
    return BytesRange(lo, hi)


def as_bounds(r: KeyRange | KeyBounds | BytesRange | None) -> KeyBounds:
    if r is None:
        return UNBOUNDED
    if isinstance(r, KeyRange):
        return r.bounds
    if isinstance(r, BytesRange):
        b = bounds_of(r)
    elif isinstance(r, KeyBounds):
        b = r
    else:
        raise InvalidProjectionError(f"a projection range must be a KeyRange, not {type(r).__name__}")
    if b.lo is not None and not b.lo_inclusive:
        # The official engine asserts that a visible range starts Included or Unbounded.
        raise InvalidProjectionError(f"a projection range must include its start key ({b})")
    if b.is_empty():
        raise InvalidProjectionError(f"empty projection range ({b})")
    return b


def physical_bounds(info_sst: CompactedSsTableV2) -> KeyBounds:
    """``[first_entry, last_entry]`` of an SST (open above when the SST does not record its
    last key, as the official engine does)."""
    info = info_sst.info
    return KeyBounds(info.first_entry or b"", True, info.last_entry, info.last_entry is not None)


def effective_bounds(view: CompactedSsTableView, sst: CompactedSsTableV2) -> KeyBounds:
    """RFC 000: the view's effective range = physical range ∩ visible range."""
    return physical_bounds(sst).intersect(bounds_of(view.visible_range))


def start_cmp_key(b: KeyBounds) -> tuple:
    """Sort key of a start bound (open start first; included before excluded at one key)."""
    return (0, b"", 0) if b.lo is None else (1, b.lo, 0 if b.lo_inclusive else 1)


def overlaps(a: KeyBounds, b: KeyBounds) -> bool:
    return not a.intersect(b).is_empty()


def hull(a: KeyBounds, b: KeyBounds) -> KeyBounds:
    """The smallest bounds holding both (for adjacent ``a`` < ``b``: their concatenation)."""
    if a.lo is None or b.lo is None:
        lo, lo_inc = None, True
    elif start_cmp_key(a) <= start_cmp_key(b):
        lo, lo_inc = a.lo, a.lo_inclusive
    else:
        lo, lo_inc = b.lo, b.lo_inclusive
    if a.hi is None or b.hi is None:
        hi, hi_inc = None, False
    elif a.hi > b.hi or (a.hi == b.hi and a.hi_inclusive):
        hi, hi_inc = a.hi, a.hi_inclusive
    else:
        hi, hi_inc = b.hi, b.hi_inclusive
    return KeyBounds(lo, lo_inc, hi, hi_inc)


# --- the typed form: ``a..m``, ``..m``, ``a..``, ``..``; ``\xNN`` escapes any byte, ``\\`` a backslash

_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{2}|\\|\.)")


def parse_range(text: str) -> KeyRange:
    """``"a..m"`` -> ``KeyRange(b"a", b"m")``; either side may be empty (open); ``\\xNN`` is a
    byte, ``\\.`` a dot, ``\\\\`` a backslash."""
    raw = text.encode("utf-8")
    parts = [bytearray()]
    i = 0
    while i < len(raw):
        if raw[i:i + 1] == b"\\":
            m = _ESCAPE.match(raw, i)
            if m is None:
                raise InvalidProjectionError(
                    f"bad escape in key range {text!r} at {raw[i:i + 4]!r} (use \\xNN for a byte, \\\\ for a backslash)")
            g = m.group(1)
            parts[-1] += bytes([int(g[1:], 16)]) if g[:1] == b"x" else g
            i = m.end()
        elif raw[i:i + 2] == b"..":
            if len(parts) == 2:
                raise InvalidProjectionError(f"a key range has one '..' (escape a dot in a key as \\.), not {text!r}")
            parts.append(bytearray())
            i += 2
        else:
            parts[-1] += raw[i:i + 1]
            i += 1
    if len(parts) != 2:
        raise InvalidProjectionError(f"a key range is written START..END (either may be empty), not {text!r}")
    start, end = (bytes(p) if p else None for p in parts)
    return KeyRange(start, end)


def _escape(key: bytes) -> str:
    out = []
    for byte in key:
        c = chr(byte)
        if c == "\\":
            out.append("\\\\")
        elif c == ".":
            out.append("\\.")
        elif 0x21 <= byte < 0x7F:
            out.append(c)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def format_range(r: KeyRange) -> str:
    """The inverse of :func:`parse_range`."""
    return f"{'' if r.start is None else _escape(r.start)}..{'' if r.end is None else _escape(r.end)}"
