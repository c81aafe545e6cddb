"""What the sync and async read APIs share beyond argument parsing: the sequence bound a read
option implies, a row's :class:`KeyValue`, and where a ``seek`` restarts a scan."""

from __future__ import annotations

from typing import Any

from slatedb.api.options import CloseReason, DbReaderStatus, DbStatus, DurabilityLevel, IterationOrder, KeyValue, ReadOptions, ScanOptions
from slatedb.batch import validate_flag, validate_key
from slatedb.errors import ClosedError, FencedError, InvalidArgumentError, SeekKeyOutOfRangeError
from slatedb.lsm.view import KeyBounds
from slatedb.merge import resolve_row
from slatedb.row import Row

_REMOTE = DurabilityLevel.REMOTE


def bound_for(core: Any, max_seq: int | None, durability: DurabilityLevel) -> int | None:
    """``max_seq`` lowered to the newest durable seq for ``durability_filter=REMOTE`` (a reader
    serves durable rows only: no change)."""
    if durability is not _REMOTE:
        return max_seq
    durable = getattr(core, "durable_seq", None)
    if durable is None:
        return max_seq
    return durable if max_seq is None else min(max_seq, durable)


def key_value(row: Row | None, now_ms: int) -> KeyValue | None:
    if row is None:
        return None
    value = resolve_row(row, now_ms)
    if value is None:
        return None
    return KeyValue(row.key, value, row.seq, row.create_ts_ms, row.expire_ts_ms)


def read_options(options: Any) -> ReadOptions:
    return ReadOptions.of(options)


def scan_options(options: Any, reverse: bool) -> tuple[ScanOptions, bool]:
    """The options and the direction (``reverse=True`` and ``order=DESCENDING`` say the same;
    both given and disagreeing is refused). ``reverse`` must be a bool: ``reverse="false"`` from
    request data must not silently scan backwards."""
    reverse = validate_flag("reverse", reverse)
    opts = ScanOptions.of(options)
    descending = opts.order is IterationOrder.DESCENDING
    if options is not None and reverse and not descending:
        raise InvalidArgumentError("reverse=True contradicts ScanOptions(order=ASCENDING): give one of them")
    return opts, reverse or descending


def seek_bounds(bounds: KeyBounds, key: Any, reverse: bool) -> KeyBounds:
    """The bounds of the rest of a scan after ``seek(key)``: from ``key`` (inclusive) onwards
    in the scan's direction. A key outside ``bounds`` raises :class:`SeekKeyOutOfRangeError`."""
    key = validate_key(key)
    if not bounds.contains(key):
        raise SeekKeyOutOfRangeError(f"seek key {key!r} is outside the scan range {describe(bounds)}")
    if reverse:
        return KeyBounds(bounds.lo, bounds.lo_inclusive, key, True)
    return KeyBounds(key, True, bounds.hi, bounds.hi_inclusive)


def describe(b: KeyBounds) -> str:
    lo = "(-inf" if b.lo is None else ("[" if b.lo_inclusive else "(") + repr(b.lo)
    hi = "+inf)" if b.hi is None else repr(b.hi) + ("]" if b.hi_inclusive else ")")
    return f"{lo}, {hi}"


def db_status(core: Any) -> DbStatus:
    """``status()``: durable seq, and the close reason (None while open): FENCED when a newer
    writer took over, CLEAN after ``close()``, UNKNOWN after ``abort()``, PANIC on any other
    error that stopped the engine."""
    return DbStatus(core.durable_seq, close_reason_of(core))


def close_reason_of(core: Any) -> CloseReason | None:
    """Why ``core`` (a writer's or a reader's engine) stopped: FENCED when a newer writer took
    over, UNKNOWN after ``abort()`` (or in a forked child), PANIC on any other error that stopped
    it, CLEAN after ``close()``; None while open."""
    error = core.error
    if isinstance(error, FencedError):
        return CloseReason.FENCED
    if isinstance(error, ClosedError):
        return CloseReason.UNKNOWN
    if error is not None:
        return CloseReason.PANIC
    return CloseReason.CLEAN if core.closed else None


def reader_status(core: Any) -> DbReaderStatus:
    """``DbReader.status()`` (sync in both APIs: no I/O, as ``Db.status()``)."""
    return DbReaderStatus(core.last_seq, close_reason_of(core), core.manifest_id, core.checkpoint_id,
                          core.wal_range[1])
