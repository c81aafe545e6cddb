"""The destroy scenario (issue 27 item 4): soft and hard destroys racing a writer, a reader,
checkpoints, a clone and GC, every DESTROY-* invariant checked; its catalogue switch and a
hand-written mutant of the destroy edit's already-applied check are caught."""

from __future__ import annotations

import uuid

import pytest

from slatedb.format.manifest import encode_manifest
from slatedb.format.types import Checkpoint, ManifestV2
from slatedb.manifest.checkpoints import writer_checkpoint
from slatedb.manifest.edits import NOT_LANDED, SoftDestroy
from slatedb.objstore.memory import MemoryBucket

from sim.checks.destroy import DestroyChecks
from sim.scenarios import catalogue as bugs
from sim.scenarios.destroy import run_destroy_workload
from sim.world.invariants import InvariantViolation
from sim.world.trace import Trace

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [0, 2])
def test_destroy_seeds_pass(seed: int) -> None:
    r = run_destroy_workload(seed)
    assert r.ok, r.violations
    assert r.outcomes["d1"] == "destroyed" and r.outcomes["w"] in ("fenced", "refused", "closed")


@pytest.mark.parametrize("seed", [3, 17, 44])
def test_destroy_racing_a_standalone_gc_leaves_nothing(seed: int) -> None:
    """Seed 3: the clone's GC created ``gc/manifest.boundary`` after the hard destroy's listing,
    which then deleted the latest manifest (DESTROY-4: an object and no manifest). Seed 17: a
    GC whose boundary a hard destroy deleted under its pass raised ``BoundaryVanishedError``.
    Seed 44: another destroyer's stalled manifest create lands on an id the hard destroy had
    just deleted; its listing before the latest manifest finds it (destroy.md H4/H5, S5)."""
    r = run_destroy_workload(seed, contract=False)
    assert r.ok, r.violations
    assert seed != 3 or r.outcomes["clone"] == "hard-destroyed"


def test_an_older_writers_stalled_fence_landing_after_the_mark_is_not_destroy_2() -> None:
    """Seed 98: the writer's WAL fence (0 bytes, sent right after its epoch bump) stalls 15 s; a
    soft destroy bumps the epoch, fences at wal/1 and marks the manifest; then the writer's fence
    lands at wal/2. It holds no row (FENCE-2 allows an older writer's fence above a newer one's;
    the writer re-reads the epoch and halts), so DESTROY-2 judges data WAL objects only."""
    r = run_destroy_workload(98, contract=False)
    assert r.ok, r.violations


def test_a_checkpoint_asked_of_a_database_gc_just_removed_is_refused() -> None:
    """Seed 99: GC removed the soft-destroyed parent; the admin's next checkpoint found no
    manifest at all, and the commit raised ``CorruptionError`` ("the database has no manifest"),
    which escaped (ESCAPE-1). No manifest at all is "no database" (``InvalidDbStateError``)."""
    r = run_destroy_workload(99, contract=False)
    assert r.ok and r.outcomes["admin"] == "refused", (r.violations, r.outcomes)


def test_soft_destroy_without_the_fence_fires_destroy_2() -> None:
    r = run_destroy_workload(1, contract=False, bugs=frozenset({"soft-destroy-no-fence"}))
    assert not r.ok and bugs.fired(r) == "DESTROY-2"


def test_a_loose_already_applied_check_of_the_destroy_edit_is_caught(monkeypatch) -> None:
    """Item 5's destroy class: the soft destroy edit counted as applied once the manifest is
    marked, though a racing destroyer's writer checkpoint is still in it: that checkpoint never
    expires, so GC never removes the database (DESTROY-6). Seed 2 races two destroyers."""

    def loose(self, m, attempt):
        return (True, m.destroyed_at_s) if m.destroyed_at_s else NOT_LANDED

    monkeypatch.setattr(SoftDestroy, "landed", loose)
    r = run_destroy_workload(2, contract=False)
    assert not r.ok and r.violations[0].invariant == "DESTROY-6"


def test_a_destroy_that_trusts_its_first_listing_is_caught(monkeypatch) -> None:
    """destroy.md H4/H5 with the re-listing taken out: the latest manifest goes right after what
    the first listing held. In seed 580 (44 before the traces moved on 2026-11-27, where another
    destroyer's stalled manifest create landed on an id the destroy had just deleted: DESTROY-4)
    a manifest 14 lands after the first listing: the destroy deletes the SSTs and WAL objects
    it names and the first listing's latest manifest, and manifest 14 is left naming deleted
    objects (GC-4 and FENCE-1 in the final check). ``tests/clone/test_destroy.py``'s
    ``test_hard_destroy_deletes_objects_that_land_after_its_listing`` holds the same step."""
    import slatedb.destroy
    import slatedb.gc.destroyed as removal

    async def first_listing_only(runtime, what, list_keys, delete):
        keys = sorted((k for k in await list_keys() if removal.is_db_key(k)), key=removal._removal_order)
        manifests = [k for k in keys if removal._manifest_id(k) is not None]
        for key in [k for k in keys if k != manifests[-1]] + manifests[-1:]:
            await delete(key)
        return len(keys)

    assert run_destroy_workload(580, contract=False).ok
    monkeypatch.setattr(removal, "delete_latest_last", first_listing_only)
    monkeypatch.setattr(slatedb.destroy, "delete_latest_last", first_listing_only)
    r = run_destroy_workload(580, contract=False)
    assert not r.ok and r.violations[0].invariant in ("DESTROY-4", "GC-4"), r.violations
    assert "referenced by manifest 14, does not exist" in str(r.violations[0]), r.violations


def _landing(trace: Trace, bucket: MemoryBucket, process: str, n: int, key: str, data: bytes | None) -> None:
    if data is not None:
        trace.record(process, "store.put", n=n, key=key, size=len(data))
    else:
        trace.record(process, "store.delete", n=n, key=key)
    if data is not None:
        bucket.objects[key] = (data, None)
    else:
        bucket.objects.pop(key, None)
    trace.record(process, "store.result", n=n, outcome="ok")


def _checked() -> tuple[Trace, MemoryBucket]:
    """A trace with DestroyChecks on one database root, ``db/``, and its bucket."""
    bucket = MemoryBucket()
    trace = Trace(lambda: 0.0)
    DestroyChecks(bucket, ("db/",)).attach(trace)
    return trace, bucket


def _marked_and_removed(epoch: int) -> tuple[Trace, MemoryBucket]:
    """:func:`_checked`, after a soft destroy of writer ``epoch`` marked the database (its one
    manifest) and the removal deleted it: the root is gone."""
    trace, bucket = _checked()
    _landing(trace, bucket, "d1", 1, "db/manifest/00000000000000000001.manifest",
             encode_manifest(ManifestV2(initialized=True, writer_epoch=epoch, destroyed_at_s=5)))
    _landing(trace, bucket, "g1", 1, "db/manifest/00000000000000000001.manifest", None)
    return trace, bucket


def test_the_checks_name_each_broken_destroy_rule() -> None:
    trace, bucket = _checked()
    trace.record("w", "writer_epoch", epoch=1)
    _landing(trace, bucket, "w", 1, "db/manifest/00000000000000000001.manifest",
             encode_manifest(ManifestV2(initialized=True, writer_epoch=1)))
    _landing(trace, bucket, "w", 2, "db/wal/00000000000000000001.sst", b"x")
    _landing(trace, bucket, "d1", 1, "db/manifest/00000000000000000002.manifest",
             encode_manifest(ManifestV2(initialized=True, writer_epoch=2, destroyed_at_s=5)))
    with pytest.raises(InvariantViolation, match="DESTROY-2"):
        _landing(trace, bucket, "w", 3, "db/wal/00000000000000000002.sst", b"x")
    with pytest.raises(InvariantViolation, match="DESTROY-3"):
        _landing(trace, bucket, "w2", 1, "db/manifest/00000000000000000003.manifest",
                 encode_manifest(ManifestV2(initialized=True, writer_epoch=3, destroyed_at_s=5)))
    for key in [k for k in bucket.objects if "/manifest/" in k]:
        bucket.objects.pop(key)
    with pytest.raises(InvariantViolation, match="DESTROY-4"):
        _landing(trace, bucket, "g1", 1, "db/wal/00000000000000000002.sst", None)


def test_seeds_that_met_a_database_already_gone_pass() -> None:
    """Seed 123: a second soft destroyer found the parent already removed by GC: ``NotFoundError``
    (S1), an outcome, not an escape. Seed 34 (263 before the traces moved on 2026-11-27): the
    parent's writer, fenced by a soft destroy and stalled, polled after GC removed the database:
    ``InvalidDbStateError`` ("destroyed or deleted while open"), not the ``CorruptionError`` that
    escaped before (no object is damaged)."""
    gone, polled = run_destroy_workload(123, contract=False), run_destroy_workload(34, contract=False)
    # Seed 115: a soft destroyer's commit met the boundary file a racing hard destroy deleted
    # (BoundaryVanishedError escaped): the database is destroyed, the soft destroy is done.
    raced = run_destroy_workload(115, contract=False)
    assert raced.ok, raced.violations
    # Seed 202: the admin waited for a parent already destroyed and removed, for ever
    # (liveness after 21,600 virtual s): a removed parent is gone for good.
    late = run_destroy_workload(202, contract=False)
    assert late.ok and late.outcomes["admin"] == "gone", (late.violations, late.outcomes)
    assert gone.ok and "gone" in gone.outcomes.values(), (gone.violations, gone.outcomes)
    assert polled.ok and polled.outcomes["w"] == "refused", (polled.violations, polled.outcomes)


@pytest.mark.parametrize("seed,created", [(10, "clone/manifest/00000000000000000006.manifest"),
                                          (2, "clone/gc/manifest.boundary")])
def test_a_gc_create_landing_after_a_hard_destroy_is_taken_back(seed: int, created: str) -> None:
    """The clone's GC decided a create on a manifest read before the clone's hard destroy, and it
    landed on the emptied root (the "create held" mode of the contract world,
    ``sim.scenarios.destroy.CREATE_HELD_WAIT_S``; destroy seeds 77, 129 and 256 of the world
    beyond the contract before 2026-11-27 needed a stall drawn at that moment): seed 10 committed
    ``DetachExternalDb`` as manifest 6 (a lone manifest naming deleted SSTs), seed 2 created
    ``gc/manifest.boundary`` (an object and no manifest). GC takes its create back (DESTROY-7);
    with the take-back switched off the object stays: DESTROY-7 at the pass's end, or DESTROY-4
    as soon as the root holds it without a manifest."""
    r = run_destroy_workload(seed)
    assert r.ok, r.violations
    r = run_destroy_workload(seed, bugs=frozenset({"gc-keeps-create-after-destroy"}))
    assert not r.ok and r.violations[0].invariant in ("DESTROY-7", "DESTROY-4"), r.violations
    assert created in str(r.violations[0]), r.violations


def test_destroy_7_names_a_gc_create_left_on_a_removed_database() -> None:
    trace, bucket = _checked()
    _landing(trace, bucket, "w", 1, "db/manifest/00000000000000000001.manifest",
             encode_manifest(ManifestV2(initialized=True, writer_epoch=1)))
    _landing(trace, bucket, "hd", 1, "db/manifest/00000000000000000001.manifest", None)  # gone
    _landing(trace, bucket, "g1", 1, "db/gc/manifest.boundary", b"3")
    _landing(trace, bucket, "g1", 2, "db/gc/manifest.boundary", None)  # taken back
    trace.record("g1", "gc_pass")
    _landing(trace, bucket, "g1", 3, "db/gc/manifest.boundary", b"3")
    with pytest.raises(InvariantViolation, match="DESTROY-7"):
        trace.record("g1", "gc_pass")
    # A GC manifest commit landing there (seed 1880: ExpireCheckpoints on a manifest read before
    # the destroy) is DESTROY-7's too: judged at the pass's end, not as DESTROY-3 at the landing.
    trace, bucket = _marked_and_removed(epoch=2)
    stale = ManifestV2(initialized=True, writer_epoch=1,
                       checkpoints=(Checkpoint(id=uuid.UUID(int=9), manifest_id=1),))
    _landing(trace, bucket, "g1", 1, "db/manifest/00000000000000000002.manifest", encode_manifest(stale))
    with pytest.raises(InvariantViolation, match="DESTROY-7"):
        trace.record("g1", "gc_pass")


def test_a_stale_create_behind_the_boundary_and_a_vanished_boundary_on_a_destroyed_database() -> None:
    """Seed 530: the reader's checkpoint commit, built on manifest 1 long before the mark, lands on
    id 2, which GC had freed: behind the durable boundary, refused by the reader's boundary check,
    so not the database's history (DESTROY-3 read it as a checkpoint added over the destroyed
    manifest). Seed 435: the reader's close met the boundary file the destroy had deleted;
    ``BoundaryVanishedError`` escaped (ESCAPE-1), the commit now reports the database destroyed."""
    for seed in (530, 435):
        r = run_destroy_workload(seed, contract=False)
        assert r.ok, (seed, r.violations)


# Destroy seed 409 (the writer's open read manifest 2 and stalled its epoch bump past a soft
# destroy and GC's removal; the bump landed on the emptied root, and the open took it back,
# DESTROY-7) no longer reaches that race since the traces moved on 2026-11-27 (no seed of
# 0..979 of the world beyond the contract does); its switch ``writer-keeps-open-after-destroy``
# is held by its unit test (``sim.scenarios.catalogue.UNIT_CAUGHT``,
# tests/db/test_open_after_destroy.py), run by tests/test_sim_bugs.py.


def test_destroy_3_names_a_writer_going_on_after_its_open_landed_on_a_removed_database() -> None:
    def world() -> tuple[Trace, MemoryBucket]:
        trace, bucket = _checked()
        _landing(trace, bucket, "w0", 1, "db/manifest/00000000000000000001.manifest",
                 encode_manifest(ManifestV2(initialized=True, writer_epoch=1)))
        _landing(trace, bucket, "g1", 1, "db/manifest/00000000000000000001.manifest", None)  # removed
        bump = ManifestV2(initialized=True, writer_epoch=2,
                          checkpoints=(writer_checkpoint(uuid.UUID(int=7), 2, 2, 0),))
        _landing(trace, bucket, "w", 1, "db/manifest/00000000000000000002.manifest",  # the stalled bump
                 encode_manifest(bump))
        _landing(trace, bucket, "w", 2, "db/wal/00000000000000000001.sst", b"")  # its fence
        return trace, bucket

    trace, bucket = world()  # taken back, the manifest last: nothing to report
    _landing(trace, bucket, "w", 3, "db/wal/00000000000000000001.sst", None)
    _landing(trace, bucket, "w", 4, "db/manifest/00000000000000000002.manifest", None)
    _landing(trace, bucket, "w", 5, "db/manifest/00000000000000000001.manifest",  # a later, new database
             encode_manifest(ManifestV2(initialized=True, writer_epoch=1)))
    trace, bucket = world()  # kept: its first data object is the violation
    with pytest.raises(InvariantViolation, match="DESTROY-3.*goes on writing"):
        _landing(trace, bucket, "w", 3, "db/wal/00000000000000000002.sst", b"rows")
    # A reader's checkpoint (not an epoch bump) landing there is judged at once, as before.
    trace, bucket = _marked_and_removed(epoch=1)
    reader_cp = Checkpoint(id=uuid.UUID(int=9), manifest_id=1)
    with pytest.raises(InvariantViolation, match="DESTROY-3.*over destroyed"):
        _landing(trace, bucket, "r1", 1, "db/manifest/00000000000000000002.manifest",
                 encode_manifest(ManifestV2(initialized=True, writer_epoch=1, checkpoints=(reader_cp,))))


#: Seeds of the world beyond the contract (grace of 1-20 s under 20 s stalls; the parent's hard
#: destroy while a soft destroyer or a checkpoint maker still had a request on the wire) that fail
#: there, with the invariant each fails with: the destroy campaigns 600..2599 of 2026-11-27 found
#: the later ones; 237, 334, 521 and 674 (the last with another invariant) re-checked after the
#: traces moved the same day (sixteenth session: seeds 1336, 1778, 1790, 2171 and 2457 no longer
#: fail there and left the list). 1169: DESTROY-3 (21.9 s) before DESTROY-2 (22.9 s), reported in
#: that order since the harness lists verdicts as raised (it listed the later, swallowed one first).
_BROKE_THE_CONTRACT = {237: "ESCAPE-1", 263: "DESTROY-2", 334: "DESTROY-2", 409: "DESTROY-3", 521: "DESTROY-6",
                       674: "ESCAPE-1", 1169: "DESTROY-3", 1671: "DESTROY-3", 1880: "DESTROY-3",
                       2059: "DESTROY-3", 2197: "DESTROY-3", 1551: "DESTROY-4", 1853: "DESTROY-4",
                       2303: "DESTROY-4"}


@pytest.mark.parametrize("seed", sorted(_BROKE_THE_CONTRACT))
def test_seeds_that_broke_the_destroy_contract_pass_within_it(seed: int) -> None:
    """spec/protocols/destroy.md "Assumptions": beyond DESTROY-A1/A2 these seeds fail (a process
    stalled past the grace, or a writer's request on the wire during a hard destroy, creates on the
    removed root); the world that keeps them (grace above two stalled legs, the hard destroyer
    after every other process of the parent and a drain) runs the same seed clean."""
    beyond = run_destroy_workload(seed, contract=False)
    assert not beyond.ok and beyond.violations[0].invariant == _BROKE_THE_CONTRACT[seed], beyond.violations
    within = run_destroy_workload(seed)
    assert within.ok, within.violations


def test_a_gc_commit_landing_after_a_hard_destroy_that_deleted_its_boundary_is_taken_back() -> None:
    """Seed 62 (1880 before the traces moved on 2026-11-27; inside the contract: GC runs during
    a hard destroy): GC's manifest commit, decided before the destroy, landed on the emptied root;
    the boundary file it had seen was gone and ``BoundaryVanishedError`` escaped GC (ESCAPE-1)
    with the lone manifest left. The manifest store now takes the create back (DESTROY-7) and GC
    ends its pass; with the take-back switched off (``manifest-kept-after-destroy``) the error
    escapes again."""
    r = run_destroy_workload(62, contract=False)
    assert r.ok, r.violations
    r = run_destroy_workload(62, contract=False, bugs=frozenset({"manifest-kept-after-destroy"}))
    assert not r.ok and r.violations[0].invariant == "ESCAPE-1", r.violations
    assert "BoundaryVanishedError" in str(r.violations[0]), r.violations


@pytest.mark.parametrize("seed,remover", [(1, "g1"), (8, "hdp")])
def test_a_destroy_deleting_what_is_not_the_databases_is_caught(seed: int, remover: str) -> None:
    """DESTROY-8: the world keeps a user's file and two nested databases under the parent's root
    (``sim.scenarios.destroy.FOREIGN``). With catalogued bug ``destroy-deletes-foreign`` (every
    listed key counts as the database's) GC's removal deletes the one nested in ``compacted/``
    (seed 1), a hard destroy the user's file at the root (seed 8, its hard destroyer first);
    without it both seeds pass with every foreign object intact."""
    r = run_destroy_workload(seed, bugs=frozenset({"destroy-deletes-foreign"}))
    assert not r.ok and r.violations[0].invariant == "DESTROY-8", r.violations
    assert f"{remover} deleted parent/" in str(r.violations[0])
    ok = run_destroy_workload(seed)
    assert ok.ok, ok.violations


@pytest.mark.parametrize("seed", [177, 192])
def test_a_gc_stopped_between_its_create_and_the_take_back_still_takes_it_back(seed: int) -> None:
    """The "create held" mode (``sim.scenarios.destroy.CREATE_HELD_WAIT_S``): the clone's GC
    ``g2`` sent a create that landed after the clone's hard destroy, and the heal stopped g2 (its
    nursery cancelled, GC restarted) between the landing and the take-back -- seed 177 during the
    look after its ``DetachExternalDb`` commit (manifest 6 left alone on the emptied root), seed
    192 with the take-back's delete of ``gc/manifest.boundary`` on the wire. The create, the look
    and the take-back now run shielded from the stop; with catalogued bug
    ``gc-take-back-unshielded`` the object stays and DESTROY-7 names it at the restarted GC's
    first pass."""
    r = run_destroy_workload(seed)
    assert r.ok, r.violations
    r = run_destroy_workload(seed, bugs=frozenset({"gc-take-back-unshielded"}))
    assert not r.ok and r.violations[0].invariant == "DESTROY-7", r.violations
    assert "it created on a destroyed and removed database" in str(r.violations[0])
