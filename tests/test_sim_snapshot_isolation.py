"""READ-6, snapshot isolation (spec/protocols/reader.md): its oracle fed good and bad histories,
and its catalogue switch ``snapshot-uncapped`` caught by the gc scenario where the clean code
passes."""

from __future__ import annotations

from sim.scenarios import catalogue as bugs
from sim.checks.gc import snapshot_isolation
from sim.scenarios.gc import run_gc_workload

TAKEN = {b"k001": b"w:3:v", b"k002": b"w:5:vv"}


def test_the_oracle_passes_a_snapshot_that_reads_the_same_state() -> None:
    assert snapshot_isolation("w", 7, TAKEN, dict(TAKEN)) is None
    assert snapshot_isolation("w", 0, {}, {}) is None


def test_the_oracle_names_a_write_after_the_snapshot_showing_through() -> None:
    newer = {**TAKEN, b"k002": b"w:9:v"}  # overwritten after the snapshot's seq
    v = snapshot_isolation("w", 7, TAKEN, newer)
    assert v is not None and v.startswith("READ-6: snapshot at seq 7 of w") and "1 keys differ" in v
    assert "k002" in v and bugs.INVARIANT_ID.search(v).group(0) == "READ-6"


def test_the_oracle_names_rows_appearing_or_vanishing() -> None:
    appeared = {**TAKEN, b"k003": b"w:8:v"}  # a key put after the snapshot
    vanished = {b"k001": b"w:3:v"}  # a key deleted after it (or a version dropped by compaction)
    assert "k003" in snapshot_isolation("w", 7, TAKEN, appeared)
    assert "k002" in snapshot_isolation("w", 7, TAKEN, vanished)


def test_snapshot_uncapped_is_caught_and_the_clean_seed_passes() -> None:
    seed = 1  # the first detecting seed (sim hunt --bug snapshot-uncapped)
    assert run_gc_workload(seed).ok
    r = run_gc_workload(seed, bugs=frozenset({"snapshot-uncapped"}))
    assert not r.ok and bugs.fired(r) == "READ-6", r.violations


def test_read6_compares_a_snapshot_with_the_model_of_its_seq(monkeypatch) -> None:
    """A snapshot capped one below its sequence number reads the same thing twice -- the old
    READ-6 (two scans of one snapshot agree) passes -- but not the state at its seq: the model
    of the durable history at that seq (sim.checks.prefix.History.state_at) tells them apart."""
    import slatedb.db.common as common

    monkeypatch.setattr(common, "_capped", lambda seq: seq - 1)
    r = run_gc_workload(1)
    assert not r.ok and r.violations[0].invariant == "READ-6" and "the model of the state at that seq" in r.violations[0]
