"""Conversions between the official binding's values and this engine's: TTLs, key ranges,
read/scan options, rows."""

from __future__ import annotations

from typing import Any

from slatedb.api import options as ours
from slatedb.api.args import prefix_bounds
from slatedb.batch import NO_EXPIRY
from slatedb.lsm.view import KeyBounds
from slatedb.uniffi.errors import argument_type_error, Error, lowered_int, refused
from slatedb.uniffi.values import (
    DurabilityLevel, IterationOrder, KeyRange, KeyValue, MergeOptions, PutOptions, ReadOptions, ScanOptions, Ttl,
    WriteOptions,
)


def ttl_args(options: Any, what: str = "put") -> tuple[float | None, int | None]:
    """``(ttl_s, expire_at_ms)`` of a ``PutOptions`` / ``MergeOptions``."""
    cls = PutOptions if what == "put" else MergeOptions
    if not isinstance(options, cls):
        raise Error.Invalid(f"{what} options must be a {cls.__name__}, not {type(options).__name__}")
    ttl = options.ttl
    if not isinstance(ttl, Ttl):
        raise Error.Invalid(f"ttl must be a Ttl, not {type(ttl).__name__}")
    if ttl.is_default():
        return None, None
    if ttl.is_no_expiry():
        return NO_EXPIRY, None
    value = ttl[0]
    if isinstance(value, bool):
        raise Error.Invalid(f"{ttl} needs a non-negative int of milliseconds")
    value = lowered_int(value, "u64" if ttl.is_expire_after_millis() else "i64")
    if value < 0:  # the official takes an expiry before 1970 (a row expired at once): refused here
        raise Error.Invalid(f"{ttl} needs a non-negative int of milliseconds")
    if ttl.is_expire_after_millis():
        if value == 0:
            raise Error.Invalid("Ttl.EXPIRE_AFTER_MILLIS(0): a TTL must be positive")
        return value / 1000.0, None
    return None, value


def check_write_options(options: Any) -> None:
    if not isinstance(options, WriteOptions):
        raise Error.Invalid(f"write options must be a WriteOptions, not {type(options).__name__}")
    if lowered_int(options.seqnum, "u64") != 0:
        raise refused(f"WriteOptions(seqnum={options.seqnum!r})", "sequence numbers are assigned by the writer")


def _bytes(value: Any, name: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if not isinstance(value, bytes):
        raise argument_type_error(f"KeyRange {name} must be bytes or None, not {type(value).__name__}")
    return value


def bounds_of(r: Any, prefix: bytes | None = None) -> KeyBounds:
    """The bounds of a ``KeyRange`` (under ``prefix``: its keys are relative to the prefix, as
    in the official ``scan_prefix``). An inverted range raises ``Error.Invalid``."""
    if not isinstance(r, KeyRange):
        raise Error.Invalid(f"range must be a KeyRange, not {type(r).__name__}")
    lo, hi = _bytes(r.start, "start"), _bytes(r.end, "end")
    lo_inc, hi_inc = bool(r.start_inclusive), bool(r.end_inclusive)
    if lo is not None and hi is not None and (lo > hi or (lo == hi and not (lo_inc and hi_inc))):
        raise Error.Invalid(f"invalid key range: start {lo!r} is not below end {hi!r}")
    if prefix is None:
        if lo is not None and not lo and lo_inc:
            lo = None  # b"" inclusive: from the first key
        return KeyBounds(lo, lo_inc if lo is not None else True, hi, hi_inc if hi is not None else False)
    if not isinstance(prefix, (bytes, bytearray, memoryview)):
        raise argument_type_error(f"prefix must be bytes, not {type(prefix).__name__}")
    prefix = bytes(prefix)
    sub = KeyBounds(None if lo is None else prefix + lo, lo_inc if lo is not None else True,
                    None if hi is None else prefix + hi, hi_inc if hi is not None else False)
    return prefix_bounds(prefix).intersect(sub)


def half_open(b: KeyBounds) -> tuple[bytes | None, bytes | None]:
    """``[start, end)`` covering exactly ``b`` (``k + 0x00`` is the key right after ``k``)."""
    lo = b.lo if b.lo is None or b.lo_inclusive else b.lo + b"\x00"
    hi = b.hi if b.hi is None or not b.hi_inclusive else b.hi + b"\x00"
    return lo, hi


def _durability(value: Any) -> ours.DurabilityLevel:
    if value is DurabilityLevel.REMOTE:
        return ours.DurabilityLevel.REMOTE
    if value is DurabilityLevel.MEMORY:
        return ours.DurabilityLevel.MEMORY
    raise argument_type_error(f"durability_filter must be a DurabilityLevel, not {value!r}", ValueError)


def _unsupported_extras(o: Any) -> None:
    if o.filter_context is not None:
        raise refused("filter_context", "there are no custom filter policies")
    # tracing_options only labels traces: accepted.


def read_options(o: Any) -> ours.ReadOptions:
    if not isinstance(o, ReadOptions):
        raise Error.Invalid(f"read options must be a ReadOptions, not {type(o).__name__}")
    _unsupported_extras(o)
    return ours.ReadOptions(durability_filter=_durability(o.durability_filter), dirty=o.dirty,
                            cache_blocks=o.cache_blocks)


def scan_options(o: Any) -> ours.ScanOptions:
    """Ours, for a ``ScanOptions``. ``read_ahead_bytes`` and ``max_fetch_tasks`` are fetch hints
    (the scan reads the same rows whatever they are): validated, then left to this engine's own
    fetch sizes."""
    if not isinstance(o, ScanOptions):
        raise Error.Invalid(f"scan options must be a ScanOptions, not {type(o).__name__}")
    _unsupported_extras(o)
    for name in ("read_ahead_bytes", "max_fetch_tasks"):
        v = getattr(o, name)
        if isinstance(v, bool):
            raise Error.Invalid(f"{name} must be a non-negative int, not {v!r}")
        lowered_int(v, "u64")
    order = o.order if o.order is not None else IterationOrder.ASCENDING
    if not isinstance(order, IterationOrder):
        raise argument_type_error(f"order must be an IterationOrder, not {order!r}", ValueError)
    return ours.ScanOptions(durability_filter=_durability(o.durability_filter), dirty=o.dirty,
                            cache_blocks=o.cache_blocks,
                            order=ours.IterationOrder.DESCENDING if order is IterationOrder.DESCENDING
                            else ours.IterationOrder.ASCENDING)


def key_value(kv: Any) -> KeyValue | None:
    """The official ``KeyValue`` of one of ours."""
    if kv is None:
        return None
    return KeyValue(key=kv.key, value=kv.value, seq=kv.seq, create_ts=kv.create_ts or 0, expire_ts=kv.expire_ts)
