"""Transactions (the official binding's ``begin`` / ``IsolationLevel``), sync and async.

A transaction reads at a snapshot taken by ``begin`` (its own writes first), buffers its writes,
and commits them as one batch. Conflict rules (probed on the official 0.17 wheel):

* SNAPSHOT (SI): commit fails when a key the transaction writes was written by anyone after
  its snapshot (write-write; a plain ``db.put`` counts).
* SERIALIZABLE_SNAPSHOT (SSI): also when a key it read (``get``, ``get_key_value``, rows a scan
  returned) was written after its snapshot (read-write), or any key in a range it scanned (the
  whole range asked for, however much of it the caller consumed): a row inserted, overwritten
  or deleted there after its snapshot (a phantom) -- as the official 0.17 wheel refuses it.
* ``mark_read(keys)`` adds keys to the checked set under both levels; ``unmark_write(keys)``
  takes written keys out of it (they are still written).
* A transaction that wrote nothing writes nothing and returns ``None``, once its checked
  keys (SSI reads, ``mark_read``) pass the same check: a conflict raises as for any commit.
* After ``commit`` (whatever its outcome) or ``rollback``, every call raises
  :class:`~slatedb.errors.TransactionClosedError`.

Commit check: for each checked key, the newest row anywhere in the database (memtables, then
SSTs, with block reads when needed) must not be newer than the snapshot; then, under the write
lock and in the same hold as the batch's append, the memtables are checked again, which covers
every row written meanwhile, provided the SST view is still the one the first check read (if
a flush or compaction changed it, the check runs again). A scanned range is checked the same
way: no row within it newer than the snapshot in the memtables, nor in the SSTs made since the
snapshot (every row of the SSTs its view held is at or below its seq), then the memtables again
under the write lock. A conflict writes nothing.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Iterable

from slatedb.api.args import prefix_bounds, scan_bounds
from slatedb.api.options import KeyValue
from slatedb.api.txn_scan import TxnIterator
from slatedb.batch import WriteBatch, validate_flag, validate_key, validate_ttl_s, validate_value
from slatedb.errors import (
    InvalidArgumentError,
    MergeOperatorMissingError,
    TransactionClosedError,
    TransactionConflictError,
)
from slatedb.merge_operator import fold
from slatedb.format.sst_reader import NEED_IO
from slatedb.lsm.view import KeyBounds
from slatedb.row import Row
from slatedb.runtime import probes, switches


class IsolationLevel(enum.Enum):
    SNAPSHOT = "snapshot"
    SERIALIZABLE_SNAPSHOT = "serializable_snapshot"


def isolation_of(value: Any) -> IsolationLevel:
    if isinstance(value, IsolationLevel):
        return value
    if isinstance(value, str):
        for level in IsolationLevel:
            if value.lower() in (level.value, level.name.lower()):
                return level
    raise InvalidArgumentError(f"isolation must be SNAPSHOT or SERIALIZABLE_SNAPSHOT, not {value!r}")


class _ViewMoved(Exception):
    """Internal: the SST view changed between the check and the write lock; check again."""


class TxnState:
    """What both front-ends' transactions hold: the snapshot, the write buffer, the read and
    mark sets, and the commit check."""

    def __init__(self, core: Any, snapshot: Any, isolation: IsolationLevel) -> None:
        self.core = core
        self.snapshot = snapshot
        self.seq: int = snapshot.seq
        self.isolation = isolation
        self.writes: dict[bytes, tuple[str, bytes, float | None]] = {}
        #: Merge operands written after the key's last put/delete (or with none), oldest first.
        self.merges: dict[bytes, list[tuple[bytes, float | None]]] = {}
        self.reads: set[bytes] = set()
        #: The ranges an SSI transaction scanned (``[lo, hi)``, None unbounded), each once.
        self.ranges: list[KeyBounds] = []
        self._pinned: set[Any] | None = None  # pinned_ssts(), made once
        self.unmarked: set[bytes] = set()
        self.done = False
        self.view_moved = False  # a commit check found the SST view moved and checked again

    def check_open(self) -> None:
        if self.done:
            raise TransactionClosedError("the transaction was already committed or rolled back")

    def finish(self) -> None:
        self.done = True
        self.snapshot.release()

    # -- writes ---------------------------------------------------------------------------------

    def put(self, key: Any, value: Any, ttl: Any) -> None:
        self.check_open()
        # Every argument is checked before anything changes: a refused call leaves the
        # transaction as it was (an earlier write of the key included).
        key, value, ttl_s = validate_key(key), validate_value(value), validate_ttl_s(ttl)
        self.writes.pop(key, None)  # a later write of a key is its last (batch order)
        self.writes[key] = ("put", value, ttl_s)
        self.merges.pop(key, None)
        self.unmarked.discard(key)

    def delete(self, key: Any) -> None:
        self.check_open()
        key = validate_key(key)
        self.writes.pop(key, None)
        self.writes[key] = ("delete", b"", None)
        self.merges.pop(key, None)
        self.unmarked.discard(key)

    def merge(self, key: Any, operand: Any, ttl: Any) -> None:
        """A merge operand, applied after the key's earlier writes in this transaction (MERGE-10)."""
        self.check_open()
        if self.core.merge_operator is None:
            raise MergeOperatorMissingError(
                "merge needs a merge operator: open the database with merge_operator=... (nothing was written)")
        key, operand, ttl_s = validate_key(key), validate_value(operand), validate_ttl_s(ttl)
        self.merges.setdefault(key, []).append((operand, ttl_s))
        self.unmarked.discard(key)

    def apply_merges(self, key: bytes, base: bytes | None) -> bytes | None:
        """``base`` (the key's value before this transaction's operands) with them applied."""
        ops = self.merges.get(key)
        if not ops:
            return base
        return fold(self.core.merge_operator, key, base, [o for o, _ttl in ops])

    def mark_read(self, keys: Iterable[Any]) -> None:
        self.check_open()
        self.reads.update([validate_key(k) for k in _keys(keys)])  # all checked, then added

    def unmark_write(self, keys: Iterable[Any]) -> None:
        self.check_open()
        self.unmarked.update([validate_key(k) for k in _keys(keys)])  # all checked, then taken out

    # -- reads ----------------------------------------------------------------------------------

    def local(self, key: bytes) -> tuple[bool, bytes | None]:
        """``(True, value)`` when this transaction's writes decide ``key``; ``(False, None)``
        when the snapshot's value is needed (pass it through :meth:`apply_merges`)."""
        op = self.writes.get(key)
        if op is None:
            return False, None
        return True, self.apply_merges(key, op[1] if op[0] == "put" else None)

    def read(self, key: bytes) -> None:
        if self.isolation is IsolationLevel.SERIALIZABLE_SNAPSHOT:
            self.reads.add(key)

    def scanned(self, lo: bytes | None, hi: bytes | None) -> None:
        """A scan of ``[lo, hi)``: under SSI the range is checked at commit (phantoms)."""
        if self.isolation is IsolationLevel.SERIALIZABLE_SNAPSHOT:
            bounds = KeyBounds(lo, True, hi, False)
            if not bounds.is_empty() and bounds not in self.ranges:
                self.ranges.append(bounds)

    def local_in(self, lo: bytes | None, hi: bytes | None) -> tuple[list[tuple[bytes, str, bytes]], dict[bytes, list]]:
        """This transaction's writes and merge operands in ``[lo, hi)``, as of now (copies)."""
        def inside(key: bytes) -> bool:
            return (lo is None or key >= lo) and (hi is None or key < hi)
        writes = [(key, kind, value) for key, (kind, value, _ttl) in self.writes.items() if inside(key)]
        merges = {key: list(ops) for key, ops in self.merges.items() if inside(key)}
        return writes, merges

    def overlay(self, rows: list[tuple[bytes, bytes]], lo: bytes | None, hi: bytes | None,
                reverse: bool, local: tuple[list, dict] | None = None) -> list[tuple[bytes, bytes]]:
        """A snapshot scan's rows with this transaction's writes in ``[lo, hi)`` applied (those
        of ``local``, from :meth:`local_in`, when given; else the current ones)."""
        self.scanned(lo, hi)
        writes, merges = self.local_in(lo, hi) if local is None else local
        merged = dict(rows)
        for key, kind, value in writes:
            if kind == "put":
                merged[key] = value
            else:
                merged.pop(key, None)
        for key, ops in merges.items():
            merged[key] = fold(self.core.merge_operator, key, merged.get(key), [o for o, _ttl in ops])
        out = sorted(merged.items(), reverse=reverse)
        for key, _v in out:
            self.read(key)
        return out

    # -- commit ---------------------------------------------------------------------------------

    def batch(self) -> WriteBatch:
        b = WriteBatch()
        for key, (kind, value, ttl) in self.writes.items():
            if kind == "put":
                b.put(key, value, ttl)
            else:
                b.delete(key)
        for key, ops in self.merges.items():
            for operand, ttl in ops:
                b.merge(key, operand, ttl)
        return b

    def checked_keys(self) -> list[bytes]:
        keys = (set(self.writes) | set(self.merges)) - self.unmarked
        # Catalogued bug (sim/scenarios/catalogue.py): a SNAPSHOT commit checks no written key.
        if switches.TXN_SNAPSHOT_WRITES_UNCHECKED in self.core.runtime.bugs and \
                self.isolation is IsolationLevel.SNAPSHOT:
            keys = set()
        # Catalogued bug (sim/scenarios/catalogue.py): the read set is not checked at commit.
        if switches.TXN_READS_UNCHECKED not in self.core.runtime.bugs:
            keys |= self.reads  # SSI reads, and mark_read under both levels
        return sorted(keys)

    def checked_ranges(self) -> list[KeyBounds]:
        # Catalogued bug (sim/scenarios/catalogue.py): a scanned range is not checked (phantoms).
        if switches.TXN_RANGES_UNCHECKED in self.core.runtime.bugs:
            return []
        return list(self.ranges)

    def pinned_ssts(self) -> set[Any]:
        """The SSTs of the view the snapshot pinned: none holds a row newer than its seq (the
        set is built once; a commit's checks and retries read it again)."""
        if self._pinned is None:
            self._pinned = self.snapshot._rs.view.sst_ids
        return self._pinned

    def range_conflict(self, bounds: KeyBounds, row: Any) -> None:
        """``row`` (as held: key, seq first; None: none) was found in the scanned ``bounds``
        above the snapshot's seq."""
        if row is not None:
            if self.view_moved:
                self.core.runtime.probe(probes.TXN_CONFLICT_AFTER_VIEW_MOVED)
            raise TransactionConflictError(
                f"transaction conflict: key {row[0]!r}, in the range [{bounds.lo!r}, {bounds.hi!r}) the "
                f"transaction scanned, was written at seq {row[1]}, after the transaction's snapshot "
                f"(seq {self.seq})")

    def sst_range_conflict(self, found: tuple[KeyBounds, Row] | None) -> None:
        """What :meth:`ReadPath.newer_in_ssts` found (a conflict raises)."""
        if found is not None:
            self.core.runtime.probe(probes.TXN_PHANTOM_IN_SST)
            self.range_conflict(*found)

    def check_ranges_fast(self, rs: Any, ranges: list[KeyBounds]) -> bool:
        """C2 for the scanned ranges in the memtables of ``rs`` (a conflict raises); True when
        SSTs made since the snapshot must be read too (:meth:`ReadPath.newer_in_ssts`)."""
        core = self.core
        for bounds in ranges:
            self.range_conflict(bounds, core.newer_in_mems(rs.mems, bounds, self.seq, locked=False))
        return bool(core.ssts_not_in(rs, self.pinned_ssts()))

    def conflict(self, key: bytes, row: Row | None) -> None:
        if row is not None and row.seq > self.seq:
            if self.view_moved:
                self.core.runtime.probe(probes.TXN_CONFLICT_AFTER_VIEW_MOVED)
            raise TransactionConflictError(
                f"transaction conflict: key {key!r} was written at seq {row.seq}, after the "
                f"transaction's snapshot (seq {self.seq})")

    def under_lock(self, view: Any, keys: list[bytes], ranges: list[KeyBounds]) -> Callable[[], None]:
        core = self.core

        def check() -> None:
            rs = core.read_state
            if rs.view is not view:
                # Rows written since the first check may have left the memtables for an SST
                # the first check did not read (transactions.md step C3): check again.
                # Catalogued bug: check the memtables only, as if the view had not moved.
                if switches.TXN_WINDOW_IGNORES_FLUSH not in core.runtime.bugs:
                    core.runtime.probe(probes.TXN_VIEW_MOVED)
                    self.view_moved = True
                    raise _ViewMoved()
            for key in keys:
                for mem in rs.mems:
                    row = mem.get(key, None)
                    if row is not None:
                        self.conflict(key, row)
                        break
            for bounds in ranges:  # the write lock is held: memtable iterators may be made
                self.range_conflict(bounds, core.newer_in_mems(rs.mems, bounds, self.seq, locked=True))
        return check


def _keys(keys: Iterable[Any]) -> list[Any]:
    if isinstance(keys, (bytes, bytearray, memoryview, str)):
        raise InvalidArgumentError("keys must be a list of keys (bytes), not a single key")
    try:
        return list(keys)
    except TypeError:
        raise InvalidArgumentError(f"keys must be a list of keys (bytes), not {type(keys).__name__}") from None


def key_value_local(key: bytes, value: bytes | None) -> KeyValue | None:
    return None if value is None else KeyValue(key, value, 0, None, None)


def merged_key_value(t: "TxnState", key: bytes, kv: KeyValue | None) -> KeyValue | None:
    """The transaction's own operands of ``key`` applied to its row at the snapshot ``kv``: not
    yet written (seq 0), with the snapshot row's timestamps, as the official 0.17 transaction
    reports them (a pending operand's TTL does not show before the commit)."""
    out = key_value_local(key, t.apply_merges(key, None if kv is None else kv.value))
    if out is None or kv is None:
        return out
    return KeyValue(key, out.value, 0, kv.create_ts, kv.expire_ts)


class Transaction:
    """A transaction of the synchronous API (:meth:`slatedb.Db.begin`)."""

    def __init__(self, db: Any, isolation: IsolationLevel) -> None:
        self._db = db
        self._t = TxnState(db._core, db.snapshot(), isolation)

    @property
    def seqnum(self) -> int:
        """The snapshot's sequence number."""
        return self._t.seq

    @property
    def isolation(self) -> IsolationLevel:
        return self._t.isolation

    def put(self, key: bytes, value: bytes, ttl: float | None = None) -> None:
        self._t.put(key, value, ttl)

    def delete(self, key: bytes) -> None:
        self._t.delete(key)

    def merge(self, key: bytes, operand: bytes, ttl: float | None = None) -> None:
        """A merge operand for ``key`` (reads in this transaction see it folded; MERGE-10)."""
        self._t.merge(key, operand, ttl)

    def mark_read(self, keys: Iterable[bytes]) -> None:
        self._t.mark_read(keys)

    def unmark_write(self, keys: Iterable[bytes]) -> None:
        self._t.unmark_write(keys)

    def get(self, key: bytes) -> bytes | None:
        t = self._t
        t.check_open()
        key = validate_key(key)
        found, value = t.local(key)
        if not found:
            value = t.apply_merges(key, t.snapshot.get(key))
        t.read(key)
        return value

    def get_key_value(self, key: bytes) -> KeyValue | None:
        t = self._t
        t.check_open()
        key = validate_key(key)
        found, value = t.local(key)
        t.read(key)
        if found:
            return key_value_local(key, value)
        kv = t.snapshot.get_key_value(key)
        return merged_key_value(t, key, kv) if key in t.merges else kv

    def scan(self, start: bytes | None = None, end: bytes | None = None, *, reverse: bool = False) -> list[tuple[bytes, bytes]]:
        """The ``(key, value)`` rows of ``[start, end)`` at the snapshot with this transaction's
        writes applied (a list)."""
        t = self._t
        t.check_open()
        reverse = validate_flag("reverse", reverse)
        b = scan_bounds(start, end)  # bytes from here on (a bytearray or memoryview copied)
        return t.overlay(list(t.snapshot.scan(b.lo, b.hi)), b.lo, b.hi, reverse)

    def scan_prefix(self, prefix: bytes, *, reverse: bool = False) -> list[tuple[bytes, bytes]]:
        """The rows whose key starts with ``prefix`` (``b""``: every key), as :meth:`scan` of
        that range (under SERIALIZABLE_SNAPSHOT the range is checked for phantoms at commit)."""
        bounds = prefix_bounds(prefix)
        return self.scan(bounds.lo, bounds.hi, reverse=reverse)

    def commit(self, *, durable: bool = False) -> Any:
        """Check for conflicts and write everything as one batch: a ``WriteHandle``, or ``None``
        if the transaction wrote nothing. :class:`TransactionConflictError` on a conflict
        (nothing written); :class:`ClosedError` once the database is closed, even for a
        transaction that wrote nothing (as any call after ``close()``; ``slatedb.uniffi``
        returns None there, as the official binding does). The transaction is finished either way."""
        t = self._t
        t.check_open()
        validate_flag("durable", durable)  # before the try: a bad argument leaves the transaction open
        try:
            core, portal = self._db._core, self._db._portal
            core.check_open()  # ClosedError whether or not it wrote anything (a read-only one too)
            keys, ranges = t.checked_keys(), t.checked_ranges()
            while True:
                rs = core.read_state
                for key in keys:
                    row = core.get_row_direct(key, rs, None)
                    if row is NEED_IO:
                        row = portal(core.get_row_slow, key, rs, None)
                    t.conflict(key, row)  # type: ignore[arg-type]
                if ranges and t.check_ranges_fast(rs, ranges):
                    t.sst_range_conflict(portal(core.newer_in_ssts, rs, ranges, t.seq, t.pinned_ssts()))
                if not t.writes and not t.merges:
                    return None  # nothing to write: the read set held at this read state (C1)
                batch = t.batch()
                try:
                    return self._db._write(lambda: core.write(batch, t.under_lock(rs.view, keys, ranges)), (), durable)
                except _ViewMoved:
                    continue
        finally:
            t.finish()

    def rollback(self) -> None:
        self._t.check_open()
        self._t.finish()

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, et: Any, e: Any, tb: Any) -> None:
        if not self._t.done:
            if et is None:
                self.commit()
            else:
                self.rollback()


class AsyncTransaction:
    """A transaction of the async API (``await slatedb.aio.Db.begin()``)."""

    def __init__(self, db: Any, isolation: IsolationLevel) -> None:
        self._db = db
        self._t = TxnState(db._core, db.snapshot(), isolation)

    @property
    def seqnum(self) -> int:
        return self._t.seq

    @property
    def isolation(self) -> IsolationLevel:
        return self._t.isolation

    async def put(self, key: bytes, value: bytes, ttl: float | None = None) -> None:
        self._t.put(key, value, ttl)

    async def delete(self, key: bytes) -> None:
        self._t.delete(key)

    async def merge(self, key: bytes, operand: bytes, ttl: float | None = None) -> None:
        self._t.merge(key, operand, ttl)

    async def mark_read(self, keys: Iterable[bytes]) -> None:
        self._t.mark_read(keys)

    async def unmark_write(self, keys: Iterable[bytes]) -> None:
        self._t.unmark_write(keys)

    async def get(self, key: bytes) -> bytes | None:
        t = self._t
        t.check_open()
        key = validate_key(key)
        found, value = t.local(key)
        if not found:
            value = t.apply_merges(key, await t.snapshot.get(key))
        t.read(key)
        return value

    async def get_key_value(self, key: bytes) -> KeyValue | None:
        t = self._t
        t.check_open()
        key = validate_key(key)
        found, value = t.local(key)
        t.read(key)
        if found:
            return key_value_local(key, value)
        kv = await t.snapshot.get_key_value(key)
        return merged_key_value(t, key, kv) if key in t.merges else kv

    def scan(self, start: bytes | None = None, end: bytes | None = None, *,
             reverse: bool = False) -> TxnIterator:
        """The rows of ``[start, end)`` at the snapshot with this transaction's writes applied,
        as an async iterator like ``aio.Db.scan``'s (``async for``, ``next_batch``, ``seek``,
        ``close``); ``await txn.scan(...)`` gives them as a list (:mod:`slatedb.api.txn_scan`).
        A bad argument or a finished transaction raises here, at the call."""
        t = self._t
        t.check_open()
        reverse = validate_flag("reverse", reverse)
        b = scan_bounds(start, end)  # bytes from here on (a bytearray or memoryview copied)
        return self._iterator(b, reverse)

    def scan_prefix(self, prefix: bytes, *, reverse: bool = False) -> TxnIterator:
        """See :meth:`Transaction.scan_prefix`; the iterator as :meth:`scan`'s."""
        t = self._t
        t.check_open()
        reverse = validate_flag("reverse", reverse)
        return self._iterator(prefix_bounds(prefix), reverse)

    def _iterator(self, b: Any, reverse: bool) -> TxnIterator:
        t = self._t
        local = t.local_in(b.lo, b.hi)

        async def load() -> list[tuple[bytes, bytes]]:
            t.check_open()
            rows = [kv async for kv in t.snapshot.scan(b.lo, b.hi)]
            t.check_open()  # committed or rolled back while the rows were read
            return t.overlay(rows, b.lo, b.hi, reverse, local)

        return TxnIterator(load, b, reverse)

    async def commit(self, *, durable: bool = False) -> Any:
        t = self._t
        t.check_open()
        validate_flag("durable", durable)  # before the try: a bad argument leaves the transaction open
        try:
            core, host = self._db._core, self._db._host
            core.check_open()  # ClosedError whether or not it wrote anything (a read-only one too)
            keys, ranges = t.checked_keys(), t.checked_ranges()
            while True:
                rs = core.read_state
                for key in keys:
                    row = core.get_row_direct(key, rs, None)
                    if row is NEED_IO:
                        row = await host.acall(core.get_row_slow, key, rs, None)
                    t.conflict(key, row)  # type: ignore[arg-type]
                if ranges and t.check_ranges_fast(rs, ranges):
                    t.sst_range_conflict(await host.acall(core.newer_in_ssts, rs, ranges, t.seq, t.pinned_ssts()))
                if not t.writes and not t.merges:
                    return None  # nothing to write: the read set held at this read state (C1)
                batch = t.batch()
                try:
                    return await self._db._write(lambda: core.write(batch, t.under_lock(rs.view, keys, ranges)), (), durable)
                except _ViewMoved:
                    continue
        finally:
            t.finish()

    async def rollback(self) -> None:
        self._t.check_open()
        self._t.finish()

    async def __aenter__(self) -> "AsyncTransaction":
        return self

    async def __aexit__(self, et: Any, e: Any, tb: Any) -> None:
        """As the sync :class:`Transaction`'s ``with``: commit when the block ends normally (if
        not committed or rolled back in it), roll back when it raises."""
        if not self._t.done:
            if et is None:
                await self.commit()
            else:
                await self.rollback()
