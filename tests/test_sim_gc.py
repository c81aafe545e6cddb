"""Garbage collection under simulation (``sim/scenarios/gc.py``): a writer with its in-process
compactor and aggressive GC, standalone GC and compactor, managed and fixed-checkpoint DbReaders,
an admin holding checkpoints and a clone, with stalls of minutes, crashes and swarm store faults;
checked on the trace (GC-1..4, CKPT-1/2, READ-1/2, BOUNDARY-1/2, CLONE-1..4), by the reader
oracle (READ-3: every read is a prefix of the durable history; READ-4), and for liveness."""

from __future__ import annotations

import pytest

from sim.scenarios import catalogue as bugs
from sim.scenarios.gc import run_gc_workload

#: Seeds that pass with every switch off; between them: GC deletes from every directory,
#: readers re-establish, checkpoints are read, clones from a checkpoint and from the latest
#: state, crashes and freezes.
CLEAN_SEEDS = (0, 2, 10)

#: Catalogued GC / reader / clone bugs and the first seed that detects each (``sim hunt --bug
#: NAME --rate``; rates and budgets in docs/simulation.md). Running seeds 0..budget-1 in order
#: would cost up to a minute per entry; ``sim hunt`` does that, the test replays the detection
#:; the clean seeds pass with every switch off.
FIRST_DETECTION = {
    "gc-ignores-checkpoints": 0,
    "gc-no-min-age": 2,
    "gc-ignores-inflight-compaction": 5,
    "gc-delete-before-boundary": 0,
    "expired-checkpoint-fatal": 5,
    "clone-copies-all-wal": 2,
    "reader-ignores-new-ssts": 1,
    "snapshot-uncapped": 1,
    "gc-detach-latest-only": 0,
}


#: Entries that the end-to-end read oracle catches on its own, with the trace check naming them
#: left out: (seed, what the read oracle reports). ``gc-detach-latest-only``: in seed 8 (short
#: compactor pins, a clone history) the parent is compacted fully and collected under the reader
#: of the older clone checkpoint (``sim/scenarios/gc_clone.py`` step 4); after the wrong detach
#: its next read misses a parent SST (seed 7 before the traces moved on 2026-11-27, session 16;
#: the trace check alone catches it at seed 0, before any read could fail).
READ_ORACLE_DETECTION = {"gc-detach-latest-only": (8, "CLONE-4")}


def test_every_gc_entry_has_a_detection() -> None:
    assert set(FIRST_DETECTION) == {b.name for b in bugs.CATALOGUE if b.workload == "gc"}
    assert all(seed < bugs.BY_NAME[name].budget for name, seed in FIRST_DETECTION.items())


def test_clean_worlds_pass_and_exercise_gc() -> None:
    results = [run_gc_workload(seed) for seed in CLEAN_SEEDS]
    failed = [(r.seed, r.violations) for r in results if not r.ok]
    assert not failed, failed
    assert sum(r.gc_deletes for r in results) >= 500
    assert sum(r.reader_scans for r in results) >= 50
    assert sum(r.checkpoint_scans for r in results) >= 4
    assert sum(r.reestablished for r in results) >= 20
    assert {r.clone for r in results} >= {"from-checkpoint", "from-latest"}
    assert sum(r.faults.get("crash", 0) + r.faults.get("pause", 0) for r in results) >= 5
    assert all(r.double_apply == 0 for r in results)


def test_same_seed_same_trace() -> None:
    a, b = run_gc_workload(11), run_gc_workload(11)
    assert a.ok and (a.digest, a.events) == (b.digest, b.events)


@pytest.mark.parametrize("switch", sorted(FIRST_DETECTION))
def test_each_gc_bug_is_caught(switch: str) -> None:
    """The entry's switch, at its first detecting seed, fires one of its invariants. (Seed 0,
    clean, also holds the regression of a reader bug this scenario found: a managed reader
    re-establishing on a manifest whose replay point was above every WAL id its tables held
    published the replayed rows over its *old* SST view; a scan in between saw WAL 33 without
    WAL 24..32, READ-3.)"""
    result = run_gc_workload(FIRST_DETECTION[switch], bugs=frozenset({switch}))
    assert not result.ok, f"{switch} not detected at seed {FIRST_DETECTION[switch]}"
    assert bugs.fired(result) in bugs.BY_NAME[switch].invariants, result.violations


@pytest.mark.parametrize("switch", sorted(READ_ORACLE_DETECTION))
def test_the_read_oracle_alone_catches_the_bug(switch: str) -> None:
    seed, invariant = READ_ORACLE_DETECTION[switch]
    result = run_gc_workload(seed, bugs=frozenset({switch}), skip_checks=frozenset(bugs.BY_NAME[switch].invariants))
    assert not result.ok, f"{switch} not seen by the read oracle at seed {seed}"
    assert bugs.fired(result) == invariant and "a read through clone checkpoint" in str(result.violations[0]), \
        result.violations


def test_the_latest_manifest_check_alone_catches_a_gc_without_min_age() -> None:
    """GC-4 at every manifest landing (``GcChecks._manifest_landed``): with GC-3 and GC-1, which
    fire first, left out, a GC deleting SSTs without min_age is seen when the next manifest lands
    naming an SST already gone (seed 2)."""
    result = run_gc_workload(2, bugs=frozenset({"gc-no-min-age"}), skip_checks=frozenset({"GC-3", "GC-1"}))
    assert not result.ok and bugs.fired(result) == "GC-4", result.violations
    assert "(the latest) references parent/compacted/" in str(result.violations[0]), result.violations


def test_a_refresh_landing_after_its_checkpoint_expired_does_not_revive_it() -> None:
    """gc seed 1246 (checkpoints-gc.md step 3): the admin's refresh, sent 5 s before the
    checkpoint's expiry, stalled and landed 2 s after it, while the writer's GC, having read the
    checkpoint expired, deleted manifest 13 it pinned: GC-2. The refresh is now refused."""
    r = run_gc_workload(1246)
    assert r.ok, r.violations


def test_a_pass_judges_expiry_when_its_manifest_was_read() -> None:
    """gc seed 3741 (checkpoints-gc.md step 6): the writer's GC went on from its own
    ExpireCheckpoints commit, whose reply stalled 16 s, and judged the reader's checkpoint by the
    clock 16 s later: expired, though the reader had refreshed it in time; manifest 6 went (GC-2).
    Expiry is now judged at the read. Since the traces moved on 2026-11-27 (sixteenth session) the
    seed no longer stalls that reply, so it passes with the old judgement too; the switch
    ``gc-judges-expiry-now`` is held by its unit test (``sim.scenarios.catalogue.UNIT_CAUGHT``,
    tests/gc/test_stale_snapshot.py), run by tests/test_sim_bugs.py."""
    r = run_gc_workload(3741)
    assert r.ok, r.violations


def test_a_writer_checkpoint_is_judged_unexpired_from_the_call_that_made_it() -> None:
    """gc seed 679 (campaign gc 500..899 on 6c3e50d): the writer's ``create_checkpoint`` committed
    its checkpoint at 66.6 virtual s, then the commit's boundary read stalled 17 s and more: the
    call returned at 102.7 s, after the checkpoint had expired (its lifetime runs from the commit).
    The scenario took ``return + lifetime`` for its expiry, had the admin read through it and
    reported CKPT-1; it now counts from the call's start (the checkpoint's lifetime starts later),
    as the admin's own checkpoints always did."""
    r = run_gc_workload(679)
    assert r.ok, r.violations
