"""The ``load`` scenario (sim/scenarios/load.py): bulk loads committed into a live writer's
database, judged by sim/checks/load.py (LOAD-1/4/5/6/7, DUR-1). Quiet on the landed code,
the catalogued switch caught, and hand-written mistakes of other shapes caught by their ids."""

from __future__ import annotations

import attrs
import pytest
from ulid import ULID

from sim.campaign import dst
from sim.checks.load import Load, Store, Write, check
from sim.scenarios import catalogue, registry
from sim.scenarios import load as load_scenario
from slatedb.format.types import CompactedSsTableV2, CompactedSsTableView, ManifestV2, SsTableInfo
from slatedb.manifest import edits
from slatedb.row import Row, RowKind


@pytest.mark.parametrize("seed", [0, 1, 2, 4])
def test_worlds_pass_on_the_landed_code(seed: int) -> None:
    # Seeds 0 and 4 failed (ESCAPE-1) while staging put its SSTs create-if-absent under a plain
    # retry and the cross-task duplicate check read blocks unretried; seed 2 commits a load; seeds
    # 0 and 1 race a sharded load against the writer (refused; committed by its union).
    result = load_scenario.run_load_workload(seed)
    assert result.ok, result.violations
    assert result.loads >= 1 and result.acked > 0


def test_a_wal_tail_one_object_short_is_caught_by_load_7() -> None:
    result = load_scenario.run_load_workload(2, bugs=frozenset({"load-wal-tail-short"}))
    assert not result.ok and catalogue.fired(result) == "LOAD-7", result.violations
    assert "leaves 2 WAL rows out of its SSTs, first (wal id, key, seq) [(34," in result.violations[0]  # both rows of wal 34


def test_a_wal_tail_one_object_short_is_caught_in_a_mixed_world() -> None:
    """Seed 817 (a plain and a sharded load race the writer, a second sharded load is refused; seed 42 was this world until its
    plain driver drew the bounded retry policy and gave up at its begin): the row the short tail
    loses is of a key the plain load also writes, so the load's newer version shadowed it and
    LOAD-7 ("or a newer version of its key") passed; the row is still missing from L0 below
    ``last_l0_seq``, and LOAD-7 now counts only newer versions below the load's seq."""
    result = load_scenario.run_load_workload(817)
    assert result.ok and result.figures["outcomes"] == "l1=committed s1=committed s2=refused", result.violations
    bad = load_scenario.run_load_workload(817, bugs=frozenset({"load-wal-tail-short"}))
    assert not bad.ok and catalogue.fired(bad) == "LOAD-7", bad.violations
    assert "leaves 1 WAL rows out of its SSTs, first (wal id, key, seq) [(80, b'k02', 83)]" in bad.violations[0]


def _mutant(monkeypatch, change) -> None:
    """Replace ``CommitBulkLoad.apply`` by ``change(original, edit, manifest, attempt)``."""
    original = edits.CommitBulkLoad.apply
    monkeypatch.setattr(edits.CommitBulkLoad, "apply", lambda self, m, attempt: change(original, self, m, attempt))


def test_a_commit_that_does_not_raise_last_l0_seq_is_caught_by_load_4(monkeypatch) -> None:
    """Hand-written mutant: the commit leaves ``last_l0_seq`` where the WAL was; the reopened
    writer's seqs then start below the load's and its later writes are shadowed."""
    def change(original, edit, m, attempt):
        c = original(edit, m, attempt)
        return attrs.evolve(c, manifest=attrs.evolve(c.manifest, last_l0_seq=max(m.last_l0_seq, edit.wal_seq)))

    _mutant(monkeypatch, change)
    result = load_scenario.run_load_workload(2)
    assert not result.ok and result.violations[0].invariant == "LOAD-4", result.violations


def test_a_commit_that_shows_part_of_a_load_is_caught_by_load_1(monkeypatch) -> None:
    """Hand-written mutant: the commit's L0 views leave out the load's last SST."""
    _mutant(monkeypatch, lambda original, edit, m, attempt: original(attrs.evolve(edit, views=edit.views[:-1]), m,
                                                                       attempt))
    result = load_scenario.run_load_workload(10)
    assert not result.ok and result.violations[0].invariant == "LOAD-1", result.violations
    assert "DUR-1" in {v.invariant for v in result.violations}  # the load's rows, acknowledged, are not read


def test_an_overwrite_that_keeps_the_older_l0_is_caught_by_load_1(monkeypatch) -> None:
    """Hand-written mutant: an overwrite commit puts its views in front of the older L0 instead
    of replacing it; a key the load does not write still reads its old value."""
    def change(original, edit, m, attempt):
        c = original(edit, m, attempt)
        if not edit.overwrite:
            return c
        kept = attrs.evolve(c.manifest, ssts=c.manifest.ssts + m.ssts, l0=c.manifest.l0 + m.l0)
        return attrs.evolve(c, manifest=kept)

    _mutant(monkeypatch, change)
    result = load_scenario.run_load_workload(7)
    assert not result.ok and result.violations[0].invariant == "LOAD-1", result.violations
    assert "below the overwrite load" in result.violations[0]


def _sst(rows: list[Row]) -> tuple[ULID, SsTableInfo]:
    return ULID.from_int(1), SsTableInfo(first_entry=rows[0].key)


def test_the_oracle_on_made_up_stores() -> None:
    """The branches the scenario's seeds reach only under a mutant: a load's SST gone from under
    the latest manifest (LOAD-6), two loads at one seq and a load below last_l0_seq (LOAD-5)."""
    seq = 2**32 + 5
    rows = [Row(b"a", seq, RowKind.VALUE, b"l1:a", None, 0)]
    sid, info = _sst(rows)
    ld = Load("l1", seq=seq, rows={b"a": b"l1:a"}, attempt_values={b"l1:a"}, staged_ids={str(sid)},
              staged_infos={info}, outcome="committed")
    before = ManifestV2(last_l0_seq=5, replay_after_wal_id=3)
    after = ManifestV2(last_l0_seq=seq, replay_after_wal_id=4, ssts=(CompactedSsTableV2(sid, info),),
                       l0=(CompactedSsTableView(ULID.from_int(2), sid),))
    good = Store({1: before, 2: after}, {}, {sid: rows})
    assert check([], [ld], good, {b"a": b"l1:a"}) == []
    gone = check([], [ld], Store({1: before, 2: after}, {}, {sid: None}), {})
    assert any(v.startswith("LOAD-1") for v in gone)  # the manifest shows none of its rows
    assert any(v.startswith("LOAD-6: the latest manifest references SSTs that are gone") for v in gone)
    twice = attrs.evolve(ld, name="l2")
    assert any(v.startswith("LOAD-5: two committed loads share a seq") for v in check([], [ld, twice], good, {}))
    high = Store({1: attrs.evolve(before, last_l0_seq=seq + 1), 2: after}, {}, {sid: rows})
    assert any(v.startswith("LOAD-5") and "already reached it" in v for v in check([], [ld], high, {}))
    # LOAD-7: a WAL row at or below the commit's replay point that is in none of its SSTs.
    wal = {4: [Row(b"k", 7, RowKind.VALUE, b"w", None, 0)]}
    assert any(v.startswith("LOAD-7") for v in check([], [ld], Store({1: before, 2: after}, wal, {sid: rows}), {}))
    # DUR-1: an acknowledged write read back older.
    w = Write(b"k", b"w", 0.0, seq=7, acked_s=0.1)
    assert any(v.startswith("DUR-1") for v in check([w], [], Store({}, {}, {}), {b"k": None}))


def test_registered_once_in_the_main_job_and_the_hunt() -> None:
    assert [s.name for s in registry.SCENARIOS].count("load") == 1
    assert "load" in dst.plan("quick", [s.name for s in registry.SCENARIOS])
    mine = [b for b in catalogue.CATALOGUE if b.workload == "load"]
    assert mine and all(any(i.startswith("LOAD-") for i in b.invariants) for b in mine)


def test_a_clean_up_that_deletes_referenced_ssts_is_caught_by_load_6(monkeypatch) -> None:
    """Hand-written mutant: clean-up takes no SST as referenced. Caught when the commit kept the
    staged SSTs (no L0 flush since staging, so no re-mint): the delete itself is judged."""
    import slatedb.spark.load as load_mod

    monkeypatch.setattr(load_mod, "manifest_sst_ids", lambda m: set())
    result = load_scenario.run_load_workload(21)
    assert not result.ok and result.violations[0].invariant == "LOAD-6", result.violations


def test_a_sharded_load_races_the_live_writer_for_the_url() -> None:
    """Seed 0: the writer's database is there first, the sharded load is refused and aborted;
    seed 1: the load's union creates the database first (a losing speculative attempt still
    staging after the commit deletes its own shard: probe load.stage-ended), the writer opens it
    once initialized, and the oracle reads the shards' rows through the union (LOAD-1, DUR-1);
    a second sharded load begun while the union is being made is refused (LOAD-13)."""
    refused, united = load_scenario.run_load_workload(0), load_scenario.run_load_workload(1)
    assert refused.ok and united.ok, (refused.violations, united.violations)
    assert refused.figures["sharded"] == 1 and united.figures["outcomes"] == "s1=committed s2=refused"
    assert refused.figures["refused"] == 1 and united.figures["committed"] == 1 and united.acked > 0


def test_attempts_that_ignore_the_load_end_are_caught_by_load_10() -> None:
    result = load_scenario.run_load_workload(1, bugs=frozenset({"stage-ignores-load-end"}))
    assert not result.ok and catalogue.fired(result) == "LOAD-10", result.violations
    assert "shard database(s) no manifest names are left" in result.violations[0]


def test_a_plain_and_a_sharded_load_race_one_writer() -> None:
    """Seed 152 (a mixed world: 40% of the sharded seeds): the sharded load's union creates the
    database (a losing speculative attempt still staging after it deletes its own shard), the
    plain load begins on the union's manifest and commits over the union's rows, fencing the
    writer that had opened it meanwhile; both loads and the writer are judged
    in one history (LOAD-1/4/5/6/7, DUR-1) and LOAD-10 holds for both. Its losing speculative
    attempt, staging on after the commit, is what ``stage-ignores-load-end`` leaves behind."""
    result = load_scenario.run_load_workload(152)
    assert result.ok, result.violations
    assert result.figures["outcomes"] == "l1=committed s1=committed s2=refused" and result.acked > 0
    bad = load_scenario.run_load_workload(152, bugs=frozenset({"stage-ignores-load-end"}))
    assert not bad.ok and catalogue.fired(bad) == "LOAD-10", bad.violations
    assert bad.violations[0].startswith("LOAD-10: s1 ended (committed)"), bad.violations


def test_the_leftover_oracle_on_made_up_buckets() -> None:
    """LOAD-10's branches: a marker or intent left, a staged SST left unreferenced, a shard no
    manifest names; nothing is judged of a load whose end did not run (a dead driver's)."""
    from sim.checks.load_leftovers import leftovers

    sid, kept = ULID.from_int(1), ULID.from_int(2)
    latest = ManifestV2(ssts=(CompactedSsTableV2(kept, SsTableInfo()),),
                        l0=(CompactedSsTableView(ULID.from_int(3), kept),))
    plain = Load("l1", load_id="L1", staged_ids={str(sid), str(kept)}, outcome="committed", ended=True)
    assert leftovers({f"compacted/{kept}.sst": 0}, [plain], latest) == []
    assert leftovers({f"compacted/{sid}.sst": 0}, [plain], latest)[0].startswith("LOAD-10: l1 ended (committed) but 1 SST")
    assert "bulk-load/L1/open" in leftovers({"bulk-load/L1/open": 0}, [plain], latest)[0]
    assert leftovers({f"compacted/{sid}.sst": 0}, [attrs.evolve(plain, ended=False)], latest) == []
    # committed, then compacted away: an older manifest references it (load seed 1440), GC's to delete
    older = ManifestV2(ssts=(CompactedSsTableV2(sid, SsTableInfo()),), l0=(CompactedSsTableView(ULID.from_int(4), sid),))
    assert leftovers({f"compacted/{sid}.sst": 0}, [plain], latest, [older, latest]) == []
    assert load_scenario.run_load_workload(1440).ok
    shard = Load("s1", load_id="S1", sharded=True, outcome="refused", ended=True)
    assert "shard database" in leftovers({"shards/S1/0-1-X/manifest/00000000000000000001.manifest": 0}, [shard],
                                         None)[0]


@pytest.mark.parametrize("seed", [12, 291])
def test_sharded_seeds_that_found_engine_bugs_pass(seed: int) -> None:
    """Seed 12: the writer created the database between the sharded commit's check and its union,
    and ``commit_sharded`` let the union's CloneMismatchError out instead of refusing the load
    (LOAD-8's typed refusal; ESCAPE-1). Seed 291: ``collect_shards`` listed a shard's manifests
    unretried, so a transient error after a committed union failed the job (ESCAPE-1)."""
    result = load_scenario.run_load_workload(seed)
    assert result.ok, result.violations
    assert result.figures["sharded"] >= 1  # seed 12 runs a second sharded load (refused) since LOAD-13's world


def test_a_union_left_uninitialized_by_a_crashed_driver_does_not_hang_the_writer() -> None:
    """Seed 388 (a mixed world): the sharded load's driver crashed right after the union's
    first manifest and nobody aborted it, so the database stays uninitialized for good. The
    writer reopened it for ever (885 refused opens in a minute of wall time; the default plan
    never ended): it now stops reopening ``UNINITIALIZED_WAIT_S`` after the first refusal."""
    result = load_scenario.run_load_workload(388)
    assert result.ok, result.violations
    assert result.virtual_s < load_scenario.UNINITIALIZED_WAIT_S + 30, result.virtual_s


@pytest.mark.parametrize("seed", [2045, 2275])
def test_an_abort_after_a_union_that_landed_leaves_no_unnamed_shard(seed: int) -> None:
    """Load seeds 2045 and 2275 (LOAD-10): the sharded driver died right after its union's first
    manifest landed; the abort found the union made and left every shard, a losing attempt's
    too, which nothing would ever collect. The abort now deletes the shards the union does not
    name (tests/spark/test_sharded.py plays it at the store)."""
    result = load_scenario.run_load_workload(seed)
    assert result.ok, result.violations


@pytest.mark.parametrize("seed", [1, 33])
def test_the_epilogue_keeps_a_pinned_shard_through_a_destroy_and_its_clean_ups(seed: int) -> None:
    """The epilogue (sim/scenarios/load_kept_shards.py) of a sharded seed whose union committed:
    a reader's checkpoint pins a shard, the union is hard-destroyed, the path is cleaned up while
    the shard is pinned (seed 1: collect_ended_shards, probe load.ended-shard-kept) and after its
    release (seed 33: the hard destroy again, H1 on only shard databases, probe
    destroy.kept-shard-removed): the shard reads the same (LOAD-9), then nothing of a database is
    left (DESTROY-4)."""
    from sim.world import probes as sim_probes
    from sim.world import trace as trace_mod

    with sim_probes.counting() as hits, trace_mod.capture() as traces:
        result = load_scenario.run_load_workload(seed)
    assert result.ok, result.violations
    steps = [e.f["step"] for e in traces[-1].events if e.kind == "kept_shards"]
    assert steps == ["destroyed", "released"], steps
    want = {1: "load.ended-shard-kept", 33: "destroy.kept-shard-removed"}[seed]
    assert hits.get(want), dict(hits)


def test_the_epilogue_waits_out_a_creation_checkpoint_past_its_last_second() -> None:
    """Load seed 1771: the union's ephemeral source checkpoint on the shard (clone.md step 3, 300 s)
    ends at second E; the epilogue slept to E + 1.0, which read back as E + 0.999 (float time
    truncated to ms), the checkpoint still active at its last second (``is_expired``: older than
    now), the shard kept and DESTROY-4 reported 7 objects left. A scenario error: the wait now ends
    half a second past the boundary, and the shard is removed."""
    from sim.world import trace as trace_mod

    with trace_mod.capture() as traces:
        result = load_scenario.run_load_workload(1771)
    assert result.ok, result.violations
    events = traces[-1].events
    released = next(i for i, e in enumerate(events) if e.kind == "kept_shards" and e.f["step"] == "released")
    assert not [e for e in events[released:] if e.kind == "destroy_shard_kept"]


def test_a_clean_up_that_ignores_the_pins_is_caught_by_load_9() -> None:
    """Catalogued ``ended-shards-ignore-pins`` (the clean-up of ended loads as it was: every ended
    load's shards deleted): the pinned shard is gone under its reader at seed 1."""
    result = load_scenario.run_load_workload(1, bugs=frozenset({"ended-shards-ignore-pins"}))
    assert not result.ok and catalogue.fired(result) == "LOAD-9", result.violations
    assert "cannot be read" in result.violations[0]


def test_a_commit_that_deletes_what_it_wrote_after_an_unsure_update_is_caught_by_load_6() -> None:
    """Seed 37 (141 before the traces moved, 2026-11-27): the plain driver runs with no retry (the bounded seeds); its commit's manifest
    update lands, the reply is lost, the commit raises: the SSTs it wrote stay (probe
    load.commit-unsure-kept). Catalogued ``load-deletes-after-ambiguous-commit`` deletes them as
    the commit did before: the cleanup checker sees an SST the latest manifest names deleted."""
    from sim.world import probes as sim_probes

    with sim_probes.counting() as hits:
        good = load_scenario.run_load_workload(37)
    assert good.ok and hits.get("load.commit-unsure-kept"), (good.violations, dict(hits))
    bad = load_scenario.run_load_workload(37, bugs=frozenset({"load-deletes-after-ambiguous-commit"}))
    assert not bad.ok and catalogue.fired(bad) == "LOAD-6", bad.violations


@pytest.mark.parametrize("seed,switch,invariant,probe", [
    (21, "cleanup-latest-only", "LOAD-6", "load.cleanup-kept-pinned"),
    (49, "load-landed-by-ssts", "LOAD-12", "load.commit-landed-found"),
    (1, "sharded-begin-takes-live-union", "LOAD-13", "load.union-live-refused"),
])
def test_the_loaded_database_worlds_catch_their_switches(seed: int, switch: str, invariant: str, probe: str) -> None:
    """The worlds that reach LOAD-6, LOAD-12 and LOAD-13 (sim/scenarios/load_compacted.py, the
    epilogue: seed 21, a reader's checkpoint on the load's commit, a full compaction, then the
    clean-up by an operator's collect_loads; seed 49, the commit stalls after its create landed
    while a compaction and GC pass it; seed 1, a second sharded load begins while the first one's
    union is being made). Each passes with its branch taken (the probe), and fails by the
    invariant with the catalogued switch on."""
    from sim.world import probes as sim_probes

    with sim_probes.counting() as hits:
        good = load_scenario.run_load_workload(seed)
    assert good.ok and hits.get(probe), (good.violations, dict(hits))
    bad = load_scenario.run_load_workload(seed, bugs=frozenset({switch}))
    assert not bad.ok and catalogue.fired(bad) == invariant, bad.violations


def test_the_epilogue_runs_under_the_runs_store_faults_in_some_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """In half of its seeds the epilogue (sim/scenarios/load_compacted.py) injects the run's own
    store faults into its processes' calls: seed 5's writers, load driver, reader, GC and final
    read each meet transient errors (and retry through them), and the seed passes."""
    import collections

    import sim.world.store as sim_store

    seen: collections.Counter = collections.Counter()
    op = sim_store.SimObjectStore._op

    async def counting_op(self, name, key, apply, **fields):
        try:
            return await op(self, name, key, apply, **fields)
        except sim_store.TransientObjectStoreError:
            seen[self.process] += 1
            raise

    monkeypatch.setattr(sim_store.SimObjectStore, "_op", counting_op)
    result = load_scenario.run_load_workload(5)
    assert result.ok, result.violations
    epilogue = {p for p in seen if p in ("w9", "l9", "r9", "c9", "g9", "f9", "w10", "l9.abort")}
    assert {"l9", "g9", "f9"} <= epilogue, dict(seen)


def test_a_sharded_job_re_run_after_an_aborted_one_commits() -> None:
    """The operator's re-run (sim/scenarios/load.py, stream sharded-second-alone): s1's driver
    crashed and was aborted, s2 ran the job again into the URL s1 left and committed; the
    oracle holds its rows (seed 3)."""
    result = load_scenario.run_load_workload(3)
    assert result.ok, result.violations
    assert result.outcomes == "s1=crashed s2=committed", result.outcomes
