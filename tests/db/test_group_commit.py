"""Group commit of durable writes (issue 23 item 2, writer.md step 8, DUR-3): a durable wait
starts a WAL flush at once when its row is not in one already; waiters that arrive while a flush
is in flight share the next one; nobody waiting, nothing is flushed before ``flush_interval``.

No timing assertions: ``flush_interval`` is an hour, so a durable put that waited for the tick
would never return (the joins' generous timeouts only turn a hang into a failure), and WAL
writes are held at a gate the test opens, so what is in flight is decided by the test.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import trio

from slatedb import Db
from slatedb.objstore.base import OVERWRITE, ObjectMeta, PutMode
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime

HOUR = {"flush_interval": "3600s", "compactor_options": None}
JOIN_S = 120.0  # a hang guard only: each join below returns as soon as the WAL write lands


class GatedStore(MemoryStore):
    """WAL data objects (non-empty ``wal/`` puts) wait at ``gate`` when it is closed; each landed
    one is recorded in ``landed`` (in order), each that started in ``started``."""

    def __init__(self) -> None:
        super().__init__(MemoryBucket(), ProductionRuntime().now_ms, url="memory://group-commit")
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Semaphore(0)
        self.landed: list[str] = []

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        if key.startswith("wal/") and data:
            self.started.release()
            await trio.to_thread.run_sync(self.gate.wait)
            meta = await super().put(key, data, mode)
            self.landed.append(key)
            return meta
        return await super().put(key, data, mode)

    def wal_objects(self) -> list[str]:
        return [m.key for m in self.list_now("wal/") if m.size_bytes > 0]


@contextlib.contextmanager
def _open(store: GatedStore) -> Iterator[Db]:
    db = Db.open("memory://group-commit", HOUR, store=store)
    try:
        yield db
    finally:
        store.gate.set()  # a failing test must not leave close() waiting at the gate
        db.close()


def _durable_put(db: Db, key: bytes, out: list) -> threading.Thread:
    def run() -> None:
        out.append(db.put(key, b"v-" + key, durable=True).seq)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_durable_put_flushes_at_once_and_returns_only_after_its_wal_object_landed() -> None:
    store = GatedStore()
    with _open(store) as db:
        for i in range(3):  # nobody waits: nothing is written before the (hour-long) tick
            db.put(b"quiet%d" % i, b"x")
        assert store.wal_objects() == []
        store.gate.clear()
        got: list[int] = []
        t = _durable_put(db, b"k", got)
        assert store.started.acquire(timeout=JOIN_S), "the durable put did not start a WAL flush"
        assert t.is_alive() and got == [] and store.landed == []  # its WAL object has not landed: it waits
        store.gate.set()
        t.join(JOIN_S)
        assert not t.is_alive() and got == [4]
        assert store.wal_objects() == store.landed and len(store.landed) == 1  # one object, holding the quiet rows and ours


def test_waiters_arriving_during_a_flush_share_the_next_one() -> None:
    store = GatedStore()
    with _open(store) as db:
        core = db._core
        store.gate.clear()
        got: list[int] = []
        first = _durable_put(db, b"first", got)
        assert store.started.acquire(timeout=JOIN_S)  # flush 1 (row 1) is in flight, held at the gate
        others = [_durable_put(db, b"k%d" % i, got) for i in range(7)]
        while core.last_seq < 8:  # every other row is written (each thread then waits durable)
            threading.Event().wait(0.001)
        assert all(t.is_alive() for t in [first, *others]) and got == []
        store.gate.set()
        for t in [first, *others]:
            t.join(JOIN_S)
            assert not t.is_alive()
        assert sorted(got) == list(range(1, 9))
        # Two WAL objects for eight durable puts: the one in flight, and one shared by the 7 that came during it.
        assert len(store.landed) == 2, store.landed


def test_a_waiter_whose_row_is_in_flight_kicks_no_flush_and_a_later_one_kicks_the_next() -> None:
    """The kick decision itself, on the real engine while a flush is held in flight: a waiter for
    a row the flush took adds nothing (it shares that flush); a waiter for a row written after
    the flush took the buffer kicks the next one."""
    store = GatedStore()
    with _open(store) as db:
        core = db._core
        db.put(b"a", b"1")
        store.gate.clear()
        flusher = threading.Thread(target=db.flush, daemon=True)  # takes row 1 and holds at the gate
        flusher.start()
        assert store.started.acquire(timeout=JOIN_S)
        with core._lock:
            assert core._w.taken_seq == 1 and core._w.durable_seq == 0 and not core._kicked
            assert core._want_durable(1) == 1
            assert not core._kicked  # row 1 is in the flight: no extra flush
        db.put(b"b", b"2")
        with core._lock:
            assert core._want_durable(2) == 2
            assert core._kicked  # row 2 is not: the next flush is kicked
        store.gate.set()
        flusher.join(JOIN_S)
        core.wait_durable_sync(2, JOIN_S)
        assert len(store.landed) == 2


def test_nobody_waiting_no_wal_object_before_the_interval() -> None:
    store = GatedStore()
    with _open(store) as db:
        for i in range(200):
            db.put(b"k%03d" % i, b"v")
        handle = db.put(b"last", b"v")
        assert not handle.durable and store.wal_objects() == []
        db.flush()
        assert len(store.wal_objects()) == 1 and handle.durable
