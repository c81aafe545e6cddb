"""One differential run: a sequence of operations (:mod:`sim.diff.ops`) against our engine and
the official wheel, on one shared store (one writer at a time, engines switched, killed and
reopened mid-sequence) or on twin stores (each engine its own store, every operation on both).
Every read is compared with the model (:mod:`sim.diff.model`) and, on twin stores, between the
engines; ``slatedb check`` runs after every step (``--deep`` at the end, on every database the
run made). The first mismatch ends the run as a :class:`Mismatch`."""

from __future__ import annotations

import base64
import shutil
import tempfile
from pathlib import Path

import attrs
import trio

from slatedb import admin
from slatedb.checker import check_store
from slatedb.errors import InvalidArgumentError
from slatedb.objstore import resolve_store
from slatedb.runtime.production import ProductionRuntime

from .engines import OUR, THEIRS, Engine, EngineDied, EngineError
from .model import Model
from .ops import N_KEYS, SHARED, key

SETTINGS = {"flush_interval": "10ms", "l0_sst_size_bytes": 4096, "l0_max_ssts": 64, "compactor_options": None}
CHECK_EVERY = 1  # steps between structural checks


@attrs.frozen
class Mismatch:
    step: int
    op: dict
    kind: str  # "read", "check:<ID>", "error:<engine>", "twin"
    detail: str

    def signature(self) -> str:
        return self.kind


@attrs.define
class Stats:
    sequences: int = 0
    operations: int = 0
    switches: int = 0
    kills: int = 0
    reads: int = 0
    checks: int = 0
    skipped: int = 0


def _b(s: str | None) -> str | None:
    return None if s is None else base64.b64encode(s.encode("latin-1")).decode()


def _s(b: str | None) -> str | None:
    return None if b is None else base64.b64decode(b).decode("latin-1")


class Store:
    """One database root driven by one or two engines, with its model."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.model = Model()
        self.writer: Engine | None = None
        self.snapshots: list[tuple[Engine, int, Model]] = []
        self.checkpoints: list[tuple[str, Model]] = []
        self.clones = 0
        self.unions = 0

    @property
    def url(self) -> str:
        return f"file://{self.root}/db"


class Failed(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        self.kind, self.detail = kind, detail
        super().__init__(f"{kind}: {detail}")


class DiffRun:
    def __init__(self, engines: dict[str, Engine], mode: str, workdir: Path, stats: Stats,
                 allow: frozenset[str] = frozenset(), avoid_known: bool | None = None) -> None:
        self.engines = engines
        self.allow = allow
        #: Steer around known official defects (finding 3) so that a campaign looks for new ones.
        self.avoid_known = "COMPACT-4" in allow if avoid_known is None else avoid_known
        self.mode = mode
        self.stats = stats
        self.rt = ProductionRuntime()
        if mode == SHARED:
            self.stores = [Store(workdir / "shared")]
        else:
            self.stores = [Store(workdir / OUR), Store(workdir / THEIRS)]
        for s in self.stores:
            s.root.mkdir(parents=True)

    # -- plumbing ---------------------------------------------------------------------------------

    def _req(self, engine: Engine, **req) -> dict:
        try:
            return engine.request(**req)
        except EngineError as e:
            raise Failed(f"error:{engine.name}", f"{e.op}: {e.error}\n{e.trace}") from None
        except EngineDied as e:
            raise Failed(f"error:{engine.name}", str(e)) from None

    def _open(self, store: Store, engine: Engine) -> None:
        self._req(engine, op="open", root=str(store.root), path="db", settings=SETTINGS)
        store.writer = engine
        store.model.durable()

    def _close(self, store: Store) -> None:
        if store.writer is not None:
            self._req(store.writer, op="close")
            store.writer = None
        store.snapshots.clear()
        store.model.durable()

    def _writers(self) -> list[Store]:
        if self.mode != SHARED:
            for s, name in zip(self.stores, (OUR, THEIRS)):
                if s.writer is None:
                    self._open(s, self.engines[name])
        return self.stores

    def _compare(self, store: Store, rows: list, lo: str | None, hi: str | None, model: Model, what: str) -> dict:
        self.stats.reads += 1
        got = {_s(k): _s(v) for k, v in rows}
        keys = [key(i) for i in range(N_KEYS) if (lo is None or key(i) >= lo) and (hi is None or key(i) < hi)]
        extra = set(got) - set(keys)
        if extra:
            raise Failed("read", f"{what}: keys outside the range or never written: {sorted(extra)[:5]}")
        for k in keys:
            if not model.observe(k, got.get(k)):
                raise Failed("read", f"{what}: {k} = {got.get(k)!r}, expected one of "
                                     f"{sorted(model.candidates(k), key=str)!r}")
        return got

    # -- operations ---------------------------------------------------------------------------------

    def apply(self, op: dict) -> None:
        name = op["op"]
        if name == "open":
            self._open(self.stores[0], self.engines[op["engine"]])
            return
        if name == "switch":
            s = self.stores[0]
            other = THEIRS if s.writer is None or s.writer.name == OUR else OUR
            self._close(s)
            self._open(s, self.engines[other])
            self.stats.switches += 1
            return
        if name == "kill":
            for s in self._writers():
                assert s.writer is not None
                victim = s.writer
                victim.kill()
                s.writer = None
                s.snapshots.clear()
                s.model.crash()
                self.stats.kills += 1
                again = self.engines[op["reopen_with"]] if self.mode == SHARED else victim
                if self.mode == SHARED and again.name != victim.name:
                    self.stats.switches += 1
                self._open(s, again)
                s.model.durable()  # what the reopen replayed is durable now
            return
        if name == "reopen":
            for s in self._writers():
                w = s.writer
                self._close(s)
                self._open(s, w)
            return
        twin: list[dict | None] = []
        for s in self._writers():
            twin.append(self._apply_one(s, op))
        if self.mode != SHARED and len(twin) == 2 and twin[0] is not None and twin[1] is not None:
            a, b = twin
            both = [k for k in set(a) | set(b) if all(st.model.certain(k) for st in self.stores)]
            diff = [k for k in sorted(both) if a.get(k) != b.get(k)]
            if diff:
                raise Failed("twin", f"{name}: ours and official differ on {diff[:5]}: "
                                     f"{[(k, a.get(k), b.get(k)) for k in diff[:3]]}")

    def _apply_one(self, s: Store, op: dict) -> dict | None:
        name = op["op"]
        w = s.writer
        assert w is not None
        m = s.model
        if name == "put":
            self._req(w, op="put", key=_b(op["key"]), value=_b(op["value"]), ttl_ms=op.get("ttl_ms"))
            m.write(op["key"], op["value"], expired=op.get("ttl_ms") == 1)
        elif name == "delete":
            self._req(w, op="delete", key=_b(op["key"]))
            m.write(op["key"], None)
        elif name == "batch":
            self._req(w, op="batch", ops=[{**x, "key": _b(x["key"]), "value": _b(x.get("value"))} for x in op["ops"]])
            for x in op["ops"]:
                m.write(x["key"], x.get("value") if x["op"] == "put" else None)
        elif name == "get":
            got = _s(self._req(w, op="get", key=_b(op["key"]))["value"])
            self.stats.reads += 1
            if not m.observe(op["key"], got):
                raise Failed("read", f"get {op['key']} via {w.name} = {got!r}, expected one of "
                                     f"{sorted(m.candidates(op['key']), key=str)!r}")
            return {op["key"]: got}
        elif name == "scan":
            rows = self._req(w, op="scan", start=_b(op["start"]), end=_b(op["end"]))["rows"]
            return self._compare(s, rows, op["start"], op["end"], m, f"scan [{op['start']}, {op['end']}) via {w.name}")
        elif name == "snapshot":
            sid = self._req(w, op="snapshot")["id"]
            s.snapshots.append((w, sid, m.frozen()))
        elif name == "snap_scan":
            if not s.snapshots:
                self.stats.skipped += 1
                return None
            eng, sid, frozen = s.snapshots[op["index"] % len(s.snapshots)]
            rows = self._req(eng, op="snap_scan", id=sid)["rows"]
            return self._compare(s, rows, None, None, frozen, f"snapshot {sid} scan via {eng.name}")
        elif name == "flush_wal":
            self._req(w, op="flush_wal")
            m.durable()
        elif name == "flush_l0":
            self._req(w, op="flush_l0")
            m.durable()
        elif name == "checkpoint":
            cid = self._req(w, op="checkpoint")["id"]
            m.durable()
            s.checkpoints.append((cid, m.frozen()))
        elif name == "read_checkpoint":
            if not s.checkpoints:
                self.stats.skipped += 1
                return None
            cid, frozen = s.checkpoints[op["index"] % len(s.checkpoints)]
            by = self.engines[op["by"]] if self.mode == SHARED else w
            rows = self._req(by, op="read_checkpoint", root=str(s.root), path="db", id=cid)["rows"]
            return self._compare(s, rows, None, None, frozen, f"checkpoint {cid} via {by.name}")
        elif name == "compact":
            trio.run(_compact, s.url)
        elif name == "clone":
            s.clones += 1
            dest = f"clone{s.clones}"
            self._req(w, op="clone", dest=dest)
            m.durable()
            frozen = m.frozen()
            readers = [self.engines[OUR], self.engines[THEIRS]] if self.mode == SHARED else [w]
            out = None
            for r in readers:
                rows = self._req(r, op="read_db", root=str(s.root), path=dest)["rows"]
                out = self._compare(s, rows, None, None, frozen.frozen(), f"clone {dest} via {r.name}")
            return None if self.mode == SHARED else out
        elif name == "union":
            return self._union(s, op)
        else:
            raise ValueError(f"unknown op {op}")
        return None

    def _union(self, s: Store, op: dict) -> dict | None:
        """Projections of ``db`` at the cut and their union, made by one engine (the writer
        closed first: projections take sources without WAL rows), read by both; then the union
        compacted by one engine's compactor and read again."""
        w = s.writer
        assert w is not None
        self._close(s)
        by = self.engines[op["by"]] if self.mode == SHARED else w
        s.unions += 1
        a, b, u = f"p{s.unions}a", f"p{s.unions}b", f"u{s.unions}"
        root = str(s.root)
        try:
            by.request(op="project", root=root, src="db", dest=a, start=None, end=op["cut"])
            by.request(op="project", root=root, src="db", dest=b, start=op["cut"], end=None)
            by.request(op="union", root=root, dest=u, sources=[a, b])
        except EngineError as e:
            if "WAL" in e.error:
                self.stats.skipped += 1
                self._open(s, w)
                return None
            raise Failed(f"error:{by.name}", f"union: {e.error}\n{e.trace}") from None
        self._open(s, w)
        frozen = s.model.frozen()
        readers = [self.engines[OUR], self.engines[THEIRS]] if self.mode == SHARED else [w]
        out = None
        for when in ("made", "compacted"):
            if when == "compacted":
                if op.get("compact_with") is None:
                    break
                c = self.engines[op["compact_with"]] if self.mode == SHARED else w
                if self.avoid_known and by.name == THEIRS and c.name == THEIRS:
                    c = self.engines[OUR]  # finding 3: the official compactor loses rows of its own union
                self._req(c, op="compact_db", root=root, path=u)
            for r in readers:
                rows = self._req(r, op="read_db", root=root, path=u)["rows"]
                out = self._compare(s, rows, None, None, frozen.frozen(),
                                    f"union {u} ({by.name}) {when}{'' if when == 'made' else ' by ' + op['compact_with']}"
                                    f" via {r.name}")
            self._check_db(s.root / u)
        return None if self.mode == SHARED else out
    # -- checks -------------------------------------------------------------------------------------

    def check(self, *, deep: bool = False, every_db: bool = False) -> None:
        for s in self.stores:
            dbs = [s.root / "db"]
            if every_db:
                dbs = sorted(p.parent.parent for p in s.root.rglob("manifest/*.manifest"))
                dbs = list(dict.fromkeys(dbs))
            for db in dbs:
                report = trio.run(_check, f"file://{db}", deep, self.rt.now_ms)
                self.stats.checks += 1
                found = [f for f in report.findings if f.invariant not in self.allow]
                if found:
                    raise Failed(f"check:{found[0].invariant}", f"{db.parent.name}/{db.name}: " + "; ".join(x.line() for x in found[:4]))

    def _check_db(self, db: Path) -> None:
        report = trio.run(_check, f"file://{db}", False, self.rt.now_ms)
        self.stats.checks += 1
        found = [f for f in report.findings if f.invariant not in self.allow]
        if found:
            raise Failed(f"check:{found[0].invariant}", f"{db.parent.name}/{db.name}: " + "; ".join(x.line() for x in found[:4]))

    def finish(self) -> None:
        for s in self.stores:
            if s.writer is not None:
                self._close(s)
        self.check(deep=True, every_db=True)


async def _compact(url: str) -> None:
    store = resolve_store(url)
    try:
        try:
            await admin.submit_compaction(store, "Full")
        except InvalidArgumentError as e:
            if "nothing to compact" in str(e):
                return
            raise
        await admin.run_compactor(store, once=True)
    finally:
        await store.aclose()


async def _check(url: str, deep: bool, clock):
    store = resolve_store(url)
    try:
        return await check_store(store, deep=deep, now_ms=clock)
    finally:
        await store.aclose()


def run_sequence(ops: list[dict], mode: str, engines: dict[str, Engine], stats: Stats,
                 allow: frozenset[str] = frozenset(), keep: Path | None = None,
                 avoid_known: bool | None = None) -> Mismatch | None:
    """Run ``ops``; the first mismatch, or None. ``allow``: check invariants tolerated (a known
    defect being fixed elsewhere). The stores are deleted afterwards unless ``keep``."""
    workdir = Path(tempfile.mkdtemp(prefix="slatedb-diff-", dir=keep))
    run = DiffRun(engines, mode, workdir, stats, allow, avoid_known)
    stats.sequences += 1
    step, op = -1, {"op": "finish"}
    try:
        for step, op in enumerate(ops):
            stats.operations += 1
            run.apply(op)
            if step % CHECK_EVERY == 0:
                run.check()
        step, op = len(ops), {"op": "finish"}
        run.finish()
        return None
    except Failed as f:
        return Mismatch(step, op, f.kind, f.detail)
    except Exception as e:  # noqa: BLE001 - the harness's own step failed (e.g. our compactor): named, not fatal
        return Mismatch(step, op, f"error:{type(e).__name__}", f"{type(e).__name__}: {e}")
    finally:
        for e in engines.values():
            try:
                e.request(op="close")
            except (EngineError, EngineDied):
                e.kill()
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
