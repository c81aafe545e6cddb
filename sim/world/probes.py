"""Counting coverage probes (:mod:`slatedb.runtime.probes`) in simulated runs, and the probe table
every campaign prints.

:meth:`sim.world.runtime.SimRuntime.probe` calls :func:`hit`, which counts into the counter of the
innermost :func:`counting` block (a context variable, like :func:`sim.world.trace.capture`: trio copies
the caller's context into the run, so every simulated process of a run counts into it; nothing
in a run reads it, and the trace and its digest do not change). :func:`sim.campaign.sweep.run_seed` counts
each seed and puts the hits into its result row (``row["probes"]``); :func:`format_table` sums the
rows of a campaign.

:data:`REACHED_BY` says, for every probe, which scenario reaches it and a few of its seeds that
do (measured with ``sim sweep --workload W --seeds 0..N --jobs 1 --out rows.jsonl``: each row's
``probes``; ``tests/test_sim_probes.py`` runs exactly those seeds and fails when one no longer hits
its probe: re-measure when a scenario's traces change, and pick the lowest seeds that hit it). Runs are deterministic, so a seed that hits a probe here hits it in every campaign
that runs that seed of that scenario; every seed listed is below its scenario's :data:`DEFAULT_SEEDS_FLOOR`, the
number of seeds of it the default ``./just dst`` runs at least.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from typing import Iterable, Iterator

from slatedb.runtime import probes as P

_HITS: contextvars.ContextVar[Counter | None] = contextvars.ContextVar("sim_probe_hits", default=None)


def hit(name: str) -> None:
    """Count one hit of probe ``name`` (a constant of :mod:`slatedb.runtime.probes`)."""
    if name not in P.PROBES:
        raise AssertionError(f"probe {name!r} is not declared in slatedb/runtime/probes.py")
    hits = _HITS.get()
    if hits is not None:
        hits[name] += 1


@contextlib.contextmanager
def counting() -> Iterator[Counter]:
    """Count the probe hits of everything run inside the block."""
    hits: Counter = Counter()
    token = _HITS.set(hits)
    try:
        yield hits
    finally:
        _HITS.reset(token)


#: Scenario -> seeds (0, 1, ...) the default ``./just dst`` runs of it at least: its plan runs
#: 500 seeds of every scenario (sim/campaign/dst.py ``plan``, a fixed seed count).
DEFAULT_SEEDS_FLOOR: dict[str, int] = {name: 500 for name in (
    "db", "takeover", "seqmeta", "store", "store-bounded", "compactor", "compactor-workers", "gc", "destroy",
    "rescale", "txn", "load")}

#: probe -> (scenario, seeds of it that hit the probe), each seed below its scenario's floor.
REACHED_BY: dict[str, tuple[str, tuple[int, ...]]] = {
    P.WAL_FENCE_SLOT_TAKEN: ("db", (5,)),
    P.WAL_WRITE_SLOT_OLDER_FENCE: ("takeover", (1,)),
    P.WAL_WRITE_FENCED: ("db", (0,)),
    P.WAL_REPLAY_FENCE: ("db", (0,)),
    P.DURABLE_WAIT_JOINS_NEXT_GROUP: ("db", (2,)),
    P.CREATE_AMBIGUOUS_LANDED_MANIFEST: ("seqmeta", (2,)),
    P.CREATE_AMBIGUOUS_LOST_MANIFEST: ("seqmeta", (0,)),
    P.CREATE_AMBIGUOUS_LANDED_COMPACTIONS: ("takeover", (0,)),
    P.CREATE_AMBIGUOUS_LOST_COMPACTIONS: ("compactor", (3,)),
    P.CREATE_AMBIGUOUS_LANDED_WAL: ("db", (1,)),
    P.CREATE_AMBIGUOUS_LOST_WAL: ("takeover", (2,)),
    P.BOUNDARY_PUT_AMBIGUOUS: ("seqmeta", (0,)),
    P.BOUNDARY_PUT_RACED: ("rescale", (2,)),
    P.SEQMETA_BEHIND_BOUNDARY: ("seqmeta", (1,)),
    P.MANIFEST_LANDED_REPORTED_FAILED: ("gc", (19,)),
    P.MANIFEST_CONFLICT: ("db", (0,)),
    P.MANIFEST_EDIT_GUARD_FENCED: ("db", (2,)),
    P.WRITER_FENCED_AT_L0_COMMIT: ("db", (2,)),
    P.WRITER_HALTED_BY_POLL: ("db", (1,)),
    P.COMPACTOR_RESUMED: ("compactor", (0,)),
    P.COMPACTOR_FENCED: ("compactor", (0,)),
    P.COMPACTOR_INVALID: ("compactor", (0,)),
    P.COMPACTOR_RECOMMIT_COMPLETED: ("compactor", (0,)),
    P.COMPACTOR_RECOMMIT_EMPTY: ("compactor", (13,)),
    P.COMPACTOR_EXTERNAL_ADOPTED: ("compactor", (0,)),
    P.COMPACTOR_RECLAIMED: ("compactor", (4,)),
    P.COMPACTOR_RESULT_DROPPED: ("compactor", (78,)),
    P.COMPACTOR_RESUMED_RANGES: ("compactor", (0,)),
    # TTL seeds (their own ``ttl`` stream): compactor processes 8-10 h ahead of the writer, rows
    # with a 7-hour TTL; compactor-workers reaches it in its TTL seeds too (COMPACT-12).
    P.COMPACTOR_TTL_KEPT_BY_DB_CLOCK: ("compactor", (0,)),
    P.COMPACTOR_CLAIM_LOST: ("compactor-workers", (2,)),
    P.COMPACTOR_JOB_LOST: ("compactor-workers", (1,)),
    # Seeds that cut outputs after any row and hold a snapshot to the writer's close (their own
    # ``cuts`` stream): the final contents check reads every key, some starting an SST.
    P.READ_RUN_STRADDLE: ("compactor", (0, 3)),
    P.COMPACTOR_RESUMED_MID_KEY: ("compactor", (21,)),
    P.GC_SST_KEPT_IN_FLIGHT: ("gc", (2,)),
    P.GC_SST_KEPT_ULID_CUTOFF: ("gc", (1,)),
    P.GC_MANIFEST_KEPT_CHECKPOINT: ("gc", (1,)),
    P.GC_WAL_KEPT_CHECKPOINT: ("gc", (1,)),
    P.GC_CHECKPOINT_EXPIRED: ("gc", (1,)),
    P.GC_CLONE_DETACHED: ("gc", (10,)),
    P.GC_DETACH_KEPT_CHECKPOINT: ("gc", (0,)),
    P.GC_CREATE_OUTLIVED_DESTROY: ("destroy", (77,)),
    # The destroy world's "create held" mode: GC's manifest commit held past the clone's hard
    # destroy, its boundary file deleted by it (tests/gc/test_destroy_race.py plays it too).
    P.MANIFEST_CREATE_OUTLIVED_DESTROY: ("destroy", (62,)),
    P.DESTROY_FOREIGN_KEPT: ("destroy", (0,)),
    P.CHECKPOINT_REFRESH_EXPIRED: ("gc", (44, 61)),
    P.READER_CHECKPOINT_EXPIRED: ("gc", (5,)),
    P.READER_CHECKPOINT_GONE: ("gc", (19,)),
    P.UNION_RESUMED: ("rescale", (2,)),
    P.CLONE_REPEATED_DATABASE: ("rescale", (3,)),
    P.TXN_VIEW_MOVED: ("txn", (0,)),
    P.TXN_CONFLICT_AFTER_VIEW_MOVED: ("txn", (2, 4)),
    P.TXN_PHANTOM_IN_SST: ("txn", (0, 24)),
    P.RETRY_EXHAUSTED_ATTEMPTS: ("store-bounded", (0,)),
    P.RETRY_EXHAUSTED_DEADLINE: ("store-bounded", (4,)),
    P.LOAD_STAGE_ENDED: ("load", (1,)),
    P.LOAD_ENDED_SHARD_KEPT: ("load", (1,)),
    P.LOAD_COMMIT_UNSURE_KEPT: ("load", (37,)),
    P.DESTROY_KEPT_SHARD_REMOVED: ("load", (33,)),
    P.LOAD_CLEANUP_KEPT_PINNED: ("load", (21,)),
    P.LOAD_COMMIT_LANDED_FOUND: ("load", (2,)),
    P.LOAD_UNION_LIVE_REFUSED: ("load", (1,)),
}


#: probe -> the unit test (``path::function``) that takes its branch and asserts it did, for the
#: branches the simulator reaches too rarely or not at all: defences beyond the contract its
#: worlds keep (spec/protocols/destroy.md, DESTROY-A1/A2: no process stalls past a soft destroy's
#: grace, nothing but GC runs during a hard destroy). The destroy world broke both promises before
#: 2026-11-27 and reached these branches then; ``run_destroy_workload(seed, contract=False)``
#: replays that world (seeds 62 and 580 in tests/test_sim_destroy.py).
UNIT_REACHED: dict[str, str] = {
    P.DESTROY_LATE_OBJECTS: "tests/clone/test_destroy.py::test_hard_destroy_deletes_objects_that_land_after_its_listing",
    P.WRITER_OPEN_OUTLIVED_DESTROY:
        "tests/db/test_open_after_destroy.py::test_an_open_whose_bump_landed_after_the_database_was_removed_takes_it_back",
    # A union finished between a second sharded begin's read and its marker check: a window of a
    # few store calls that no seed of load 0..999 hit.
    P.LOAD_UNION_FINISHED_REFUSED:
        "tests/spark/test_sharded.py::test_a_union_finished_between_the_begins_read_and_its_marker_check_is_not_destroyed",
    # A point read stalled past a compaction's 15-minute pin: db seed 11583 (one GET stalled
    # 838 s), far beyond the default plan's db seeds.
    # An ambiguous create's object deleted before its read-back: destroy seed 30333.
    P.CREATE_GONE_TAKEN: "tests/manifest/test_gone_is_taken.py::test_an_ambiguous_create_whose_object_is_gone_counts_as_taken",
    P.READ_VIEW_COLLECTED:
        "tests/db/test_read_view_collected.py::test_a_point_read_whose_compacted_sst_was_collected_reads_the_current_state",
}


def reached_by_seeds() -> dict[str, list[int]]:
    """Scenario -> the seeds :data:`REACHED_BY` lists for it (the test's runs)."""
    out: dict[str, set[int]] = {}
    for scenario, seeds in REACHED_BY.values():
        out.setdefault(scenario, set()).update(seeds)
    return {k: sorted(v) for k, v in sorted(out.items())}


def merge(rows: Iterable[dict]) -> dict[str, dict]:
    """Probe -> {"hits": total, "seeds": seeds hitting it, "scenarios": {scenario: seeds}}."""
    out: dict[str, dict] = {name: {"hits": 0, "seeds": 0, "scenarios": Counter()} for name in P.PROBES}
    for row in rows:
        for name, n in (row.get("probes") or {}).items():
            entry = out.setdefault(name, {"hits": 0, "seeds": 0, "scenarios": Counter()})
            entry["hits"] += n
            entry["seeds"] += 1
            entry["scenarios"][row.get("workload", "?")] += 1
    return out


def unhit(rows: Iterable[dict]) -> list[str]:
    return [name for name, e in merge(rows).items() if not e["hits"]]


def format_table(rows: Iterable[dict]) -> str:
    """One line per declared probe: hits, seeds that hit it, and per scenario how many of its
    seeds did; the probes no seed hit are listed last."""
    rows = list(rows)
    merged = merge(rows)
    width = max(len(n) for n in merged)
    lines = [f"{'probe':<{width}}  {'hits':>7}  {'seeds':>5}  scenarios (seeds hitting it)",
             f"{'-' * width}  {'-' * 7}  {'-' * 5}  {'-' * 28}"]
    for name, e in merged.items():
        where = ", ".join(f"{s} {n}" for s, n in sorted(e["scenarios"].items())) or "-"
        lines.append(f"{name:<{width}}  {e['hits']:>7}  {e['seeds']:>5}  {where}")
    missing = [n for n, e in merged.items() if not e["hits"] and n not in UNIT_REACHED]
    unit = [n for n, e in merged.items() if not e["hits"] and n in UNIT_REACHED]
    lines.append(f"probes hit: {len(merged) - len(missing) - len(unit)}/{len(merged)} in {len(rows)} runs"
                 + (f"; not hit, held by unit tests (UNIT_REACHED): {', '.join(unit)}" if unit else "")
                 + (f"; NOT HIT: {', '.join(missing)}" if missing else ""))
    return "\n".join(lines)
