"""Handles shared by the database, snapshot, transaction and reader classes of the drop-in:
``WriteHandle``, ``DbIterator``, ``MergeOperator``, and the argument and row helpers."""

from __future__ import annotations

from typing import Any

from slatedb import aio
from slatedb.api.read_kit import seek_bounds
from slatedb.format.sst_reader import NEED_IO
from slatedb.row import RowKind
from slatedb.uniffi.errors import argument_type_error, Error, refused, translated
from slatedb.uniffi.values import KeyValue


def _key(key: Any, name: str = "key") -> bytes:
    """A bytes argument; anything else is a ``TypeError``, as the official binding's checks
    raise (also inside :func:`translated`)."""
    if isinstance(key, (bytearray, memoryview)):
        key = bytes(key)
    if not isinstance(key, bytes):
        raise argument_type_error(f"{name} must be bytes, not {type(key).__name__}")
    return key


def _keys(keys: Any) -> list[bytes]:
    """A list of bytes arguments (``mark_read``, ``unmark_write``); a ``TypeError`` otherwise."""
    try:
        items = iter(keys)
    except TypeError:
        raise argument_type_error(f"keys must be a list of bytes, not {type(keys).__name__}") from None
    return [_key(k) for k in items]


class MergeOperator:
    """Subclass and implement ``merge(key, existing_value, operand) -> bytes``; raise
    ``MergeOperatorCallbackError.Failed(message)`` to fail a merge."""

    def merge(self, key: bytes, existing_value: bytes | None, operand: bytes) -> bytes:
        raise NotImplementedError


class _OperatorCall:
    """The engine's merge function over a user's :class:`MergeOperator`."""

    def __init__(self, op: MergeOperator) -> None:
        self._op = op

    def __call__(self, key: bytes, existing_value: bytes | None, operand: bytes) -> bytes:
        out = self._op.merge(key, existing_value, operand)
        return bytes(out) if isinstance(out, (bytearray, memoryview)) else out


class WriteHandle:
    """A write's sequence number and creation time; ``await_durable()`` waits for its WAL."""

    def __init__(self, handle: aio.WriteHandle, create_ts: int) -> None:
        self._h = handle
        self._create_ts = create_ts

    def seqnum(self) -> int:
        return self._h.seq

    def create_ts(self) -> int:
        return self._create_ts

    async def await_durable(self) -> None:
        with translated():
            await self._h.wait_durable()


class DbIterator:
    """Rows of a scan: ``await next()`` (None at the end), ``await next_batch(n)``, ``await seek(key)``."""

    def __init__(self, it: Any, meta: Any, bounds: Any = None, reverse: bool = False) -> None:
        self._it = it          # our aio DbIterator, or a list of (key, value) (a transaction's scan)
        self._meta = meta      # async (key, value) -> KeyValue
        self._pos = 0
        self._bounds = bounds  # of a list: the scan's bounds and direction, for seek
        self._reverse = reverse
        self._last: bytes | None = None  # the last key returned (the official seeks only past it)
        self._held: list[tuple[bytes, bytes]] = []  # taken from the scan, not yet returned

    async def next(self) -> KeyValue | None:
        got = await self.next_batch(1)
        return got[0] if got else None

    async def next_batch(self, max: int) -> list[KeyValue]:
        if isinstance(max, bool):  # the official takes True as 1: a flag is no count (refused here)
            raise Error.Invalid(f"next_batch needs a non-negative int, not {max!r}")
        try:
            max = max.__index__()  # the official's generated u32 check: TypeError, then ValueError
        except Exception:
            raise TypeError(f"'{type(max).__name__}' object cannot be interpreted as an integer") from None
        if not 0 <= max < 2**32:
            raise ValueError("u32 requires 0 <= value < 4294967296")
        with translated():
            # Rows taken from the scan wait in ``_held`` until their metadata is read and they
            # are returned: a step cancelled meanwhile (a timeout, a cancelled task) leaves them
            # for the next step.
            held = self._held
            if len(held) < max:
                if isinstance(self._it, list):
                    more = self._it[self._pos:self._pos + max - len(held)]
                    self._pos += len(more)
                else:
                    more = await self._it.next_batch(max - len(held))
                held.extend(more)
            pairs = held[:max]
            out = [await self._meta(k, v) for k, v in pairs]
            del held[:len(pairs)]
            if pairs:
                self._last = pairs[-1][0]
            return out

    async def seek(self, key: bytes) -> None:
        """As the official iterator: refused in a descending scan, outside the range, and at or
        before the last key returned (our own iterators seek anywhere in the range, either way)."""
        key = _key(key)
        if self._reverse:
            raise Error.Invalid("seek is not supported for descending scans")
        with translated():
            listed = isinstance(self._it, list)
            rest = seek_bounds(self._bounds if listed else self._it._scan[1], key, False)  # outside: refused
        if self._last is not None and key <= self._last:
            raise Error.Invalid("cannot seek to a key less than the last returned key")
        self._held.clear()  # rows taken before the seek (by a cancelled step) are not returned
        with translated():
            if listed:
                self._pos = next((i for i, (k, _v) in enumerate(self._it) if rest.contains(k)), len(self._it))
                return
            await self._it.seek(key)


def _resolved_meta(reads: Any, rs: Any, max_seq: int | None) -> Any:
    """Row metadata of a scanned ``(key, value)`` at the scan's own snapshot."""
    core, host = reads._core, reads._host

    async def meta(key: bytes, value: bytes) -> KeyValue:
        row = core.get_row_direct(key, rs, max_seq)
        if row is NEED_IO:
            row = await host.acall(core.get_row_slow, key, rs, max_seq)
        if row is not None and row.kind is RowKind.MERGE_OPERAND:
            # The folded row's metadata (the earliest expiry of its parts, MERGE-1), as
            # get_key_value reports it: the newest operand alone misses a base's TTL.
            row = core.get_resolved_fast(key, rs, max_seq)
            if row is NEED_IO:
                row = await host.acall(core.get_resolved_slow, key, rs, max_seq)
        if row is None:
            return KeyValue(key=key, value=value, seq=0, create_ts=0, expire_ts=None)
        return KeyValue(key=key, value=value, seq=row.seq, create_ts=row.create_ts_ms or 0, expire_ts=row.expire_ts_ms)
    return meta


#: The seq the official binding reports for a row a transaction wrote itself (u64::MAX: it has
#: none until commit).
UNCOMMITTED_SEQ = 2**64 - 1


def _local_seq(kv: KeyValue | None) -> KeyValue | None:
    """A transaction's own row (ours: seq 0, no create_ts) with the official uncommitted seq."""
    if kv is not None and kv.seq == 0:
        kv.seq = UNCOMMITTED_SEQ
    return kv
