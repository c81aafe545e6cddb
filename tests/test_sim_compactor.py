"""The compaction protocol under simulation (``sim/scenarios/compactor.py``): a writer with its
in-process compactor, standalone compactors fencing each other, crashing and resuming, and an
admin submitting external compactions, on a faulty store; checked on the trace (CFENCE-1/2/3,
COMPACT-1/2/3), on the output SSTs (RESUME-1/2), for liveness and against a contents model."""

from __future__ import annotations

import pytest

from sim.scenarios.compactor import run_compactor_workload

#: Seeds that pass with every switch off; between them they resume compactions, commit external
#: ones, fail invalid ones and crash processes at every kind of crash point.
CLEAN_SEEDS = (0, 1, 2, 3, 4, 7)

#: Catalogued compactor bugs (``sim/scenarios/catalogue.py``): the invariant that must fire and the number of
#: seeds (0..budget-1) within which it must (measured seeds-to-detection, with a margin).
SWITCHES = {
    "resume-reemit": ("RESUME-2", 8),
    "resume-skip-entry": ("RESUME-1", 25),
    "compactor-no-second-bump": ("CFENCE-2", 32),
    "compactor-no-commit-fence": ("CFENCE-1", 100),  # rare: 5 of 200 seeds, first seed 81 (session 16)
    # Since the coordinator/worker protocol the double commit is usually stopped earlier, by the
    # manifest edit's own assertion (two runs with one id: an escaped exception), or by COMPACT-3.
    "compaction-no-revalidate": (("COMPACT-3", "ESCAPE-1"), 32),
    # The order before COMPACT-10: a job whose commit landed before a restart recorded Failed.
    "compaction-recommit-fails": ("COMPACT-10", 40),
    # The same for a job with no output: reached by the purge seeds (a quarter) only.
    "empty-recommit-fails": ("COMPACT-10", 40),
    # Reached by the seeds that cut outputs after any row and hold a snapshot (READ-7's straddle).
    "straddle-later-sst-only": ("READ-7", 16),
    # Reached by the TTL seeds, whose compactors' clocks run hours ahead.
    "expiry-own-clock": ("COMPACT-12", 16),
}


def test_clean_worlds_pass_and_exercise_the_protocol() -> None:
    results = [run_compactor_workload(seed) for seed in CLEAN_SEEDS]
    failed = [(r.seed, r.violations) for r in results if not r.ok]
    assert not failed, failed
    assert sum(r.commits for r in results) >= 50
    assert sum(r.verified for r in results) >= 40  # RESUME-1/2 checked on real outputs
    assert sum(r.resumes for r in results) >= 3  # compactions resumed after a crash or takeover
    assert sum(r.compactors for r in results) >= 15  # compactors fencing each other
    assert sum(r.external_failed for r in results) >= 1  # an invalid external compaction ended Failed
    assert sum(r.faults.get("crash", 0) for r in results) >= 5
    assert sum(r.empty_commits for r in results) >= 1  # the purge seeds' jobs with no output SST
    assert all(r.drain_s < 600 for r in results)


def test_same_seed_same_trace() -> None:
    a, b = run_compactor_workload(3), run_compactor_workload(3)
    assert a.ok and (a.digest, a.events) == (b.digest, b.events)


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_each_compactor_bug_is_caught_within_its_budget(switch: str) -> None:
    invariant, budget = SWITCHES[switch]
    for seed in range(budget):
        result = run_compactor_workload(seed, bugs=frozenset({switch}))
        if not result.ok:
            wanted = invariant if isinstance(invariant, tuple) else (invariant,)
            assert any(i in v for i in wanted for v in result.violations), (switch, seed, result.violations)
            return
    pytest.fail(f"{switch} not detected in seeds 0..{budget - 1}")


def test_a_resumed_compaction_whose_output_is_committed_is_not_committed_again() -> None:
    """Found by the compactor workload (seed 89 at the time): an external ``[SR:0] -> 0`` is
    committed, the compactor crashes before recording Completed; on restart the compaction is
    Running again and its one source, run 0, still exists -- it is the compaction's own output.
    Validation by id passed, the resume read its own output as input and committed a second
    time (COMPACT-3; had run 0 changed meanwhile, the rows merged into it would have been lost).
    A compaction whose outputs are already in the manifest must fail instead."""
    import attrs
    import trio

    from slatedb.compactor import submit_compaction
    from slatedb.compactor.store import compactions_key
    from slatedb.format.compactions import encode_compactions
    from slatedb.format.types import CompactionStatus as S

    from .compactor.helpers import RecordingRuntime, filled_store, latest_compactions, latest_manifest, read_all
    from .compactor.test_compactor import compact

    store, expected = filled_store(n_keys=200, rounds=2)
    compact(store)  # everything into one sorted run
    _, m = latest_manifest(store)
    assert not m.l0 and len(m.compacted) == 1
    spec = full_spec_of(m)
    trio.run(submit_compaction, store, RecordingRuntime("admin"), spec)
    compact(store)
    _, m1 = latest_manifest(store)
    cid, cs = latest_compactions(store)
    (done,) = [c for c in cs.recent_compactions if c.status is S.COMPLETED]
    # The state a crash between the manifest and the .compactions write leaves behind.
    store.put_now(compactions_key(cid + 1), encode_compactions(
        attrs.evolve(cs, recent_compactions=(attrs.evolve(done, status=S.RUNNING),))))
    rt = RecordingRuntime("restarted")
    compact(store, rt=rt)
    assert not [f for _, kind, f in rt.events if kind == "compaction_commit" and f["id"] == str(done.id)]
    assert latest_manifest(store)[1].compacted == m1.compacted
    assert read_all(store) == expected


def full_spec_of(m):
    from slatedb.compactor import full_spec

    return full_spec(m)


def test_point_reads_that_consult_sorted_runs_oldest_first_are_reported_as_read_7(monkeypatch) -> None:
    """Issue 27 item 5, a kill without a name: a hand-written mutant whose point reads walk the
    sorted runs oldest first (an older run's version shadows the newer one) was caught only by
    the scenario's private assertion; it is now READ-7 by name (spec/protocols/reader.md)."""
    from sim.scenarios.catalogue import fired
    from slatedb.lsm import view

    def oldest_runs_first(self, key):
        for h in self.l0:
            if h.bounds.contains(key):
                yield h
        for run in reversed(self.runs):
            for h in run.holding(key):
                if h.bounds.contains(key):
                    yield h

    monkeypatch.setattr(view.LsmView, "point_candidates", oldest_runs_first)
    result = run_compactor_workload(0)
    assert not result.ok and fired(result) == "READ-7", result.violations


@pytest.mark.parametrize("ends", ["Failed", "Completed"])
def test_the_recommit_oracle_refuses_an_empty_job_failed_after_its_commit_landed(ends: str) -> None:
    """COMPACT-10's trace check for a job with no output: the landing that removes exactly its
    sources identifies its commit (there is no output to find in the runs); a later
    ``.compactions`` recording it Failed is refused, Completed is fine. The files are real
    encodings, landed through the checker's store events as the simulator reports them."""
    import attrs
    from ulid import ULID

    from slatedb.compactor.spec import CompactionSpec, L0Source
    from slatedb.format.compactions import encode_compactions
    from slatedb.format.manifest import encode_manifest
    from slatedb.format.types import (
        Compaction,
        CompactedSsTableV2,
        CompactedSsTableView,
        CompactionsV1,
        ManifestV2,
        SsTableInfo,
    )
    from slatedb.format.types import CompactionStatus as S
    from slatedb.manifest.compaction import apply_compaction
    from slatedb.objstore.memory import MemoryBucket, MemoryStore
    from sim.checks.compactor import CompactorChecks
    from sim.world.invariants import InvariantViolation
    from sim.world.trace import Event

    def ulid(ms: int) -> ULID:
        return ULID.from_int(ms << 80)

    ssts = tuple(CompactedSsTableV2(ulid(1_000 + n), SsTableInfo(first_entry=b"k%d" % n)) for n in (3, 2, 1))
    base = ManifestV2(initialized=True, writer_epoch=1, compactor_epoch=1, ssts=ssts,
                      l0=tuple(CompactedSsTableView(s.id, s.id, None) for s in ssts), last_l0_seq=30)
    spec = CompactionSpec(tuple(L0Source(s.id) for s in ssts[1:]), 0)  # the two oldest: no output
    committed = apply_compaction(base, spec, ())
    job = Compaction(ulid(2_000), spec.to_format(), S.COMPACTED)
    store = MemoryStore(MemoryBucket(), lambda: 0, url="memory://t")
    checks = CompactorChecks(store)
    n = 0

    def lands(process: str, key: str, data: bytes) -> None:
        nonlocal n
        n += 1
        store.put_now(key, data)
        checks.on_event(Event(n, process, "store.put", (("key", key), ("n", n))))
        checks.on_event(Event(n, process, "store.result", (("n", n), ("outcome", "ok"))))

    checks.on_event(Event(0, "c1", "compactor_started", (("epoch", 1),)))
    lands("w", "manifest/00000000000000000001.manifest", encode_manifest(base))
    lands("c1", "compactions/00000000000000000001.compactions", encode_compactions(CompactionsV1(1, (job,))))
    lands("c1", "manifest/00000000000000000002.manifest", encode_manifest(committed))
    assert checks.committed == {job.id: 2}  # the empty commit, identified by the sources it removed
    checks.on_event(Event(n, "c2", "compactor_started", (("epoch", 2),)))
    lands("c2", "manifest/00000000000000000003.manifest", encode_manifest(attrs.evolve(committed, compactor_epoch=2)))
    after = CompactionsV1(2, (attrs.evolve(job, status=S.FAILED if ends == "Failed" else S.COMPLETED),))
    if ends == "Completed":
        lands("c2", "compactions/00000000000000000002.compactions", encode_compactions(after))
        return
    with pytest.raises(InvariantViolation, match="COMPACT-10.*no output.*recorded Failed"):
        lands("c2", "compactions/00000000000000000002.compactions", encode_compactions(after))



def test_the_expiry_oracle_names_values_purged_before_the_databases_clock_reached_them() -> None:
    """COMPACT-12's oracle (``compaction_oracle.purged_early``) fed a bad history: a row the
    single-process compaction keeps as a value, expiring after the database's clock, committed as
    a tombstone or left out; an expired one (or one without expiry) may go. The check then names
    it when the whole committed run is what a compaction judging at a later clock writes
    (``sim/checks/compactor.py``), not a row lost by a resume (RESUME-1's)."""
    from sim.checks.compaction_oracle import expiry_message, purged_early

    V, T = 0, 1  # RowKind.VALUE, RowKind.TOMBSTONE
    kept = [(b"a", 5, V, b"x", 2_000), (b"b", 4, V, b"y", None), (b"c", 3, V, b"z", 900)]
    assert purged_early(kept, kept, clock_ms=1_000) == []
    assert purged_early([kept[0], kept[1], (b"c", 3, T, b"", None)], kept, clock_ms=1_000) == []  # c expired
    for got in ([(b"a", 5, T, b"", None)] + kept[1:], kept[1:]):
        assert purged_early(got, kept, clock_ms=1_000) == [kept[0]]
    assert expiry_message("c1", 7, kept[0], 1_000).startswith("COMPACT-12: compaction c1 (manifest 7) purged b'a'@5")
