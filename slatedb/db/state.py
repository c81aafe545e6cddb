"""The writer's state (LevelDB's ``DBImpl`` owning ``mem_``, ``imm_`` and ``log_``): the live
memtable, the frozen memtables bound for L0, the WAL buffer and the cuts taken with a memtable,
the byte counters, the sequence numbers and the read state built from them. One object owns it;
the write path, the flushers and the manifest follower change it only through its methods.

REQUIRES: ``lock`` held around every method and every read of a field that must be consistent
with another (the hot path's ``append``/``append_batch`` included). ``read_state`` alone may be
read without it: it is replaced in one assignment.

Invariants, each asserted where it is made and again where it is relied on (paired):

* **Rows are numbered without gaps**: each appended row's seq is the previous ``last_seq`` + 1
  (``append``); the WAL rows handed to the flusher continue exactly where the previous hand-over
  stopped (``take_wal``).
* **durable_seq <= last_seq**, and only rows already handed to the flusher become durable
  (``mark_durable``).
* **A cut holds exactly the WAL rows up to it**: the rows taken with a frozen memtable end at that
  memtable's last seq, and the WAL buffer starts empty after it (``cut``, checked again in
  ``take_wal``), so every row of a frozen memtable is in a WAL object ``<= last_wal_id``.
* **Create times never go back** (DUR-5): a row is stamped with the writer's clock, but never
  below ``clock_ms``, the newest create time the database has (the manifest's
  ``last_l0_clock_tick`` and the replayed rows' at open, each appended row's after), as the
  official engine's monotonic clock; the stamp is taken under ``lock``, so seq order is time
  order across threads too. A clock behind the database's (another host taking over, a clock
  stepped back) stamps ``clock_ms`` until it catches up; the official engine replaying an older
  row refuses its tick (``InvalidClockTick``).
"""

from __future__ import annotations

import threading

from slatedb.lsm.read_path import ReadState
from slatedb.lsm.view import EMPTY_VIEW, LsmView
from slatedb.memtable import ROW_OVERHEAD_BYTES, Memtable
from slatedb.row import Row

#: ``clock_ms`` of :class:`UnclampedWriterState` (catalogued bug ``row-clock-unclamped``).
_UNCLAMPED = -(2**62)


class ImmEntry:
    """A frozen memtable waiting for its L0 flush. ``last_wal_id`` is set once every row of it
    is in a WAL object (then it may be flushed to L0 and ``replay_after_wal_id`` advanced)."""

    __slots__ = ("mem", "last_wal_id", "size_bytes")

    def __init__(self, mem: Memtable) -> None:
        self.mem = mem
        self.last_wal_id: int | None = None
        self.size_bytes = mem.size_bytes


#: One hand-over to the WAL flusher: rows in seq order (plain rows, or :class:`Row` where a
#: caller appended them so), and the memtable frozen with them (if any).
WalCut = tuple[list[tuple], "ImmEntry | None"]


class WriterState:
    """Memtables, WAL buffer and cuts, byte counters, ``last_seq`` / ``durable_seq`` and the read
    state, under ``lock`` (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.memtable = Memtable()
        self.imms: list[ImmEntry] = []  # newest first
        # The WAL buffer: rows not yet handed to the flusher (plain rows, as the memtable holds them).
        self.wal_rows: list[tuple] = []
        self.wal_cuts: list[WalCut] = []  # buffers cut with a memtable, oldest first
        self.wal_bytes = 0  # bytes in the WAL buffer and the cuts
        self.unflushed_bytes = 0  # bytes in memtables not yet in L0
        self.last_seq = 0  # the seq of the newest row
        self.taken_seq = 0  # the seq of the newest row handed to the WAL flusher
        self.durable_seq = 0  # the seq of the newest row in a WAL object (acknowledged)
        self.clock_ms = 0  # the newest create time: no row is stamped below it (DUR-5)
        self.read_state = ReadState((self.memtable,), EMPTY_VIEW)

    # ------------------------------------------------------------------------------------------
    # Writes (hot path)
    # ------------------------------------------------------------------------------------------

    def append(self, key: bytes, kind: int, value: bytes, expire: int | None, now: int) -> int:
        """One validated row into the live memtable and the WAL buffer; returns its seq. ``kind``
        is a :class:`RowKind` as a plain ``int``: the row is held plainly (a tuple in Row's field
        order, which the cyclic GC untracks; :func:`slatedb.row.as_row`)."""
        seq = self.last_seq + 1
        if now < self.clock_ms:
            now = self.clock_ms  # a clock behind the database's (DUR-5)
        else:
            self.clock_ms = now
        row = (key, seq, kind, value, expire, now)
        self.memtable.put(row)
        self.wal_rows.append(row)
        self.last_seq = seq
        size = len(key) + len(value) + ROW_OVERHEAD_BYTES
        self.wal_bytes += size
        self.unflushed_bytes += size
        return seq

    def stamp(self, now: int) -> int:
        """The create time of rows appended now by a clock reading ``now`` (DUR-5): never below
        the newest one (a batch's rows, stamped once, :meth:`append_rows`)."""
        if now < self.clock_ms:
            return self.clock_ms
        self.clock_ms = now
        return now

    def append_rows(self, rows: list[tuple]) -> None:
        """Rows numbered ``last_seq + 1 ..`` consecutively (a batch, built by the caller from a
        ``range``, held plainly as :meth:`append`'s, stamped by :meth:`stamp`), into the live
        memtable and the WAL buffer. The seq pairing is checked once per batch, at both ends."""
        assert rows[0][1] == self.last_seq + 1 and rows[-1][1] == self.last_seq + len(rows), "seq gap"
        assert rows[0][5] is None or rows[0][5] >= self.clock_ms, "rows not stamped (stamp)"
        size = self.memtable.put_rows(rows)
        self.wal_rows.extend(rows)
        self.last_seq = rows[-1][1]
        self.wal_bytes += size
        self.unflushed_bytes += size

    # ------------------------------------------------------------------------------------------
    # Cuts and hand-over to the WAL flusher
    # ------------------------------------------------------------------------------------------

    def mems(self) -> tuple[Memtable, ...]:
        """The memtables a read consults, newest first."""
        return (self.memtable, *[e.mem for e in self.imms])

    def publish(self, view: LsmView) -> ReadState:
        """Install the read state of the current memtables over ``view``."""
        self.read_state = rs = ReadState(self.mems(), view)
        return rs

    def cut(self) -> ImmEntry:
        """Freeze the live memtable together with the WAL buffer: the frozen memtable's rows are
        exactly those of the WAL rows handed over up to this cut."""
        mem = self.memtable
        rows = self.wal_rows
        end = rows[-1][1] if rows else self.taken_seq
        assert mem.last_seq is None or mem.last_seq == end == self.last_seq, (
            f"cut: memtable ends at {mem.last_seq}, its WAL rows at {end}, last seq {self.last_seq}")
        mem.freeze()
        entry = ImmEntry(mem)
        self.imms.insert(0, entry)
        self.wal_cuts.append((rows, entry))
        self.wal_rows = []
        self.memtable = Memtable()
        self.publish(self.read_state.view)
        return entry

    def take_wal(self) -> list[WalCut]:
        """Hand every cut and the WAL buffer to the flusher (oldest first); the buffer empties."""
        cuts = self.wal_cuts
        self.wal_cuts = []
        if self.wal_rows:
            cuts.append((self.wal_rows, None))
        self.wal_rows = []
        self.wal_bytes = 0
        taken = self.taken_seq
        for rows, entry in cuts:
            if rows:
                assert rows[0][1] == taken + 1 and rows[-1][1] == taken + len(rows), (
                    f"WAL rows {rows[0][1]}..{rows[-1][1]} after {taken}: not consecutive")
                taken = rows[-1][1]
            if entry is not None:
                assert entry.mem.last_seq is None or entry.mem.last_seq == taken, (
                    f"cut of a memtable ending at {entry.mem.last_seq} holds WAL rows up to {taken}")
        assert taken == self.last_seq, (taken, self.last_seq)
        self.taken_seq = taken
        return cuts

    def mark_durable(self, seq: int) -> None:
        """Rows up to ``seq`` (the last of a WAL object written) are durable."""
        assert self.durable_seq <= seq <= self.taken_seq <= self.last_seq, (
            f"durable {self.durable_seq} -> {seq}, taken {self.taken_seq}, last {self.last_seq}")
        self.durable_seq = seq

    # ------------------------------------------------------------------------------------------
    # Open, L0 flushes, close
    # ------------------------------------------------------------------------------------------

    def replayed(self, rows: list[Row], last_seq: int, last_wal_id: int, clock_ms: int = 0) -> None:
        """At open: the rows replayed from WAL objects up to ``last_wal_id`` (durable already),
        frozen at once as a memtable bound for L0; ``last_seq`` from the manifest or the rows;
        ``clock_ms`` the manifest's ``last_l0_clock_tick`` (DUR-5: with the replayed rows'
        create times, the floor of every later row's)."""
        mem = self.memtable
        assert mem.is_empty and not self.imms and self.last_seq == 0
        newest_ms = clock_ms
        for row in rows:
            mem.put(row)
            if row.create_ts_ms is not None and row.create_ts_ms > newest_ms:
                newest_ms = row.create_ts_ms
        self.clock_ms = max(self.clock_ms, newest_ms)
        self.last_seq = self.taken_seq = self.durable_seq = last_seq
        self.unflushed_bytes = mem.size_bytes
        if rows:
            mem.freeze()
            entry = ImmEntry(mem)
            entry.last_wal_id = last_wal_id
            self.imms.insert(0, entry)
            self.memtable = Memtable()

    def flushed(self, entry: ImmEntry) -> None:
        """``entry``'s memtable is in L0 (committed): it leaves the state."""
        assert entry.last_wal_id is not None and entry is self.imms[-1], "L0 flushes go oldest first"
        self.imms.remove(entry)
        self.unflushed_bytes -= entry.size_bytes
        assert self.unflushed_bytes >= 0, self.unflushed_bytes

    def release(self) -> None:
        """Drop every memtable and the WAL buffer (a closed database pins nothing)."""
        self.memtable = Memtable()
        self.imms = []
        self.wal_rows = []
        self.wal_cuts = []
        self.read_state = ReadState((self.memtable,), EMPTY_VIEW)


class UnclampedWriterState(WriterState):
    """Catalogued bug ``row-clock-unclamped`` (sim/scenarios/catalogue.py): rows are stamped with
    the writer's clock as it reads, below the database's newest create time when the clock is
    behind (DUR-5). ``clock_ms`` stays at a floor no clock reaches."""

    @property  # type: ignore[override]
    def clock_ms(self) -> int:
        return _UNCLAMPED

    @clock_ms.setter
    def clock_ms(self, value: int) -> None:
        pass
