"""The compactor world (``sim/scenarios/compactor.py``): settings drawn per seed, the processes'
stores and clocks, the heal, and the crash plans of writers and compactors."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from slatedb.api.args import coerce_settings
from slatedb.objstore.memory import MemoryStore

from sim.checks.contents import Model
from sim.world.choices import boolean
from sim.world.engine import Crash
from sim.world.harness import Setup
from sim.world.runtime import SimRuntime
from sim.world.store import SimObjectStore, StoreFaults

N_KEYS = 64
#: The share of seeds whose writer opens with a purge (:func:`purge`):
#: its first L0 SSTs hold only rows it deleted, so the first compactions (bottom: no run yet)
#: drop every row and write no SST (empty jobs, COMPACT-10's recognition by sources gone).
PURGE_RATE = 0.25
STALL_MAX_S = 60.0
MIN_SOURCES = 2
#: The share of seeds with TTL rows (:func:`ttl_put`), drawn from the ``ttl`` stream.
TTL_RATE = 0.5
#: Their TTL: longer than any run (the harness's 6 virtual hours), so none ever expires by the
#: writer's clock, yet shorter than the compactors' clock skew in those seeds (:data:`AHEAD_S`).
TTL_S = 7 * 3600.0
AHEAD_S = (8 * 3600, 10 * 3600)
N_TTL_KEYS = 16


def _settings(rng) -> dict:
    """Per-seed settings (swarm): small SSTs, a compactor that compacts often."""
    return {
        "l0_sst_size_bytes": rng.choice([512, 1024, 2048]),
        "flush_interval": rng.choice(["20ms", "50ms", "100ms"]),
        "manifest_poll_interval": rng.choice(["100ms", "300ms"]),
        "min_filter_keys": 8,
        "l0_max_ssts": rng.choice([4, 8, 16]),
        "compactor_options": {
            "poll_interval": f"{rng.choice([100, 200, 500])}ms",
            "max_concurrent_compactions": rng.choice([1, 2, 4]),
            "scheduler_options": {"min_compaction_sources": str(MIN_SOURCES),
                                  "max_compaction_sources": str(rng.choice([2, 4, 8]))},
            "worker": {"max_sst_size": rng.choice([1024, 2048, 4096]),
                       # the official coordinator/worker protocol: ranges, heartbeats, reclaims
                       "max_subcompactions": rng.choice([1, 2, 4]),
                       "heartbeat_interval": rng.choice(["1s", "2s"]),
                       "compactions_poll_interval": rng.choice(["200ms", "1s"])},
            "commit_compacted_interval": rng.choice(["50ms", "200ms"]),
            "worker_heartbeat_timeout": rng.choice(["5s", "10s", "30s"]),
        },
    }


class World:
    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.seed = setup.seed
        self.choices = choices = setup.choices
        self.trace = setup.trace
        self.bugs = setup.bugs
        faults, bucket = setup.faults, setup.bucket
        self.rng = choices.stream("world")
        swarm = faults == "swarm"
        self.faults = StoreFaults.swarm(self.rng) if swarm else StoreFaults()
        # Stalls of up to a minute open every window a longer one would (poll intervals are
        # < 1 s); longer ones only stretch the idle polling of every process.
        self.faults = attrs.evolve(self.faults, stall_max_s=min(self.faults.stall_max_s, STALL_MAX_S))
        self.crash_rate = self.rng.choice([0.0, 0.5, 1.0]) if swarm else 0.0
        self.pause_rate = self.rng.choice([0.0, 0.5, 1.0]) if swarm else 0.0
        self.replacements = 0
        self.nursery: trio.Nursery | None = None
        self.settings_map = _settings(self.rng)
        # Its own stream (the other draws stay as they were): in half the seeds compactions cut an
        # output after any row, as the official compactor does, so a key's versions may span two
        # SSTs of a run (reader.md READ-7, probe read.run-straddle).
        cuts = choices.stream("cuts")
        self.cut_after_any_row = boolean(cuts, 0.5)
        self.settings_map["compactor_options"]["worker"]["cut_after_any_row"] = self.cut_after_any_row
        #: In half the seeds each writer holds a snapshot from its open to its close: compactions
        #: keep every version written since, so sorted runs hold keys with many versions (which
        #: an output cut after any row splits) and reads through the current state meet them.
        self.hold_snapshot = boolean(cuts, 0.5)
        #: TTL seeds (COMPACT-12): the writer also puts rows with a TTL, and every compactor and
        #: worker process runs a clock hours ahead of the writer's (below).
        ttl = choices.stream("ttl")
        self.ttl = boolean(ttl, TTL_RATE)
        self.ahead_ms = ttl.randint(*AHEAD_S) * 1000 if self.ttl else 0
        # Its own stream: drawing the mode leaves every other stream's draws as they were.
        self.purge_rng = choices.stream("purge")
        self.purge = boolean(self.purge_rng, PURGE_RATE)
        #: In half the purge seeds with crashes the first compactor process (the writer's
        #: in-process one, and the first standalone one) crashes right after its first commit to
        #: the manifest, most often the purge's empty job: RFC 002's crash window for a job with
        #: no output.
        self.purge_crash = self.purge and self.crash_rate > 0 and boolean(self.purge_rng, 0.5)
        self.purged = False  # the purge began (a writer crashed in it is not redone)
        self.settings = coerce_settings(self.settings_map)
        self.bucket = bucket
        self.stores: list[SimObjectStore] = []
        self.healed = False
        self.model = Model()
        self.outcomes: dict[str, str] = {}
        self.invalid_submitted: list[tuple[Any, str]] = []  # (compaction id, what is wrong)
        self.valid_submitted = 0
        self.drain_s = 0.0
        self.verified = 0

    #: Compactors run their local worker (``sim/scenarios/compactor_workers.py``: coordinators
    #: alone, with worker processes of their own).
    local_worker = True

    def start_final_workers(self, nursery: trio.Nursery) -> None:
        """At the heal, beside ``cfinal``: the workers that drain L0 (none: ``cfinal``'s own)."""

    def process(self, name: str) -> tuple[SimRuntime, SimObjectStore]:
        # Wall clocks agree with the world's virtual time (a restarted process does not start
        # at the epoch again), up to a skew of a second either way.
        skew_ms = self.choices.stream("skew", name).randint(-1000, 1000)
        if name[0] in "ck":  # compactors, coordinators, workers: hours ahead in TTL seeds
            skew_ms += self.ahead_ms
        rt = SimRuntime(name, self.choices, self.trace, bugs=self.bugs,
                        offset_ms=int(trio.current_time() * 1000) + skew_ms)
        inner = MemoryStore(self.bucket, rt.now_ms, url="memory://sim")
        store = SimObjectStore(inner, self.choices.stream("store", name), self.trace, process=name,
                               faults=self.faults)
        store.faults_enabled = not self.healed
        self.stores.append(store)
        return rt, store

    def heal(self) -> None:
        """Faults stop: no new injected fault, no more crashes (requests in flight finish)."""
        self.healed = True
        self.trace.record("world", "heal")
        for s in self.stores:
            s.faults_enabled = False

    def crash_plan(self, *, compactor: bool) -> "Crash | None":
        """When a process will crash (None: it will not). Compactors crash either at a random
        moment or right after one of their own events: an output SST stored (its progress not
        yet recorded), a ``.compactions`` write committed, a compaction committed to the
        manifest (not yet recorded Completed: RFC 002's crash window), startup completed."""
        if not boolean(self.rng, self.crash_rate):
            return None
        if compactor and boolean(self.rng, 0.6):
            if boolean(self.rng, 0.5):  # RFC 002's crash window: committed, not yet recorded
                return Crash(None, "compaction_commit", None, 1)
            kind, ns = self.rng.choice(CRASH_POINTS)
            return Crash(None, kind, ns, self.rng.randint(1, 3))
        return Crash(self.rng.uniform(0.05, 4.0))


def purge_crash(world: "World", plan: "Crash | None") -> "Crash | None":
    """``plan``, or in seeds with ``world.purge_crash`` a crash right after the process's first
    commit to the manifest (the purge's empty job, when it commits first)."""
    return Crash(None, "compaction_commit", None, 1) if world.purge_crash else plan


#: Events of a compactor process right after which it may crash (kind, ``ns`` field), besides
#: the first ``compaction_commit`` (chosen half of the time).
CRASH_POINTS = (("compaction_output", None), ("commit", "compactions"), ("compaction_commit", None),
                ("compactor_started", None))
#: Events of running compactors right after which a new compactor may start (a takeover).
TAKEOVER_POINTS = (("compaction_output", None), ("commit", "compactions"), ("compaction_commit", None),
                   ("compaction_state", None), ("pause", None), ("pause", None))


async def purge(world: "World", name: str, db: Any, rt: SimRuntime,
                own: dict[bytes, list[tuple[int, bytes | None]]]) -> None:
    """The writer's opening purge (seeds with ``world.purge``, drawn from the ``purge`` stream):
    2 to 4 parts, each putting a few keys of its own ``p...`` range and deleting every one of
    them right after, durable, then flushed to an L0 SST of its own. Every row of these SSTs is
    a deleted key's, and no sorted run exists yet, so a compaction of them alone is at the bottom
    and drops every row: a job with no output SST, whose commit only removes its sources
    (COMPACT-10's recognition by its sources gone when a crash or a takeover comes between its
    commit and Completed). The writer then waits (at most a drawn 2 to 15 virtual s) until
    fewer than ``min_compaction_sources`` L0 SSTs are left, so that the compactors take the purge
    SSTs alone. The deleted keys are in the model (acknowledged deletes): every later read of
    them, the writer's own, its snapshots' and the final contents check, must find them absent."""
    rng, model = world.purge_rng, world.model
    n = 0
    for _ in range(rng.randint(2, 4)):
        batch: list[tuple[bytes, int]] = []
        last = None
        for _ in range(rng.randint(2, 6)):
            key = b"p%03d" % n
            n += 1
            value = b"%s:purge:%d" % (name.encode(), n)
            for v in (value, None):
                h = await (db.put(key, v) if v is not None else db.delete(key))
                model.write(key, h.seq, v)
                own.setdefault(key, []).append((h.seq, v))
                batch.append((key, h.seq))
                last = h
        assert last is not None
        await last.wait_durable()
        for key, seq in batch:
            model.ack(key, seq)
        await db.flush(wal=False)  # this part's rows as one L0 SST
    checks = world.setup.checkers["compactor"]
    deadline = trio.current_time() + rng.uniform(2.0, 15.0)
    while trio.current_time() < deadline:
        latest = checks.manifests.get(checks.latest_manifest)
        if latest is not None and len(latest.l0) < MIN_SOURCES:
            break
        await rt.sleep(0.1)


async def ttl_put(world: "World", name: str, db: Any, rng, unacked: list[tuple[bytes, int]]) -> Any:
    """In TTL seeds, now and then a put with a TTL (:data:`TTL_S`) to a ``t...`` key; the handle,
    or None. The keys are in the model (the final contents and COMPACT-12's oracle read them),
    not among the writer's own (its reads check its other writes as they go)."""
    if rng is None or not boolean(rng, 0.3):
        return None
    key, value = b"t%02d" % rng.randrange(N_TTL_KEYS), b"%s:ttl:%d" % (name.encode(), rng.randrange(10**6))
    h = await db.put(key, value, ttl=TTL_S)
    world.model.write(key, h.seq, value)
    unacked.append((key, h.seq))
    return h
