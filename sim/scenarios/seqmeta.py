"""RFC 004's sequence on the real :class:`~slatedb.manifest.store.ManifestStore`: stalled metadata
writers against a GC that advances ``gc/manifest.boundary`` and deletes old manifests.

Three metadata writers each commit a series of updates through ``ManifestStore.commit`` (the code
every writer, compactor and admin uses), as the edit :class:`Increment`: it adds one to a counter
held in the manifest (``last_l0_seq``) and, having no already-applied detection, is the
non-idempotent change RFC 004's false negative applies twice. Between reading manifest ``N`` and creating ``N+1`` a writer may pause (a
process stall: GC pause, descheduled VM), and any request may stall on the wire, so a create can
land long after it was prepared. A GC stand-in (the real one comes with ``slatedb/gc/``) does what
``spec/protocols/sequenced-metadata.md`` prescribes: every interval it lists ``manifest/``, takes
the highest id ``D`` among files older than ``min_age`` except the latest, moves the boundary up
to ``D`` with a conditional put, then deletes those files. That is exactly the sequence of
RFC 004 § "Motivation": writer A prepares ``N+1`` and stalls; others commit ``N+1``, ``N+2``;
GC advances the boundary and deletes ``N+1``; A's create lands on the empty slot and succeeds.
Only the post-create boundary read (BOUNDARY-3) tells A that it did not commit.

Checked on every run (outcomes, not the boundary read itself, so that the catalogued bug
``no-boundary-check`` is caught by what it costs):

* SEQMETA-1 on the trace: each manifest id is reported committed at most once;
* SEQMETA-2 on the trace: the create behind a reported commit was fresh (no id at or above it had
  been created before it);
* no lost commit, end to end: the counter in the final manifest is at least the number of commits
  reported (a stale commit's increment is lost), and at most that plus the creates rejected by
  the boundary check.

That upper bound is not slack: RFC 004's check has false negatives. A create that landed in time
(fresh, at the head) but whose reply or post-create boundary read took longer than ``min_age``
finds the boundary past its id -- others built on it meanwhile and GC moved on -- and reports
"not committed"; ``ManifestStore.commit`` then applies the edit again. With stalls far above
``min_age`` this happens in about a third of the seeds (seed 6: manifest 5 created at 2.4 s,
its boundary read answered at 49.8 s with boundary 17). Harmless for this counter's bound; the library's
edits that are not idempotent (adding an L0 SST, a checkpoint, a compaction) look for their own
change first (``Edit.landed``, slatedb/manifest/edit.py).
"""

from __future__ import annotations

import uuid
from typing import ClassVar

import attrs
import trio

from slatedb.format.manifest import decode_manifest_v2, encode_manifest
from slatedb.format.types import ManifestV2
from slatedb.manifest.checkpoints import writer_checkpoint
from slatedb.manifest.edit import Attempt, Change, Edit
from slatedb.manifest.store import (
    MANIFEST_BOUNDARY_KEY,
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    ManifestStore,
    StoredManifest,
    manifest_key,
    parse_id,
)
from slatedb.objstore import CREATE_IF_ABSENT
from slatedb.objstore.memory import MemoryStore
from slatedb.objstore.retry import retry_transient

from sim.checks.seqmeta import SeqmetaChecks
from sim.checks.structure import check_world
from sim.world.choices import Choices, boolean
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime
from sim.world.store import SimObjectStore, StoreFaults

N_WRITERS = 3
UPDATES_PER_WRITER = 25


@attrs.frozen
class Increment(Edit[None]):
    """The scenario's edit: the counter (``last_l0_seq``) plus one, and a writer checkpoint
    ``checkpoint_id`` pinning the manifest written (unique bytes per writer)."""

    kind: ClassVar[str] = "increment"
    checkpoint_id: uuid.UUID

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        cp = writer_checkpoint(self.checkpoint_id, attempt.base_id + 1, 0, attempt.now_ms)
        return Change(attrs.evolve(m, last_l0_seq=m.last_l0_seq + 1, checkpoints=(cp,)), None)


def _faults(rng) -> tuple[StoreFaults, dict]:
    on = lambda p: boolean(rng, p)  # noqa: E731
    faults = StoreFaults(
        latency_min_s=0.0005,
        latency_max_s=rng.choice([0.002, 0.02, 0.2]),
        transient_rate=rng.uniform(0.01, 0.1) if on(0.5) else 0.0,
        ambiguous_rate=rng.uniform(0.01, 0.1) if on(0.5) else 0.0,
        stall_rate=rng.uniform(0.005, 0.05) if on(0.7) else 0.0,
        stall_max_s=rng.choice([2.0, 10.0, 60.0]),
    )
    knobs = {
        "min_age_s": rng.choice([0.1, 0.5, 2.0]),
        "gc_interval_s": rng.choice([0.05, 0.3, 1.0]),
        "pause_rate": rng.choice([0.0, 0.1, 0.3]),
        "pause_max_s": rng.choice([2.0, 10.0, 30.0]),
    }
    return faults, knobs


def _boundary_faults(rng, faults: StoreFaults) -> StoreFaults:
    """Every seed puts transient errors and lost replies on ``gc/*.boundary`` reads and writes
    (the writers' post-create reads, GC's read-then-conditional-put), on top of the seed's
    stalls: RFC 004's boundary protocol must hold when its own requests fail either way."""
    transient = rng.uniform(0.05, 0.3)
    return attrs.evolve(faults, transient_rate=transient, ambiguous_rate=rng.uniform(0.05, min(0.3, 1 - transient)))


@attrs.define
class World:
    """The knobs of one world, the store read directly, and the commits its writers reported."""

    setup: Setup
    faults: StoreFaults
    knobs: dict
    key_faults: tuple
    direct: MemoryStore
    n_writers: int
    n_updates: int
    commits: list = attrs.Factory(list)  # (process, id, counter value it committed)
    writers_left: list = attrs.Factory(list)


def _build(setup: Setup) -> World:
    choices, trace = setup.choices, setup.trace
    rng = choices.stream("seqmeta")
    faults, knobs = _faults(rng)
    boundary_faults = _boundary_faults(rng, faults)
    key_faults = (("gc/", boundary_faults),)
    trace.record("world", "config", faults=repr(faults), boundary_faults=repr(boundary_faults), **knobs)
    world_rt = SimRuntime("world", choices, trace)
    direct = MemoryStore(setup.bucket, world_rt.now_ms)
    direct.put_now(manifest_key(1), encode_manifest(ManifestV2(initialized=True)), CREATE_IF_ABSENT)
    shape = choices.stream("shape")  # the seed's world is the full one; a shrunk one may be smaller
    n_writers, n_updates = shape.count(1, N_WRITERS), shape.count(1, UPDATES_PER_WRITER)
    return World(setup, faults, knobs, key_faults, direct, n_writers, n_updates, writers_left=[n_writers])


async def _processes(w: World, nursery: trio.Nursery | None) -> None:
    """The metadata writers (stalling between preparing and creating a manifest) and a GC
    advancing the boundary and deleting old manifests."""
    assert nursery is not None
    setup = w.setup
    choices, trace, bugs, bucket = setup.choices, setup.trace, setup.bugs, setup.bucket
    faults, knobs, key_faults, direct, commits, writers_left = w.faults, w.knobs, w.key_faults, w.direct, w.commits, \
        w.writers_left
    n_updates = w.n_updates

    async def writer(name: str) -> None:
        rt = SimRuntime(name, choices, trace, bugs=bugs)
        store = SimObjectStore(MemoryStore(bucket, rt.now_ms), choices.stream("store", name), trace,
                               process=name, faults=faults, key_faults=key_faults)
        manifests = ManifestStore(store, rt)

        async def stall(cur: StoredManifest, _new: ManifestV2) -> None:
            if boolean(rt.rng, knobs["pause_rate"]):
                # The process stalls between preparing N+1 and creating it (RFC 004's writer A).
                pause_s = rt.rng.uniform(0.0, knobs["pause_max_s"])
                rt.event("pause", base=cur.id, seconds=round(pause_s, 6))
                await rt.sleep(pause_s)

        try:
            for _ in range(n_updates):
                # A fresh checkpoint UUID, as every real update carries: create_if_absent tells its
                # own create from another writer's by content (slatedb/objstore/retry.py).
                stored = (await manifests.commit(Increment(rt.new_uuid()), prepared=stall)).stored
                commits.append((name, stored.id, stored.manifest.last_l0_seq))
                await rt.sleep(rt.rng.uniform(0.0, 0.05))
        finally:
            writers_left[0] -= 1

    async def gc() -> None:
        rt = SimRuntime("gc", choices, trace, bugs=bugs)
        store = SimObjectStore(MemoryStore(bucket, rt.now_ms), choices.stream("store", "gc"), trace,
                               process="gc", faults=faults, key_faults=key_faults)
        gc_manifests = ManifestStore(store, rt)  # the engine's boundary code (RFC 004 "Advancing Boundaries")
        min_age_ms = int(knobs["min_age_s"] * 1000)
        boundary_seen = 0
        while writers_left[0] > 0:
            await rt.sleep(knobs["gc_interval_s"])
            metas = await retry_transient(rt, lambda: store.list(MANIFEST_DIR), what="list manifest/")
            files = sorted((i, m.last_modified_ms) for m in metas
                           if (i := parse_id(m.key, MANIFEST_DIR, MANIFEST_SUFFIX)) is not None)
            now = rt.now_ms()
            old = [i for i, modified in files[:-1] if now - modified >= min_age_ms]
            if not old:
                continue
            boundary = await gc_manifests.advance_boundary(max(old))
            # BOUNDARY-2 (of this stand-in): the boundary never moves backward.
            assert boundary >= boundary_seen, f"BOUNDARY-2: boundary went from {boundary_seen} to {boundary}"
            boundary_seen = boundary
            for i in old:
                if i <= boundary:
                    key = manifest_key(i)
                    # BOUNDARY-1 against the store itself: the durable boundary covers the id.
                    durable = int(bytes(direct.get_now(MANIFEST_BOUNDARY_KEY).data)) \
                        if direct.list_now(MANIFEST_BOUNDARY_KEY) else 0
                    if durable < i:
                        raise AssertionError(f"BOUNDARY-1: GC deletes {key} while the durable boundary is {durable} "
                                             f"(it believes {boundary})")
                    await retry_transient(rt, lambda: store.delete(key), what=f"delete {key}")
                    rt.event("delete", path=key, boundary=boundary)

    for i in range(w.n_writers):
        nursery.start_soon(writer, f"m{i}")
    nursery.start_soon(gc)


async def _final(w: World) -> None:
    """End to end: the counter of the latest manifest against the commits reported (SEQMETA-1)."""
    direct, checks = w.direct, w.setup.checkers.get("seqmeta")
    ids = sorted(i for m in direct.list_now(MANIFEST_DIR)
                 if (i := parse_id(m.key, MANIFEST_DIR, MANIFEST_SUFFIX)) is not None)
    latest = decode_manifest_v2(bytes(direct.get_now(manifest_key(ids[-1])).data), manifest_key(ids[-1]))
    final = latest.last_l0_seq
    n = len(w.commits)
    assert final >= n, f"SEQMETA-1: lost commit: {n} updates reported committed, the latest manifest counts {final}"
    rejected = checks.rejected if checks is not None else n
    assert final <= n + rejected, f"counter {final} above {n} commits + {rejected} rejected creates"
    # slatedb check on the manifests and boundary the run left (BOUNDARY-1/4, FENCE-4, DUR-2, GC-2).
    await check_world(w.setup.bucket, [""], SIM_EPOCH_MS + int(trio.current_time() * 1000))


def _fault_counts(setup: Setup, _world: World | None) -> dict:
    checks = setup.checkers.get("seqmeta")
    counts = checks.counts if checks is not None else {}
    return {k: counts[k] for k in ("fault.transient", "store.reply-lost", "fault.stall", "pause") if counts.get(k)}


def _figures(w: World) -> dict:
    checks = w.setup.checkers.get("seqmeta")
    n = len(w.commits)
    return {"acked": n, "fenced": checks.rejected if checks is not None else n}


SCENARIO = Scenario(
    "seqmeta", _build, _processes, nursery="join", final=_final, fault_counts=_fault_counts, figures=_figures,
    checkers=(Checker("seqmeta", lambda setup: SeqmetaChecks(),
                      when=lambda setup: setup.options.get("trace_checks", True)),),
    limit_what="metadata writers still running", processes_declared=("m0", "m1", "m2", "gc"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall", "pause"))


def run_seqmeta_workload(seed: int, *, bugs: frozenset[str] = frozenset(), trace_checks: bool = True,
                         choices: Choices | None = None) -> WorldResult:
    """Run one world. ``trace_checks=False`` leaves only the end-to-end oracle (no lost commit).
    Every random choice comes from ``choices`` (default: generated from ``seed``)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, trace_checks=trace_checks)
