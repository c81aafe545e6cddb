"""The client-visible history of a world of writers, as LIN checks it (``sim/scenarios/db.py``
describes the model of guarantees): every put, delete and get a writer called, stamped at call
and return with one counter, and which reads the model must leave out."""

from __future__ import annotations

from collections import deque
from typing import Any

import trio

import slatedb.aio as aio

from sim.checks.linearizability import PENDING, LinResult, Op, check_history


class _Write:
    __slots__ = ("process", "kind", "key", "value", "call", "call_s", "seq", "ret", "ret_s")

    def __init__(self, process: str, kind: str, key: bytes, value: bytes | None, call: int, call_s: float) -> None:
        self.process, self.kind, self.key, self.value = process, kind, key, value
        self.call, self.call_s = call, call_s
        self.seq: int | None = None
        self.ret: int | None = None
        self.ret_s = 0.0


class _Read:
    __slots__ = ("process", "epoch", "key", "value", "call", "ret", "call_s", "ret_s", "dep")

    def __init__(self, process: str, epoch: int, key: bytes, value: bytes | None, call: int, ret: int,
                 call_s: float, ret_s: float, dep: _Write | None) -> None:
        self.process, self.epoch, self.key, self.value = process, epoch, key, value
        self.call, self.ret, self.call_s, self.ret_s, self.dep = call, ret, call_s, ret_s, dep


class Incarnation:
    """One opened writer process: its epoch, and its writes not yet known durable."""

    def __init__(self, history: "History", name: str, epoch: int) -> None:
        self.history = history
        self.name = name
        self.epoch = epoch
        self.unconfirmed: deque[tuple[Any, _Write]] = deque()  # (WriteHandle, record), seq order
        self.last_write: dict[bytes, _Write] = {}

    def sweep(self) -> None:
        """Mark every write the client can now see durable as returned (durability is a prefix)."""
        q = self.unconfirmed
        while q and q[0][0].durable:
            _h, rec = q.popleft()
            rec.ret = self.history.tick()
            rec.ret_s = trio.current_time()

    async def write(self, db: aio.Db, kind: str, key: bytes, value: bytes | None) -> Any:
        h = self.history
        rec = _Write(self.name, kind, key, value, h.tick(), trio.current_time())
        h.writes.append(rec)
        handle = await (db.put(key, value) if kind == "put" else db.delete(key))  # type: ignore[arg-type]
        rec.seq = handle.seq
        self.unconfirmed.append((handle, rec))
        self.last_write[key] = rec
        return handle

    async def read(self, db: aio.Db, key: bytes) -> bytes | None:
        h = self.history
        dep = self.last_write.get(key)
        if dep is not None and dep.ret is not None:
            dep = None  # already durable when the read was called
        call, call_s = h.tick(), trio.current_time()
        value = await db.get(key)
        h.reads.append(_Read(self.name, self.epoch, key, value, call, h.tick(), call_s, trio.current_time(), dep))
        return value


class History:
    """What the clients of one world called and saw (the model: see the module docstring)."""

    def __init__(self) -> None:
        self.stamp = 0
        self.writes: list[_Write] = []
        self.reads: list[_Read] = []
        self.opens: list[tuple[int, int]] = []  # (epoch, stamp at which open returned)

    def tick(self) -> int:
        self.stamp += 1
        return self.stamp

    def opened(self, name: str, epoch: int) -> Incarnation:
        self.opens.append((epoch, self.tick()))
        return Incarnation(self, name, epoch)

    def ops(self) -> tuple[list[Op], int]:
        """The operations LIN checks, and how many reads the model leaves out."""
        ops = []
        for w in self.writes:
            seq = f"seq {w.seq}" if w.seq is not None else "no seq"
            if w.ret is None:
                note = f"t={w.call_s:.4f}s {seq}, never acknowledged durable"
                ops.append(Op(w.process, w.kind, w.key, w.value, w.call, PENDING, note))
            else:
                note = f"t={w.call_s:.4f}s..{w.ret_s:.4f}s {seq}, durable"
                ops.append(Op(w.process, w.kind, w.key, w.value, w.call, w.ret, note))
        dropped = 0
        for r in self.reads:
            newer_open = any(epoch > r.epoch and stamp < r.call for epoch, stamp in self.opens)
            if newer_open or (r.dep is not None and r.dep.ret is None):
                dropped += 1
                continue
            note = f"t={r.call_s:.4f}s..{r.ret_s:.4f}s epoch {r.epoch}"
            ops.append(Op(r.process, "get", r.key, r.value, r.call, r.ret, note))
        return ops, dropped

    def check(self) -> tuple[LinResult, int, int]:
        ops, dropped = self.ops()
        return check_history(ops), len(ops), dropped
