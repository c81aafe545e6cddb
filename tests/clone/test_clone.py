"""Clones (RFC 000 "Clones", spec/protocols/clone.md): create_clone step by step, isolation of
clone and parent in both directions (also across compactions on either side), nested clones,
the typed errors, and crash-safety: a crash at every mutating store call, then re-runs."""

from __future__ import annotations

import uuid

import pytest
import trio

import slatedb
from slatedb.checkpoint import CheckpointOptions, create_checkpoint, delete_checkpoint
from slatedb.clone import CloneMismatchError, create_clone, create_clone_url
from slatedb.errors import CheckpointNotFoundError, InvalidArgumentError, InvalidDbStateError, SlateDBError
from slatedb.format.types import WriterCheckpoint
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import OVERWRITE, PutMode
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import wal_key

from ..checkpoint.helpers import ClockRuntime
from ..db.helpers import compact_all_l0
from .helpers import (
    NO_COMPACTOR,
    Budget,
    Crash,
    CrashingStore,
    bucket,
    contents,
    keys_under,
    latest,
    store,
    write,
    write_wal_only,
)


class Recorder(ProductionRuntime):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, dict]] = []

    def event(self, kind, **fields):
        self.events.append((kind, fields))


def clone(clone_url: str, parent_url: str, checkpoint=None, runtime=None):
    return trio.run(lambda: create_clone_url(clone_url, parent_url, checkpoint, runtime=runtime))


def checkpoint(url: str, **options) -> uuid.UUID:
    async def main():
        return (await create_checkpoint(ManifestStore(store(url), ProductionRuntime()), ProductionRuntime(),
                                        CheckpointOptions(**options))).id

    return trio.run(main)


def final_checkpoints(url: str) -> list:
    """The never-expiring checkpoints that are not a writer's: the final checkpoints of clones."""
    return [c for c in latest(url).manifest.checkpoints
            if c.checkpoint_expire_time_s == 0 and not isinstance(c.metadata, WriterCheckpoint)]


def rows(prefix: bytes, n: int, tag: bytes = b"") -> dict[bytes, bytes]:
    return {prefix + b"%03d" % i: tag + b"v%d" % i for i in range(n)}


@pytest.fixture
def b() -> str:
    return bucket()


def test_a_clone_starts_as_its_parent_and_reads_its_ssts_in_place(b: str) -> None:
    parent, child = f"{b}/parent", f"{b}/clone"
    write(parent, rows(b"l0-", 50))
    write_wal_only(parent, rows(b"wal-", 5))  # durable, only in the WAL
    pm = latest(parent).manifest
    rt = Recorder()
    done = clone(child, parent, runtime=rt)
    assert done == latest(child)  # what create_clone returns is what the store holds
    m = done.manifest
    assert m.initialized and not m.checkpoints and not m.destroyed_at_s
    assert m.writer_epoch == latest(parent).manifest.writer_epoch + 1
    (ext,) = m.external_dbs
    assert ext.path == "parent"
    assert set(ext.sst_ids) == {s.id for s in pm.ssts} and ext.sst_ids
    assert [c.id for c in final_checkpoints(parent)] == [ext.final_checkpoint_id]
    # The clone has its own manifests and the copied WAL range, no SST of its own.
    assert not keys_under(child, "compacted/")
    copied = keys_under(child, "wal/")
    assert copied == [wal_key(i) for i in range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1)] and copied
    steps = [f["clone_step"] for k, f in rt.events if k == "clone"]
    assert steps[:3] == ["read", "source_checkpoint", "manifest_written"]
    assert steps[-2:] == ["wal_copied", "done"] and "final_checkpoint" in steps
    assert rt.events[-1] == ("clone", {"clone_step": "done", "manifest": done.id, "resumed": False})
    (wal_copied,) = [f for k, f in rt.events if k == "clone" and f["clone_step"] == "wal_copied"]
    assert wal_copied == {"clone_step": "wal_copied", "count": len(copied),
                          "first": m.replay_after_wal_id + 1, "last": m.wal_id_last_seen}
    assert contents(child) == {**rows(b"l0-", 50), **rows(b"wal-", 5)}


@pytest.mark.parametrize("wal_flushes", [0, 1], ids=["even-replay-point", "odd-replay-point"])
def test_the_wal_copied_event_names_the_copied_range(b: str, wal_flushes: int) -> None:
    """The ``wal_copied`` event says which parent WAL ids were copied: ``first`` is the replay
    point + 1 and ``last`` the manifest's last seen id, for a replay point of either parity (each
    writer open fences with one WAL object, so plain writes leave it even)."""
    parent, child = f"{b}/parent", f"{b}/clone"
    with slatedb.Db.open(parent, settings={**NO_COMPACTOR, "flush_interval": "1h"}) as db:
        for i in range(wal_flushes):
            db.put(b"e%d" % i, b"v")
            db.flush()  # WAL only
        db.put(b"k", b"v")
        db.flush(wal=False)
    write_wal_only(parent, rows(b"wal-", 3))
    rt = Recorder()
    m = clone(child, parent, runtime=rt).manifest
    assert m.replay_after_wal_id % 2 == wal_flushes
    copied = keys_under(child, "wal/")
    assert copied == [wal_key(i) for i in range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1)] and copied
    (wal_copied,) = [f for k, f in rt.events if k == "clone" and f["clone_step"] == "wal_copied"]
    assert wal_copied == {"clone_step": "wal_copied", "count": len(copied),
                          "first": m.replay_after_wal_id + 1, "last": m.wal_id_last_seen}


def test_writes_are_isolated_both_ways_across_compactions_on_either_side(b: str) -> None:
    parent, child = f"{b}/parent", f"{b}/clone"
    base = rows(b"k", 40)
    write(parent, base)
    write(parent, rows(b"m", 10))
    clone(child, parent)
    write(child, {b"k000": b"clone", b"c-only": b"1", b"k001": None})
    write(parent, {b"k000": b"parent", b"p-only": b"1", b"k002": None})
    expect_child = {**base, **rows(b"m", 10), b"k000": b"clone", b"c-only": b"1"}
    del expect_child[b"k001"]
    expect_parent = {**base, **rows(b"m", 10), b"k000": b"parent", b"p-only": b"1"}
    del expect_parent[b"k002"]
    assert contents(child) == expect_child
    assert contents(parent) == expect_parent
    # The parent compacts: the clone keeps reading the old SSTs (pinned by its final checkpoint).
    assert compact_all_l0(store(parent)) >= 2
    assert contents(child) == expect_child
    # The clone compacts the parent's SSTs into its own: the parent's objects are untouched.
    before = {m.key: store(parent).get_now(m.key).data for m in store(parent).list_now("compacted/")}
    assert compact_all_l0(store(child)) >= 1
    after = {m.key: store(parent).get_now(m.key).data for m in store(parent).list_now("compacted/")}
    assert after == before
    cm = latest(child).manifest
    assert all(not e.sst_ids for e in cm.external_dbs), "compacted away: no parent SST referenced"
    assert keys_under(child, "compacted/")
    assert contents(child) == expect_child
    assert contents(parent) == expect_parent


def test_a_clone_from_a_checkpoint_sees_that_state_only(b: str) -> None:
    parent, child = f"{b}/parent", f"{b}/clone"
    write(parent, rows(b"a", 20))
    cp = checkpoint(parent, lifetime_s=3600)
    write(parent, rows(b"b", 20))
    write_wal_only(parent, rows(b"w", 3))
    done = clone(child, parent, cp)
    assert done.manifest.external_dbs[-1].source_checkpoint_id == cp
    # CLONE-3: nothing outside the pinned manifest's WAL range was copied.
    pinned = trio.run(ManifestStore(store(parent), ProductionRuntime()).read,
                      next(c.manifest_id for c in latest(parent).manifest.checkpoints if c.id == cp)).manifest
    for key in keys_under(child, "wal/"):
        wal_id = int(key[4:24])
        assert pinned.replay_after_wal_id < wal_id <= pinned.wal_id_last_seen, key
    assert len(keys_under(parent, "wal/")) > len(keys_under(child, "wal/"))
    assert contents(child) == rows(b"a", 20)
    (fin,) = final_checkpoints(parent)
    src = next(c for c in latest(parent).manifest.checkpoints if c.id == cp)
    assert fin.manifest_id == src.manifest_id  # CLONE-1


@pytest.mark.parametrize("gp_name", ["gp", "zz-gp"], ids=["gp-sorts-before-p", "gp-sorts-after-p"])
def test_nested_clones_read_through_two_levels(b: str, gp_name: str) -> None:
    gp, p, c = f"{b}/{gp_name}", f"{b}/p", f"{b}/c"
    write(gp, rows(b"g", 30))
    clone(p, gp)
    write(p, rows(b"p", 30))
    # The grandparent's ephemeral source checkpoint is gone by now (deleted, as if expired):
    # the grandchild's final checkpoint on gp comes from p's final checkpoint there.
    gm = latest(gp).manifest
    for cpt in [c_ for c_ in gm.checkpoints if c_.checkpoint_expire_time_s != 0]:
        trio.run(lambda: delete_checkpoint(ManifestStore(store(gp), ProductionRuntime()), ProductionRuntime(), cpt.id))
    done = clone(c, p)
    ext = done.manifest.external_dbs
    assert [e.path for e in ext] == [gp_name, "p"]
    assert ext[0].final_checkpoint_id == ext[1].final_checkpoint_id
    assert len(final_checkpoints(gp)) == 2  # p's and c's
    assert len(final_checkpoints(p)) == 1
    assert contents(c) == {**rows(b"g", 30), **rows(b"p", 30)}
    write(c, {b"g000": b"c"})
    assert contents(c)[b"g000"] == b"c"
    assert contents(p)[b"g000"] == b"v0" and contents(gp)[b"g000"] == b"v0"


def test_a_nested_entry_takes_its_final_checkpoint_only_from_the_parents_entry_of_the_same_database(b: str) -> None:
    """Step 5 for a nested entry whose source checkpoint is gone: the fallback is the parent's
    final checkpoint of an entry with the same source checkpoint *on the same database*. A
    checkpoint id can exist on several databases (one clone's final checkpoint id is shared by
    all its entries), so an entry of another database listed first, with the same source
    checkpoint and a final checkpoint whose id also exists on the grandparent at a later
    manifest, must not lend it: the grandchild's final checkpoint on gp pins the manifest p's
    does (CLONE-1), not that later one."""
    import attrs

    from slatedb.format.types import ExternalDb

    gp, other, p, c = f"{b}/gp", f"{b}/other", f"{b}/p", f"{b}/c"
    write(gp, rows(b"g", 10))
    write(other, rows(b"o", 3))
    clone(p, gp)
    (p_entry,) = latest(p).manifest.external_dbs
    rt = ProductionRuntime()
    trio.run(delete_checkpoint, ManifestStore(store(gp), rt), rt, p_entry.source_checkpoint_id)  # as if expired
    write(gp, rows(b"h", 10))  # gp's manifest moves on
    shared = uuid.uuid4()  # one id on both databases, as one clone's final checkpoint is

    async def never_expiring(url: str) -> int:
        return (await create_checkpoint(ManifestStore(store(url), rt), rt, CheckpointOptions(lifetime_s=None),
                                        checkpoint_id=shared)).manifest_id

    later = trio.run(never_expiring, gp)
    trio.run(never_expiring, other)
    p_final = next(cp_ for cp_ in final_checkpoints(gp) if cp_.id == p_entry.final_checkpoint_id)
    assert p_final.manifest_id != later
    cur = latest(p)
    wrong = ExternalDb("other", p_entry.source_checkpoint_id, shared, ())
    edited = attrs.evolve(cur.manifest, external_dbs=(wrong, *cur.manifest.external_dbs))
    trio.run(ManifestStore(store(p), rt).try_write, cur.id + 1, edited)
    done = clone(c, p)
    assert [e.path for e in done.manifest.external_dbs] == ["other", "gp", "p"]
    fin = next(cp_ for cp_ in latest(gp).manifest.checkpoints if cp_.id == done.manifest.external_dbs[1].final_checkpoint_id)
    assert fin.manifest_id == p_final.manifest_id  # CLONE-1: gp as p's entry has it, not at `later`
    assert contents(c) == rows(b"g", 10)


def test_create_clone_is_idempotent_on_a_finished_clone(b: str) -> None:
    parent, child = f"{b}/parent", f"{b}/clone"
    write(parent, rows(b"x", 5))
    first = clone(child, parent)
    rt = Recorder()
    again = clone(child, parent, runtime=rt)
    assert again == first
    assert [f["clone_step"] for k, f in rt.events if k == "clone"] == ["read", "done"]
    assert rt.events[-1][1]["resumed"] is True
    assert len(final_checkpoints(parent)) == 1
    src = first.manifest.external_dbs[-1].source_checkpoint_id
    assert clone(child, parent, src).id == first.id


def test_a_rerun_checks_every_final_checkpoint_past_entries_without_one(b: str) -> None:
    """A re-run on a finished clone checks the final checkpoint of every external entry; an
    entry that names none (another engine's, say) is passed over, not the end of the check."""
    import attrs

    from slatedb.format.manifest import encode_manifest
    from slatedb.format.types import ExternalDb
    from slatedb.manifest.store import manifest_key

    parent, child = f"{b}/parent", f"{b}/clone"
    write(parent, rows(b"x", 5))
    done = clone(child, parent)
    entry = done.manifest.external_dbs[-1]
    bare = ExternalDb("other", uuid.uuid4(), None, ())  # an entry without a final checkpoint, first
    store(child).put_now(manifest_key(done.id + 1), encode_manifest(
        attrs.evolve(done.manifest, external_dbs=(bare,) + done.manifest.external_dbs)))
    assert clone(child, parent).id == done.id + 1  # every final checkpoint still there
    trio.run(lambda: delete_checkpoint(ManifestStore(store(parent), ProductionRuntime()), ProductionRuntime(),
                                       entry.final_checkpoint_id))
    with pytest.raises(CloneMismatchError, match=f"final checkpoint {entry.final_checkpoint_id}"):
        clone(child, parent)


def test_typed_errors(b: str) -> None:
    parent, child, other = f"{b}/parent", f"{b}/clone", f"{b}/other"
    with pytest.raises(InvalidDbStateError, match="no database"):
        clone(child, parent)
    write(parent, rows(b"x", 5))
    write(other, rows(b"y", 5))
    with pytest.raises(InvalidArgumentError):
        clone(parent, parent)
    with pytest.raises(InvalidArgumentError, match="its own path"):
        clone(parent + "/", parent)  # the same path spelled another way
    with pytest.raises(InvalidArgumentError, match="'not-a-uuid' is not a UUID"):
        clone(child, parent, "not-a-uuid")
    with pytest.raises(CheckpointNotFoundError):
        clone(child, parent, uuid.uuid4())
    with pytest.raises(CheckpointNotFoundError):
        clone(child, parent, str(uuid.uuid4()))  # a UUID's text is one
    with pytest.raises(CloneMismatchError, match="not a clone"):
        clone(other, parent)  # a database of its own is there
    lapsed = checkpoint(parent, lifetime_s=60)
    later = ClockRuntime("clone", start_ms=ProductionRuntime().now_ms() + 120_000)  # its lifetime is over
    with pytest.raises(InvalidDbStateError, match=f"source checkpoint {lapsed} on .* has expired"):
        clone(child, parent, lapsed, runtime=later)
    done = clone(child, parent)
    with pytest.raises(CloneMismatchError, match="not a clone of .* at checkpoint <any>"):
        clone(child, other)
    wrong = uuid.uuid4()
    with pytest.raises(CloneMismatchError, match=f"at checkpoint {wrong}"):
        clone(child, parent, wrong)  # attached, but at another checkpoint: the error names the one asked for
    # An initialized clone whose final checkpoint was removed from the parent.
    trio.run(lambda: delete_checkpoint(ManifestStore(store(parent), ProductionRuntime()), ProductionRuntime(),
                                       done.manifest.external_dbs[-1].final_checkpoint_id))
    with pytest.raises(CloneMismatchError, match="final checkpoint"):
        clone(child, parent)
    assert issubclass(CloneMismatchError, InvalidDbStateError)


def test_an_unfinished_clone_does_not_open_as_a_writer(b: str) -> None:
    parent, child = f"{b}/parent", f"{b}/clone"
    write(parent, rows(b"x", 5))
    budget = Budget(None, applied=True)
    # Stop right after the clone's first manifest landed (step 4).
    rt = ProductionRuntime()

    async def partial():
        cs = CrashingStore(store(child), budget)
        ps = CrashingStore(store(parent), budget)
        budget.allowed = 2  # the ephemeral checkpoint's manifest, the clone manifest
        await create_clone(cs, ps, rt)

    with pytest.raises(Crash):
        trio.run(partial)
    assert latest(child).manifest.initialized is False
    # InvalidDbStateError, as the docs and DbReader say (issue 25 item 9: it was InvalidArgumentError)
    with pytest.raises(slatedb.errors.InvalidDbStateError, match="not initialized"):
        slatedb.Db.open(child, settings=NO_COMPACTOR)
    clone(child, parent)
    assert contents(child) == rows(b"x", 5)


def _world(b: str) -> tuple[str, str]:
    parent, child = f"{b}/parent", f"{b}/clone"
    write(parent, rows(b"l0-", 20))
    write_wal_only(parent, rows(b"wal-", 4))
    return parent, child


def _run(parent: str, child: str, budget: Budget) -> None:
    async def main():
        await create_clone(CrashingStore(store(child), budget), CrashingStore(store(parent), budget), ProductionRuntime())

    trio.run(main)


@pytest.mark.parametrize("applied", [False, True], ids=["before-call", "after-call"])
def test_a_crash_at_any_store_call_then_reruns_finish_the_clone(applied: bool) -> None:
    b = bucket()
    parent, child = _world(b)
    count = Budget(None, applied=applied)
    _run(parent, child, count)
    total = count.calls
    assert total >= 5, total  # checkpoint, manifest, final checkpoint, WAL copies, initialized
    expected = contents(child)
    assert expected == {**rows(b"l0-", 20), **rows(b"wal-", 4)}
    for n in range(total):
        b = bucket()
        parent, child = _world(b)
        with pytest.raises(Crash):
            _run(parent, child, Budget(n, applied=applied))
        for _ in range(3):  # re-run until it finishes (one re-run should do)
            try:
                _run(parent, child, Budget(None, applied=applied))
                break
            except Crash:  # pragma: no cover - would be a bug
                raise
        m = latest(child).manifest
        assert m.initialized, n
        finals = final_checkpoints(parent)
        assert [c.id for c in finals] == [m.external_dbs[-1].final_checkpoint_id], n
        assert contents(child) == expected, n


class AnotherRunCreatesFirst(CrashingStore):
    """The clone's store, where another run of the same clone (another process) makes and
    finishes the clone just before our run's manifest create (step 4)."""

    def __init__(self, inner, parent_url: str) -> None:
        super().__init__(inner, Budget(None, applied=True))
        self.parent_url = parent_url
        self.raced = False

    async def put(self, key, data, mode: PutMode = OVERWRITE):
        if key.startswith("manifest/") and not self.raced:
            self.raced = True
            await create_clone(self.inner, store(self.parent_url), ProductionRuntime())
        return await self.inner.put(key, data, mode)


def test_a_clone_whose_manifest_create_loses_to_another_run_goes_on_from_that_run(b: str) -> None:
    """Step 4's create is create-if-absent: losing it to a concurrent run of the same clone is
    not an error; the run starts over (step 1) and finds the clone that run finished."""
    parent, child = f"{b}/parent", f"{b}/clone"
    write(parent, rows(b"x", 5))
    rt = Recorder()
    got = trio.run(lambda: create_clone(AnotherRunCreatesFirst(store(child), parent), store(parent), rt))
    assert got == latest(child) and got.manifest.initialized
    steps = [f["clone_step"] for k, f in rt.events if k == "clone"]
    assert steps == ["read", "source_checkpoint", "manifest_conflict", "read", "done"]
    assert [f["attempt"] for k, f in rt.events if k == "clone" and f["clone_step"] == "read"] == [1, 2]
    assert rt.events[-1][1]["resumed"] is True
    assert len(final_checkpoints(parent)) == 1  # the other run's
    assert contents(child) == rows(b"x", 5)


class CrashAfterManifest(CrashingStore):
    """The clone's store, where the run dies right after its manifest create (step 4) landed."""

    def __init__(self, inner) -> None:
        super().__init__(inner, Budget(None, applied=True))

    async def put(self, key, data, mode: PutMode = OVERWRITE):
        out = await self.inner.put(key, data, mode)
        if key.startswith("manifest/"):
            raise Crash(key)
        return out


def test_a_resumed_clone_makes_the_final_checkpoints_past_an_entry_without_one(b: str) -> None:
    """Step 5 on a re-run: an unfinished clone manifest whose ``external_dbs`` start with an entry
    without a final checkpoint (another engine's, or a union source that contributed no SST) skips
    that entry, not the rest: the parent still gets the clone's final checkpoint (CLONE-1)."""
    import attrs

    from slatedb.format.types import ExternalDb

    parent, child = _world(b)
    with pytest.raises(Crash):
        trio.run(lambda: create_clone(CrashAfterManifest(store(child)), store(parent), ProductionRuntime()))
    cur = latest(child)
    assert not cur.manifest.initialized and final_checkpoints(parent) == []
    no_final = ExternalDb("elsewhere", uuid.uuid4(), None, ())
    edited = attrs.evolve(cur.manifest, external_dbs=(no_final, *cur.manifest.external_dbs))
    trio.run(ManifestStore(store(child), ProductionRuntime()).try_write, cur.id + 1, edited)
    clone(child, parent)
    m = latest(child).manifest
    assert m.initialized
    assert [c.id for c in final_checkpoints(parent)] == [m.external_dbs[-1].final_checkpoint_id]


def test_a_resumed_clone_whose_source_checkpoint_is_gone_fails_typed_and_stays_unfinished(b: str) -> None:
    """Step 5 on a re-run: when no candidate source checkpoint is left on the parent (the
    ephemeral one expired and GC removed it), the clone cannot pin its parent (CLONE-1): the run
    fails with CheckpointNotFoundError and the clone stays uninitialized, never finished unpinned."""
    from slatedb.checkpoint import delete_checkpoint

    parent, child = _world(b)
    with pytest.raises(Crash):
        trio.run(lambda: create_clone(CrashAfterManifest(store(child)), store(parent), ProductionRuntime()))
    source = latest(child).manifest.external_dbs[-1].source_checkpoint_id
    rt = ProductionRuntime()
    trio.run(delete_checkpoint, ManifestStore(store(parent), rt), rt, source)
    with pytest.raises(CheckpointNotFoundError):
        clone(child, parent)
    assert not latest(child).manifest.initialized and final_checkpoints(parent) == []
