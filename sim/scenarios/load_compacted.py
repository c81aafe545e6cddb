"""A load committed into a database that a compactor and GC work on, with a checkpoint holding an
older manifest and a writer that may open during the commit (spec/protocols/bulk-load.md LOAD-6,
LOAD-12, DUR-1): the ``load`` scenario's epilogue in a share of its plain seeds
(``sim/scenarios/load.py``), run after the run's verdict on the database the run left.

The world's own processes run no compactor and no GC (its oracle reads every manifest and WAL
object the run wrote); here, on a store with latency and, in half of these seeds, the run's own
faults (transient errors, lost replies, stalls: a commit's ambiguous create, a GC pass or a
compaction retried), these processes race:

* ``w9``, a writer, opens the database and writes a few keys (acknowledged, in its WAL: the load's
  commit moves them to its WAL-tail SST) and stays open until the load's commit fences it;
* ``l9``, a load's driver: begin, stage, commit. In most of these seeds its store **stalls right
  after its commit's manifest create landed** (RFC 004's stalled committer, the shape of LOAD-12),
  for a drawn time; while it stalls:
* ``r9``, a reader, takes a checkpoint of the latest manifest (the load's commit: it names the
  staged SSTs) and reads the database at it;
* drawn, ``c9`` runs a **full compaction** of the loaded database (the load's L0 rewritten: the
  latest manifest no longer names the staged SSTs), or ``w10``, a new writer, opens the database
  (a newer epoch than the load's); then ``g9`` runs GC passes (manifest ``min_age`` 0: its
  boundary passes the load's commit manifest, which the stalled commit then finds behind it);
* the commit goes on: it must tell its landed update apart from a refusal (LOAD-12: committed
  after the compaction; after a writer opened, ``CommitOutcomeUnknownError``, deleting nothing);
* the load is cleaned up after a drawn pause: by its driver, or (its driver died after the
  commit) by an operator's ``collect_loads`` (``l9.abort``), after the compaction in most seeds;
* ``g9`` runs a GC pass with the checkpoint still active, ``r9`` reads at it again: **LOAD-6**,
  the clean-up kept the staged SSTs the checkpoint's manifest names (catalogued
  ``cleanup-latest-only``; probe ``load.cleanup-kept-pinned``); then the checkpoint is deleted,
  GC runs again, and a final open reads every key: **DUR-1** (the writers' acknowledged rows,
  the load's rows when its commit landed) and **LOAD-12** (a landed commit not reported
  refused; catalogued ``load-landed-by-ssts``).
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb import admin
from slatedb.checkpoint import CheckpointOptions, create_checkpoint, delete_checkpoint
from slatedb.errors import CommitOutcomeUnknownError, FencedError, SlateDBError
from slatedb.format.manifest import decode_manifest_v2
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.memory import MemoryStore
from slatedb.reader.aio import DbReader
from slatedb.spark.load import LoadRefusedError, begin_load, cleanup_load, collect_loads, commit_load, stage_sorted

from sim.world.choices import boolean
from sim.world.runtime import SimRuntime
from sim.world.store import SimObjectStore, StoreFaults
from sim.world.trace import Trace

#: The share of the plain (non-sharded) seeds that run this epilogue.
SHARE = 0.35
WRITER_KEYS = tuple(b"x%02d" % i for i in range(6))
LOAD_KEYS = tuple(b"y%02d" % i for i in range(12))
#: GC of every directory at once (the boundary passes the load's commit manifest in one pass).
GC_SETTINGS = {"garbage_collector_options": {
    name: {"interval": "100ms", "min_age": "0ms"}
    for name in ("manifest_options", "wal_options", "compacted_options", "compactions_options")}}
COMPACTOR_SETTINGS = {"compactor_options": {"poll_interval": "50ms"}}


def applies(world: Any) -> bool:
    """This epilogue runs: a plain seed (no sharded load) drawn into the share."""
    return not any(ld.sharded for ld in world.loads) and boolean(world.setup.choices.stream("load-compacted"), SHARE)


class _Stalling:
    """``inner`` whose put of the load's commit manifest (``last_l0_seq`` the load's seq) lands,
    then stalls ``stall_s`` before it returns; ``landed`` is set then."""

    def __init__(self, inner: Any, stall_s: float) -> None:
        self.inner, self.stall_s, self.seq, self.landed, self.hit = inner, stall_s, None, trio.Event(), False
        self.url = inner.url

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def put(self, key: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
        out = await self.inner.put(key, data, *args, **kwargs)
        if (self.seq is not None and not self.landed.is_set() and key.startswith("manifest/")
                and key.endswith(".manifest") and decode_manifest_v2(bytes(data), key).last_l0_seq == self.seq):
            self.hit = True
            self.landed.set()
            await trio.sleep(self.stall_s)
        return out


async def compacted(world: Any, settings: dict, sst_options: Any) -> list[str]:
    """The epilogue (module docstring); its violations, as ``"ID: what"`` messages."""
    setup = world.setup
    rng = setup.choices.stream("load-compacted", "plan")
    who = rng.choice(["compaction", "compaction", "compaction", "writer", "none"])
    stall_s = rng.choice([0.0, rng.uniform(0.5, 4.0), rng.uniform(0.5, 4.0), rng.uniform(0.5, 4.0)])
    cleanup_by = rng.choice(["driver", "driver", "collect"])
    pause_s = rng.uniform(0.0, 2.0)
    after_compaction = boolean(rng, 0.8)  # the clean-up waits for the compaction (else it races it)
    n_writes = rng.randint(1, len(WRITER_KEYS))
    keys = sorted(k for k in LOAD_KEYS if boolean(rng, 0.7)) or [LOAD_KEYS[0]]

    # The stores' calls go to a trace of their own: the run's trace checkers model the WAL and the
    # manifests from the store calls they saw, and the final read before this epilogue (its own
    # writer's open and fence) was not traced. The processes' events go to the run's trace.
    calls = Trace(trio.current_time)
    # In half of these seeds the run's own faults (transient errors, lost replies, stalls) at the
    # epilogue's short latency; in the others none, so the stalled commit's races stay frequent.
    faults = StoreFaults(latency_min_s=0.0005, latency_max_s=0.01)
    if boolean(setup.choices.stream("load-compacted", "faults"), 0.5):
        faults = attrs.evolve(world.faults, latency_min_s=faults.latency_min_s, latency_max_s=faults.latency_max_s)
    mode = "store faults" if faults.transient_rate or faults.ambiguous_rate or faults.stall_rate else "no faults"

    def io(name: str) -> tuple[SimRuntime, SimObjectStore]:
        # A process's clock starts at the epoch when it is made: these read the world's time, as
        # the run's processes (made at its start) do; behind it, the load's staged SSTs would be
        # minted below the writers' L0 and re-minted by the commit (GC-5), out of its intents' reach.
        rt = SimRuntime(name, setup.choices, setup.trace, bugs=setup.bugs,
                        offset_ms=int(trio.current_time() * 1000))
        inner = MemoryStore(setup.bucket, rt.now_ms, url="memory://sim", registry=world.registry)
        return rt, SimObjectStore(inner, setup.choices.stream("store", name), calls, process=name,
                                  faults=faults)

    acked: dict[bytes, bytes] = {}
    out: list[str] = []
    state: dict[str, Any] = {"outcome": "planned"}
    written, done = trio.Event(), trio.Event()
    l_rt, l_store = io("l9")
    stalling = _Stalling(l_store, stall_s)
    pinned: dict[str, Any] = {}
    rt_final, store_final = io("f9")

    async def writer(name: str, n: int, hold: bool) -> None:
        rt, store = io(name)
        try:
            async with aio.Db.open("memory://sim", settings, store=store, runtime=rt) as db:
                for i in range(n):
                    key, value = WRITER_KEYS[i], b"%s:%d" % (name.encode(), i)
                    await (await db.put(key, value)).wait_durable()
                    acked[key] = value
                written.set()
                if hold:
                    await done.wait()
        except* (FencedError, SlateDBError):
            pass  # fenced by the load's commit (w9), or by a later open
        written.set()

    async def driver() -> None:
        await written.wait()
        plan = await begin_load(l_store, l_rt, overwrite=False)
        stalling.seq = plan.seq
        vals = [b"l9:" + k for k in keys]
        res = await stage_sorted(l_store, l_rt, plan, 0, 0, keys, vals, sst_options=sst_options, sst_size_bytes=200)
        state["rows"] = dict(zip(keys, vals))
        state["outcome"] = "committing"
        try:
            await commit_load(stalling, l_rt, plan, [res])
            state["outcome"] = "committed"
        except LoadRefusedError as e:
            state["outcome"], state["why"] = "refused", e
        except CommitOutcomeUnknownError as e:
            state["outcome"], state["why"] = "unsure", e
        stalling.landed.set()  # (a refused commit never landed: nobody waits for it any more)
        await trio.sleep(pause_s)
        if after_compaction:
            await state["compacted"].wait()
        if cleanup_by == "driver":
            await cleanup_load(l_store, l_rt, plan.load_id)
        else:
            a_rt, a_store = io("l9.abort")
            l_rt.event("load_driver_died", load_id=plan.load_id)
            await collect_loads(a_store, a_rt, abandoned_after_s=0)
        done.set()

    async def overtake() -> None:
        """While the commit stalls: the reader's checkpoint, a compaction or a writer, GC passes."""
        await stalling.landed.wait()
        if state["outcome"] in ("committing", "committed"):
            r_rt, r_store = io("r9")
            cid = (await create_checkpoint(ManifestStore(r_store, r_rt), r_rt, CheckpointOptions(lifetime_s=600))).id
            pinned.update(cid=cid, rt=r_rt, store=r_store, rows=await _read(cid, r_store, r_rt))
            if who == "compaction":
                c_rt, c_store = io("c9")
                try:
                    await admin.submit_compaction(c_store, "Full", runtime=c_rt)
                    await admin.run_compactor(c_store, COMPACTOR_SETTINGS, once=True, runtime=c_rt)
                except SlateDBError as e:
                    c_rt.event("compaction_skipped", error=f"{type(e).__name__}: {e}")
            elif who == "writer":
                await writer("w10", 0, False)
            await gc_pass()
        state["compacted"].set()

    async def gc_pass() -> None:
        g_rt, g_store = io("g9")
        await admin.run_gc(g_store, GC_SETTINGS, once=True, runtime=g_rt)

    state["compacted"] = trio.Event()
    async with trio.open_nursery() as n:
        n.start_soon(writer, "w9", n_writes, True)
        n.start_soon(driver)
        n.start_soon(overtake)
    landed = stalling.hit
    rt_final.event("load_compacted", who=who, stall_s=round(stall_s, 3), outcome=state["outcome"], landed=landed,
                   pinned=bool(pinned), cleanup=cleanup_by, after_compaction=after_compaction, faults=mode)
    # LOAD-12: the commit's manifest create landed; the only process that may take its epoch is a
    # writer opening (then the commit cannot tell: unsure). A refusal, or an unsure report with no
    # writer in between, says a landed commit did not commit.
    why = state.get("why")
    if landed and (
            state["outcome"] == "refused"
            or state["outcome"] == "unsure" and not isinstance(why.__cause__, FencedError)):
        out.append(f"LOAD-12: l9's commit manifest landed ({who} overtook it during a {stall_s:.2f} s stall) but "
                   f"the commit reported {state['outcome']}: {type(why).__name__}: {why}")
    # LOAD-6: with the checkpoint still active, GC and the clean-up kept what its manifest names.
    if pinned:
        await gc_pass()
        try:
            again = await _read(pinned["cid"], pinned["store"], pinned["rt"])
        except SlateDBError as e:
            return out + [f"LOAD-6: after l9's clean-up ({cleanup_by}, {who}) the reader's checkpoint "
                          f"{pinned['cid']} cannot be read: {type(e).__name__}: {e}"]
        if again != pinned["rows"]:
            return out + [f"LOAD-6: the reader's checkpoint {pinned['cid']} reads {len(again)} rows after l9's "
                          f"clean-up, {len(pinned['rows'])} before"]
        await delete_checkpoint(ManifestStore(pinned["store"], pinned["rt"]), pinned["rt"], pinned["cid"])
        await gc_pass()
    # DUR-1: every acknowledged write, and the load's rows if its commit landed.
    try:
        return out + await _final_read(settings, store_final, rt_final, acked, state if landed else None)
    except SlateDBError as e:  # an SST a manifest names is gone (a commit deleted what its landed update named)
        return out + [f"DUR-1: after l9's commit ({state['outcome']}, {who}) the database cannot be read: "
                      f"{type(e).__name__}: {e}"]


async def _final_read(settings: dict, store: Any, rt: SimRuntime, acked: dict, landed: dict | None) -> list[str]:
    out: list[str] = []
    async with aio.Db.open("memory://sim", settings, store=store, runtime=rt) as db:
        for key, value in sorted(acked.items()):
            got = await db.get(key)
            if got != value:
                out.append(f"DUR-1: after the load, the compaction and GC, {key!r} reads {got!r}, acknowledged "
                           f"{value!r}")
        for key, value in sorted((landed or {}).get("rows", {}).items()):
            got = await db.get(key)
            if got != value:
                out.append(f"LOAD-1: l9's commit landed ({landed['outcome']}) but {key!r} reads {got!r}")
    return out


async def _read(cid: Any, store: Any, rt: SimRuntime) -> dict:
    async with DbReader.open("memory://sim", cid, settings={"block_cache_size_bytes": 0}, store=store,
                             runtime=rt) as r:
        return {k: v async for k, v in r.scan()}
