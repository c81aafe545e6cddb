"""The memtable: a sorted, multi-version, in-memory table of :class:`~slatedb.row.Row`.

A database has one *live* memtable that takes writes and zero or more *immutable* memtables
(frozen with :meth:`Memtable.freeze`) waiting to be flushed. Reads consult them newest first.

Layout, chosen for a cheap ``put`` (the hot path):

* ``_versions``: a plain ``dict`` from key bytes to the key's one row (the usual case), or, once
  a key has several versions, to a ``list`` of its rows in **ascending seq order** (oldest
  first), so a newer version is a ``list.append``. Readers walk the list from its end to see
  versions newest first. A key with one version costs no list: a put allocates one object less,
  and dropping a flushed table frees one object less per row.
* A row is held as it was put: a :class:`Row`, or a *plain row* (an exact tuple in Row's field
  order with the kind as an ``int``, what the write path appends: the cyclic GC untracks it, see
  :func:`slatedb.row.as_row`). The table reads fields by position; :meth:`get`,
  :meth:`versions` and the iterators hand out :class:`Row` (plain rows converted on the way
  out); :meth:`sorted_rows` hands them out as held, for the encoders, which read by position.
* ``_keys``: a :class:`sortedcontainers.SortedList` of the distinct keys. A put that brings a
  new key only appends it to ``_pending`` (O(1)); the pending keys are merged into ``_keys`` in
  one ``update`` when something needs order (an iterator is created, the table is frozen, the
  first or last key is asked for). An iterator only ever needs the keys that existed when it
  was created: keys added later carry seqs above its bound.

Iteration while the same thread keeps writing (a ``put`` between two iterator steps) is safe.
An iterator works on a *snapshot bound* ``max_seq`` fixed when it is created (by default the
table's ``last_seq`` at that moment): it yields exactly the rows with ``seq <= max_seq``, each
key once, in order, never skipping or repeating a key. Writers assign increasing seqs, so rows
put after the iterator was created are above its bound and stay invisible to it. (A row put
later *with a seq at or below the bound* -- which the engine never does -- is seen only when
its key lies ahead of the iterator's position.)

Threading: writes and iterator creation must hold the owner's lock (the Db's write lock); ``get``
is safe concurrently with a writer (it only reads ``_versions``, whose dict and list operations
are atomic).
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import Final

from sortedcontainers import SortedList

from slatedb.errors import SlateDBError
from slatedb.row import Row, as_row

#: Bytes added to ``len(key) + len(value)`` per row in :attr:`Memtable.size_bytes`: the
#: encoded row's fixed part (seq u64, flags u8, expire and create timestamps i64, three length
#: varints) rounded up. An estimate for flush decisions, not an exact encoded size.
ROW_OVERHEAD_BYTES: Final = 32
_SEQ_OF = itemgetter(1)  # Row.seq


class FrozenMemtableError(SlateDBError, AssertionError):
    """Internal error: a write reached a memtable that was frozen (an engine bug, not user error)."""


class Memtable:
    """A sorted multi-version table of rows, keyed by key bytes (see the module docstring)."""

    __slots__ = ("_versions", "_keys", "_pending", "_key_epoch", "_num_rows", "_size_bytes", "_first_seq", "_first_ts_ms",
                 "_last_ts_ms", "_last_seq", "_frozen", "holds", "wal_columns")

    def __init__(self) -> None:
        self._versions: dict[bytes, Row | list[Row]] = {}
        #: ``holds(key)``: whether the table has a row of ``key`` (one C call: a reader passes a
        #: table without the key for the price of a dict lookup, no :meth:`get` frame).
        self.holds = self._versions.__contains__
        self._keys: SortedList = SortedList()
        self._pending: list[bytes] = []  # new keys not yet in _keys
        # Bumped whenever ``_keys`` changes shape, so that live iterators re-seek.
        self._key_epoch = 0
        self._num_rows = 0
        self._size_bytes = 0
        self._first_seq: int | None = None
        #: ``create_ts_ms`` of the first row put (the sequence tracker's entry for the table).
        self._first_ts_ms: int | None = None
        #: ``create_ts_ms`` of the newest row (highest seq): the table's clock tick, which an L0
        #: flush records as the manifest's ``last_l0_clock_tick`` (upstream ``KVTable::last_tick``).
        self._last_ts_ms: int | None = None
        self._last_seq: int | None = None
        self._frozen = False
        #: The writer's WAL flusher keeps here the columns its encodes extracted from this table's
        #: rows (:class:`slatedb.format.kept_columns.ColumnsPart`, in seq order), for the L0
        #: flush to reuse; the table itself never reads them.
        self.wal_columns: list = []

    # -----------------------------------------------------------------------------------------
    # Writes
    # -----------------------------------------------------------------------------------------

    def put(self, row: Row) -> None:
        """Insert one row (a value, a tombstone or a merge operand). O(log n) for a new key.

        A row with the same key and seq as one already present replaces it. The caller has
        validated the key and value (see :mod:`slatedb.batch`).
        """
        if self._frozen:
            raise FrozenMemtableError(f"put of seq {row[1]} into a frozen (immutable) memtable")
        key = row[0]
        seq = row[1]
        versions = self._versions.get(key)
        if versions is None:
            self._versions[key] = row
            self._pending.append(key)
        elif type(versions) is not list:  # the key's one row
            if seq > versions[1]:
                self._versions[key] = [versions, row]
            else:
                self._versions[key] = self._insert_out_of_order([versions], row)
                return
        elif seq > versions[-1][1]:
            versions.append(row)
        else:
            self._insert_out_of_order(versions, row)
            return
        self._num_rows += 1
        self._size_bytes += len(key) + len(row[3]) + ROW_OVERHEAD_BYTES
        if self._last_seq is None:
            self._first_seq = self._last_seq = seq
            self._first_ts_ms = self._last_ts_ms = row[5]
        elif seq > self._last_seq:
            self._last_seq = seq
            self._last_ts_ms = row[5]
        elif seq < self._first_seq:  # type: ignore[operator]
            self._first_seq = seq

    def put_rows(self, rows: list[Row]) -> int:
        """Insert ``rows`` (a write batch) exactly as :meth:`put` of each in turn would; returns
        the bytes they add to :attr:`size_bytes`.

        Fast path, one loop without a frame per row, when the rows are numbered consecutively
        (each seq the previous + 1, as the engine's batches are: built from a ``range`` after
        ``last_seq``) above every seq in the table: then every row is either a key's first
        version or its newest. That is checked here, without a Python frame per row; any other
        batch goes row by row through :meth:`put`.
        """
        if self._frozen:
            raise FrozenMemtableError(f"put of seq {rows[0][1]} into a frozen (immutable) memtable")
        n = len(rows)
        if not n:
            return 0
        first = rows[0][1]
        last = rows[-1][1]
        if ((self._last_seq is not None and first <= self._last_seq) or last - first != n - 1
                or list(map(_SEQ_OF, rows)) != list(range(first, last + 1))):  # in C: no frame per row
            before = self._size_bytes
            for row in rows:
                self.put(row)
            return self._size_bytes - before
        versions_of = self._versions
        get = versions_of.get
        pending = self._pending
        size = n * ROW_OVERHEAD_BYTES
        for row in rows:
            key = row[0]
            versions = get(key)
            if versions is None:
                versions_of[key] = row
                pending.append(key)
            elif type(versions) is list:
                versions.append(row)
            else:
                versions_of[key] = [versions, row]
            size += len(key) + len(row[3])
        self._num_rows += n
        self._size_bytes += size
        if self._last_seq is None:
            self._first_seq = first
            self._first_ts_ms = rows[0][5]
        self._last_seq = last
        self._last_ts_ms = rows[-1][5]
        return size

    def _insert_out_of_order(self, versions: list[Row], row: Row) -> Row | list[Row]:
        """Slow path of :meth:`put`: a seq not above the key's newest (e.g. WAL replay).
        Returns what ``_versions`` holds for the key now (its one row, or ``versions``)."""
        seq = row[1]
        i = len(versions)
        while i > 0 and versions[i - 1][1] > seq:
            i -= 1
        if i > 0 and versions[i - 1][1] == seq:
            old = versions[i - 1]
            versions[i - 1] = row
            self._size_bytes += len(row[3]) - len(old[3])
            return versions if len(versions) > 1 else row
        versions.insert(i, row)
        self._num_rows += 1
        self._size_bytes += len(row[0]) + len(row[3]) + ROW_OVERHEAD_BYTES
        # The table is non-empty here (the key had versions), so both bounds are set.
        if seq < self._first_seq:  # type: ignore[operator]
            self._first_seq = seq
        if seq > self._last_seq:  # type: ignore[operator]
            self._last_seq = seq
        return versions

    def _sync_keys(self) -> None:
        """Merge the pending new keys into the sorted key list."""
        if self._pending:
            pending = self._pending
            self._pending = []
            self._keys.update(pending)
            self._key_epoch += 1  # live iterators re-seek

    def freeze(self) -> None:
        """Make the table immutable (the immutable-memtable stage); later puts raise
        :class:`FrozenMemtableError`. Idempotent."""
        self._sync_keys()
        self._frozen = True

    @property
    def is_frozen(self) -> bool:
        return self._frozen

    # -----------------------------------------------------------------------------------------
    # Reads
    # -----------------------------------------------------------------------------------------

    def get(self, key: bytes, max_seq: int | None = None) -> Row | None:
        """The newest row of ``key`` with ``seq <= max_seq`` (any seq when ``max_seq`` is None).

        A tombstone or an expired row is returned as is: the caller decides what it means.
        """
        row = self.get_held(key, max_seq)
        return row if row is None or type(row) is Row else as_row(row)

    def get_held(self, key: bytes, max_seq: int | None = None) -> Row | tuple | None:
        """:meth:`get`'s row as held (a plain row is not converted: the read path's hot loop
        reads its fields by position, :func:`slatedb.row.as_row`)."""
        versions = self._versions.get(key)
        if versions is None:
            return None
        if type(versions) is not list:  # the key's one row
            return versions if max_seq is None or versions[1] <= max_seq else None
        row = versions[-1]
        if max_seq is None or row[1] <= max_seq:
            return row
        for i in range(len(versions) - 2, -1, -1):
            row = versions[i]
            if row[1] <= max_seq:
                return row
        return None

    def versions(self, key: bytes) -> list[Row]:
        """All rows of ``key``, newest first (a new list; empty when the key is absent)."""
        versions = self._versions.get(key)
        if versions is None:
            return []
        return list(map(as_row, reversed(versions))) if type(versions) is list else [as_row(versions)]

    def iter_range(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        *,
        start_inclusive: bool = True,
        end_inclusive: bool = False,
        reverse: bool = False,
        max_seq: int | None = None,
        held: bool = False,
    ) -> Iterator[Row]:
        """Rows of the keys in the range, in key order (ascending, or descending if ``reverse``).

        ``start``/``end`` bound the range (``None``: unbounded), ``start`` being the lower bound
        in both directions. For each key the iterator yields **every** version with
        ``seq <= max_seq``, newest first -- the ``(key asc | desc, seq desc)`` order that
        :func:`slatedb.merge.merge_rows` expects; :func:`slatedb.merge.visible` keeps the
        newest. ``max_seq`` defaults to :attr:`last_seq` when the iterator is created, which
        makes it a consistent view as of that moment even if puts follow between steps.
        With ``held`` the rows come as held (plain rows not converted to :class:`Row`: for a
        consumer that reads fields by position, :func:`slatedb.merge.visible`).
        """
        if max_seq is None:
            max_seq = self._last_seq if self._last_seq is not None else -1
        self._sync_keys()
        return self._iter(start, end, start_inclusive, end_inclusive, reverse, max_seq, held)

    def _iter(
        self,
        start: bytes | None,
        end: bytes | None,
        start_inclusive: bool,
        end_inclusive: bool,
        reverse: bool,
        max_seq: int,
        held: bool = False,
    ) -> Iterator[Row]:
        convert = None if held else as_row
        keys = self._keys
        versions_of = self._versions
        epoch = self._key_epoch
        keys_it = keys.irange(start, end, (start_inclusive, end_inclusive), reverse)
        last_key: bytes | None = None
        while True:
            if self._key_epoch != epoch:
                # A new key changed the SortedList under us: re-seek just past the last key.
                epoch = self._key_epoch
                if last_key is not None:
                    if reverse:
                        keys_it = keys.irange(start, last_key, (start_inclusive, False), True)
                    else:
                        keys_it = keys.irange(last_key, end, (False, end_inclusive), False)
                else:
                    keys_it = keys.irange(start, end, (start_inclusive, end_inclusive), reverse)
            key = next(keys_it, None)
            if key is None:
                return
            last_key = key
            versions = versions_of[key]
            if type(versions) is not list:  # the key's one row
                if versions[1] <= max_seq:
                    yield versions if convert is None or type(versions) is Row else convert(versions)
            else:
                # Copy: a put between two steps may append to this very list.
                for row in versions[::-1]:
                    if row[1] <= max_seq:
                        yield row if convert is None else convert(row)

    def sorted_rows(self) -> list[Row | tuple]:
        """Every row, in ``(key asc, seq desc)`` order: ``list(iter_range())`` of a frozen table
        in one pass without an iterator step per row (what its L0 flush encodes), each row as
        held (a :class:`Row` or a plain row: :func:`slatedb.row.as_row` makes the Row)."""
        return self.sorted_rows_and_order()[0]

    def sorted_rows_and_order(self) -> tuple[list[Row | tuple], bool]:
        """(:meth:`sorted_rows`, whether that is the order the rows arrived in: every key put
        once, in ascending order, as a bulk load puts them)."""
        assert self._frozen, "only a frozen memtable is read whole"
        self._sync_keys()
        versions_of = self._versions
        keys = self._keys
        # The dict's own order is the order keys first arrived: when that is key order (keys put
        # ascending, the usual load), its values are the rows in order, without a lookup a key.
        arrival = bool(versions_of) and next(iter(versions_of)) == keys[0] and list(versions_of) == list(keys)
        if arrival:
            in_order = versions_of.values()
        else:
            in_order = map(versions_of.__getitem__, keys)
        if self._num_rows == len(versions_of):  # one version per key (no lists): the usual case
            return list(in_order), arrival
        out: list[Row] = []
        for versions in in_order:
            if type(versions) is list:
                out.extend(reversed(versions))
            else:
                out.append(versions)
        return out, False

    # -----------------------------------------------------------------------------------------
    # Size and bounds
    # -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of rows (versions), not of distinct keys (see :attr:`num_keys`)."""
        return self._num_rows

    @property
    def num_keys(self) -> int:
        return len(self._versions)

    @property
    def is_empty(self) -> bool:
        return self._num_rows == 0

    @property
    def size_bytes(self) -> int:
        """Estimated size: per row ``len(key) + len(value) + ROW_OVERHEAD_BYTES``."""
        return self._size_bytes

    @property
    def first_write(self) -> tuple[int, int] | None:
        """``(seq, create_ts_ms)`` of the first row put (None when empty or its time is
        unknown): what the manifest's sequence tracker records for this table (RFC 0012)."""
        if self._first_seq is None or self._first_ts_ms is None:
            return None
        return self._first_seq, self._first_ts_ms

    @property
    def last_write_ts_ms(self) -> int | None:
        """``create_ts_ms`` of the newest row (highest seq; None when empty or it has none): the
        table's clock tick, what its L0 flush records as ``last_l0_clock_tick``."""
        return self._last_ts_ms

    @property
    def first_seq(self) -> int | None:
        """Lowest seq held (``None`` when empty)."""
        return self._first_seq

    @property
    def last_seq(self) -> int | None:
        """Highest seq held (``None`` when empty)."""
        return self._last_seq

    @property
    def first_key(self) -> bytes | None:
        self._sync_keys()
        return self._keys[0] if self._keys else None

    @property
    def last_key(self) -> bytes | None:
        self._sync_keys()
        return self._keys[-1] if self._keys else None

    def __repr__(self) -> str:
        state = "frozen" if self._frozen else "live"
        return (
            f"Memtable({state}, rows={self._num_rows}, keys={len(self._versions)}, "
            f"size_bytes={self._size_bytes}, seq={self._first_seq}..{self._last_seq})"
        )
