"""Destroy (RFC 000 "Deleting a Database", spec/protocols/destroy.md): soft destroy fences the
writer and marks the manifest; afterwards nothing opens. Hard destroy refuses while checkpoints
are active, releases a clone's final checkpoints on its parent, deletes the latest manifest last
and can be re-run after a crash."""

from __future__ import annotations

import uuid

import attrs

import pytest
import trio

import slatedb
from slatedb.checkpoint import CheckpointOptions, create_checkpoint
from slatedb.clone import create_clone_url
from slatedb.destroy import destroy, destroy_url
from slatedb.errors import (
    BoundaryVanishedError,
    FencedError,
    InvalidDbStateError,
    InvalidDeletionError,
    NotFoundError,
    SlateDBError,
)
from slatedb.format.types import WriterCheckpoint
from slatedb.manifest.edits import BumpWriterEpoch
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import OVERWRITE, PutMode
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import list_wal_ids

from .helpers import NO_COMPACTOR, Budget, Crash, CrashingStore, bucket, contents, keys_under, latest, store, write


def soft(url: str) -> None:
    trio.run(lambda: destroy_url(url, soft=True))


def hard(url: str) -> None:
    trio.run(lambda: destroy_url(url, soft=False))


def add_checkpoint(url: str, lifetime_s=None):
    rt = ProductionRuntime()
    return trio.run(lambda: create_checkpoint(ManifestStore(store(url), rt), rt, CheckpointOptions(lifetime_s=lifetime_s)))


@pytest.fixture
def url() -> str:
    u = f"{bucket()}/db"
    write(u, {b"a": b"1", b"b": b"2"})
    return u


def test_soft_destroy_fences_the_writer_and_marks_the_manifest(url: str) -> None:
    db = slatedb.Db.open(url, settings=NO_COMPACTOR)
    db.put(b"c", b"3", durable=True)
    before = latest(url).manifest
    assert any(isinstance(c.metadata, WriterCheckpoint) for c in before.checkpoints)
    wal_before = trio.run(list_wal_ids, store(url), ProductionRuntime())
    soft(url)
    m = latest(url).manifest
    assert m.destroyed_at_s > 0
    assert m.writer_epoch == before.writer_epoch + 1
    assert not any(isinstance(c.metadata, WriterCheckpoint) for c in m.checkpoints)
    wal_after = trio.run(list_wal_ids, store(url), ProductionRuntime())
    assert wal_after[-1] > wal_before[-1]
    assert store(url).get_now(f"wal/{wal_after[-1]:020d}.sst").data == b""  # our fence
    # The live writer is fenced: its next durable write fails.
    with pytest.raises(FencedError):
        db.put(b"d", b"4", durable=True)
    db.close()
    # Nothing opens any more; nothing was deleted.
    with pytest.raises(InvalidDbStateError, match="destroyed"):
        slatedb.Db.open(url, settings=NO_COMPACTOR)
    with pytest.raises(InvalidDbStateError, match="destroyed"):
        add_checkpoint(url)
    assert keys_under(url, "compacted/")
    # Idempotent: a second soft destroy keeps the first time.
    rt = Recorder()
    trio.run(lambda: destroy(store(url), rt, soft=True))
    assert latest(url).manifest.destroyed_at_s == m.destroyed_at_s
    assert rt.steps() == [{"destroy_step": "already", "soft": True, "destroyed_at_s": m.destroyed_at_s}]


def test_destroy_url_takes_soft_by_keyword_only(url: str) -> None:
    """``soft`` decides between marking and deleting everything: a bare ``True``/``False`` after
    the URL (or after ``destroy``'s store and runtime) is refused (``TypeError``, as Python
    refuses a keyword-only argument given by position), and nothing is destroyed."""
    rt = ProductionRuntime()
    for flag in (True, False):
        with pytest.raises(TypeError):
            trio.run(lambda: destroy_url(url, flag))  # type: ignore[misc]
        with pytest.raises(TypeError):
            trio.run(lambda: destroy(store(url), rt, flag))  # type: ignore[misc]
    assert latest(url).manifest.destroyed_at_s == 0 and keys_under(url, "compacted/")
    with slatedb.Db.open(url, settings=NO_COMPACTOR) as db:
        assert db.get(b"a") == b"1"


def test_a_soft_destroyed_parent_cannot_be_cloned(url: str) -> None:
    soft(url)
    with pytest.raises(InvalidDbStateError, match="destroyed"):
        trio.run(lambda: create_clone_url(url.replace("/db", "/clone"), url))


def test_hard_destroy_refuses_while_checkpoints_are_active(url: str) -> None:
    cp = add_checkpoint(url, lifetime_s=3600)
    objects = keys_under(url)
    rt = Recorder()
    with pytest.raises(InvalidDeletionError, match=str(cp.id)):
        trio.run(lambda: destroy(store(url), rt, soft=False))
    assert keys_under(url) == objects  # DESTROY-1: nothing deleted, not even marked
    assert [(s["destroy_step"], s["soft"]) for s in rt.steps()] == [("refused", False)]
    assert not latest(url).manifest.destroyed_at_s


def test_hard_destroy_ignores_writer_and_expired_checkpoints(url: str) -> None:
    class Later(ProductionRuntime):
        def now_ms(self):
            return super().now_ms() + 7200_000

    add_checkpoint(url, lifetime_s=60)  # expired two hours from now
    db = slatedb.Db.open(url, settings=NO_COMPACTOR)
    db.put(b"c", b"3", durable=True)
    db.abort()  # a crash: a clean close releases the writer checkpoint
    assert any(isinstance(c.metadata, WriterCheckpoint) for c in latest(url).manifest.checkpoints)
    trio.run(lambda: destroy(store(url), Later(), soft=False))
    assert keys_under(url) == []
    hard(url)  # an empty path: nothing to do


def test_hard_destroy_of_a_clone_releases_its_final_checkpoint(url: str) -> None:
    child = url.replace("/db", "/clone")
    trio.run(lambda: create_clone_url(child, url))
    write(child, {b"c": b"3"})
    with pytest.raises(InvalidDeletionError):
        hard(url)  # the parent: the clone's final checkpoint is active
    # The ephemeral source checkpoint (300 s) would block a hard destroy of the parent; not of the clone.
    rt = Recorder()
    trio.run(lambda: destroy(store(child), rt, soft=False))
    assert keys_under(child) == []
    steps = [s["destroy_step"] for s in rt.steps()]
    assert "release" in steps and steps[-1] == "deleted", steps
    assert len([s for s in rt.steps() if s["destroy_step"] == "release"]) == 1  # the parent's final checkpoint
    assert all(s["soft"] is False for s in rt.steps()), rt.steps()  # every step of a hard destroy says so
    finals = [c for c in latest(url).manifest.checkpoints
              if c.checkpoint_expire_time_s == 0 and not isinstance(c.metadata, WriterCheckpoint)]
    assert finals == []
    assert contents(url) == {b"a": b"1", b"b": b"2"}


def test_soft_destroy_of_a_clone_keeps_its_final_checkpoint_for_gc(url: str) -> None:
    child = url.replace("/db", "/clone")
    trio.run(lambda: create_clone_url(child, url))
    soft(child)
    finals = [c for c in latest(url).manifest.checkpoints
              if c.checkpoint_expire_time_s == 0 and not isinstance(c.metadata, WriterCheckpoint)]
    assert len(finals) == 1  # GC releases it after the grace period


@pytest.mark.parametrize("applied", [False, True], ids=["before-call", "after-call"])
def test_an_interrupted_hard_destroy_can_be_rerun(applied: bool) -> None:
    """A clone destroyed hard with a crash at its n-th mutating store call, for every n, then
    destroyed again: the latest manifest is the last object to go (DESTROY-4), so the re-run
    finds the database, releases the final checkpoint (missing_ok) and deletes the rest."""
    parent = f"{bucket()}/parent"
    write(parent, {b"p": b"1"})

    async def run(c: str, budget: Budget) -> None:
        await destroy(CrashingStore(store(c), budget), ProductionRuntime(), soft=False)

    n = 0
    while True:
        c = f"{bucket()}/c{n}"
        trio.run(lambda: create_clone_url(c, parent))
        write(c, {b"a": b"1"})
        try:
            trio.run(run, c, Budget(n, applied=applied))
            break  # n is past the last call: the destroy ran through
        except Crash:
            pass
        left = keys_under(c)
        assert left == [] or any(k.startswith("manifest/") for k in left), (n, left)
        trio.run(run, c, Budget(None, applied=applied))
        assert keys_under(c) == [], n
        n += 1
    assert n > 3
    finals = [x for x in latest(parent).manifest.checkpoints
              if x.checkpoint_expire_time_s == 0 and not isinstance(x.metadata, WriterCheckpoint)]
    assert finals == []  # every clone's final checkpoint released


def test_hard_destroy_of_a_non_database_path_refuses() -> None:
    """H1: objects of a database's layout but no manifest is not a database (a user's file
    there is no database's: a path holding only such is done, tests/clone/test_destroy_nested.py)."""
    u = f"{bucket()}/junk"
    store(u).put_now("some/file", b"x")
    store(u).put_now("compacted/01ARZ3NDEKTSV4RRFFQ69G5FAV.sst", b"x")
    store(u).put_now("wal/00000000000000000007.sst", b"")
    # The error counts them and names the first in key order (the same message every time).
    with pytest.raises(NotFoundError, match=r"holds 2 objects \(e.g. compacted/01ARZ3NDEKTSV4RRFFQ69G5FAV.sst\) but no"):
        hard(u)
    with pytest.raises(NotFoundError):
        soft(u)
    assert keys_under(u) == ["compacted/01ARZ3NDEKTSV4RRFFQ69G5FAV.sst", "some/file", "wal/00000000000000000007.sst"]
    assert issubclass(InvalidDeletionError, SlateDBError)


class Recorder(ProductionRuntime):
    """The production runtime, keeping the protocol events."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, dict]] = []

    def event(self, kind, **fields):
        self.events.append((kind, fields))

    def steps(self) -> list[dict]:
        return [f for k, f in self.events if k == "destroy"]


class WriterOpensAfterFence(CrashingStore):
    """``inner`` where a writer's open (an epoch bump) lands between a soft destroy's WAL fence
    and its mark: just before the first manifest write that follows a WAL write."""

    def __init__(self, inner, rt) -> None:
        super().__init__(inner, Budget(None, applied=True))
        self.rt = rt
        self.fenced = self.bumped = False

    async def put(self, key, data, mode: PutMode = OVERWRITE):
        if key.startswith("manifest/") and self.fenced and not self.bumped:
            self.bumped = True
            await ManifestStore(self.inner, self.rt).commit(BumpWriterEpoch(uuid.uuid4()))
        self.fenced |= key.startswith("wal/")
        return await self.inner.put(key, data, mode)


def test_soft_destroy_claims_again_when_a_writer_opens_between_fence_and_mark(url: str) -> None:
    """destroy.md step 3 lands only while the destroy's epoch is the latest: a writer that opened
    after the fence makes the mark fail fenced, and the destroy claims ownership again."""
    rt = Recorder()
    epoch0 = latest(url).manifest.writer_epoch
    trio.run(lambda: destroy(WriterOpensAfterFence(store(url), rt), rt, soft=True))
    m = latest(url).manifest
    assert m.destroyed_at_s > 0
    assert m.writer_epoch == epoch0 + 3  # our claim, the writer's open, our second claim
    assert [s["destroy_step"] for s in rt.steps()] == ["epoch", "fence", "epoch_moved", "epoch", "fence", "marked"]
    assert all(s["soft"] is True for s in rt.steps())
    assert not any(isinstance(c.metadata, WriterCheckpoint) for c in m.checkpoints)


class WriterOpensDuringFence(CrashingStore):
    """``inner`` where a writer's open (an epoch bump) lands right after a soft destroy's WAL fence
    object: the fence's epoch re-check finds the newer epoch (wal-fencing.md step 5)."""

    def __init__(self, inner, rt) -> None:
        super().__init__(inner, Budget(None, applied=True))
        self.rt = rt
        self.bumped = False

    async def put(self, key, data, mode: PutMode = OVERWRITE):
        out = await self.inner.put(key, data, mode)
        if key.startswith("wal/") and not self.bumped:
            self.bumped = True
            await ManifestStore(self.inner, self.rt).commit(BumpWriterEpoch(uuid.uuid4()))
        return out


def test_soft_destroy_claims_again_when_its_wal_fence_finds_a_newer_writer(url: str) -> None:
    rt = Recorder()
    epoch0 = latest(url).manifest.writer_epoch
    trio.run(lambda: destroy(WriterOpensDuringFence(store(url), rt), rt, soft=True))
    m = latest(url).manifest
    assert m.destroyed_at_s > 0 and m.writer_epoch == epoch0 + 3
    assert [s["destroy_step"] for s in rt.steps()] == ["epoch", "fenced", "epoch", "fence", "marked"]
    assert all(s["soft"] is True for s in rt.steps())


def test_hard_destroy_events_say_what_was_done(url: str) -> None:
    """The trace of a hard destroy (read by the simulator's oracles and the timeline): the
    object count of ``deleted`` is every object under the root, the latest manifest included;
    an empty path is ``already`` done, and every step is marked ``soft=False``."""
    objects = keys_under(url)
    rt = Recorder()
    trio.run(lambda: destroy(store(url), rt, soft=False))
    assert keys_under(url) == []
    # every object there was, plus the manifest that marked the database destroyed (step 2)
    assert rt.steps()[-1] == {"destroy_step": "deleted", "soft": False, "objects": len(objects) + 1}
    assert all(s["soft"] is False for s in rt.steps())
    rt = Recorder()
    trio.run(lambda: destroy(store(url), rt, soft=False))
    assert rt.steps() == [{"destroy_step": "already", "soft": False}]


class AnotherSoftDestroyFirst(CrashingStore):
    """``inner`` where another soft destroy runs to the end just before our first manifest write
    (our epoch bump): the bump then lands on a destroyed database."""

    def __init__(self, inner, rt) -> None:
        super().__init__(inner, Budget(None, applied=True))
        self.rt = rt
        self.raced = False

    async def put(self, key, data, mode: PutMode = OVERWRITE):
        if key.startswith("manifest/") and not self.raced:
            self.raced = True
            await destroy(self.inner, ProductionRuntime(), soft=True)
        return await self.inner.put(key, data, mode)


def test_two_racing_soft_destroys_both_succeed_and_keep_the_first_time(url: str) -> None:
    """The loser's claim (step 1) is applied again to the destroyed manifest: a destroyer's epoch
    bump is allowed there (``allow_destroyed``), and its mark finds the database marked."""
    rt = Recorder()
    trio.run(lambda: destroy(AnotherSoftDestroyFirst(store(url), rt), rt, soft=True))
    m = latest(url).manifest
    assert m.destroyed_at_s > 0
    assert [s["destroy_step"] for s in rt.steps()] == ["epoch", "fence", "marked"]
    assert rt.steps()[-1]["destroyed_at_s"] == m.destroyed_at_s
    assert not any(isinstance(c.metadata, WriterCheckpoint) for c in m.checkpoints)


def test_hard_destroy_releases_final_checkpoints_past_an_entry_without_one(url: str) -> None:
    """An ``external_dbs`` entry without a final checkpoint (a union source that contributed no
    SST, or one written by another engine) is skipped, not the end of the list (DESTROY-5)."""
    from slatedb.format.types import ExternalDb

    child = url.replace("/db", "/clone")
    trio.run(lambda: create_clone_url(child, url))
    cur = latest(child)
    no_final = ExternalDb("elsewhere", uuid.uuid4(), None, ())
    edited = attrs.evolve(cur.manifest, external_dbs=(no_final, *cur.manifest.external_dbs))
    trio.run(ManifestStore(store(child), ProductionRuntime()).try_write, cur.id + 1, edited)
    assert [c for c in latest(url).manifest.checkpoints if c.checkpoint_expire_time_s == 0
            and not isinstance(c.metadata, WriterCheckpoint)]  # the clone's final checkpoint
    hard(child)
    assert keys_under(child) == []
    assert [c for c in latest(url).manifest.checkpoints if c.checkpoint_expire_time_s == 0
            and not isinstance(c.metadata, WriterCheckpoint)] == []


def test_hard_destroy_releases_final_checkpoints_past_an_entry_whose_database_is_gone(url: str) -> None:
    """An ``external_dbs`` entry whose database has no manifest any more (destroyed and removed
    already) has no checkpoint left to release: skipped, not the end of the list (DESTROY-5)."""
    from slatedb.format.types import ExternalDb

    child = url.replace("/db", "/clone")
    trio.run(lambda: create_clone_url(child, url))
    cur = latest(child)
    gone = ExternalDb("gone", uuid.uuid4(), uuid.uuid4(), ())  # nothing was ever written at <bucket>/gone
    edited = attrs.evolve(cur.manifest, external_dbs=(gone, *cur.manifest.external_dbs))
    trio.run(ManifestStore(store(child), ProductionRuntime()).try_write, cur.id + 1, edited)
    hard(child)
    assert keys_under(child) == []
    assert [c for c in latest(url).manifest.checkpoints if c.checkpoint_expire_time_s == 0
            and not isinstance(c.metadata, WriterCheckpoint)] == []


class LandsDuringDeletes(CrashingStore):
    """``inner`` where, during the first ``lands`` deletes of a hard destroy (after its listing),
    another process's write lands: a GC's ``gc/manifest.boundary`` (destroy seed 3), then more."""

    def __init__(self, inner, lands: int) -> None:
        super().__init__(inner, Budget(None, applied=True))
        self.lands = lands
        self.deleted: list[str] = []

    async def delete(self, key):
        if self.lands > 0:
            self.inner.put_now("gc/manifest.boundary" if not self.deleted else f"wal/late-{self.lands}", b"7")
            self.lands -= 1
        self.deleted.append(key)
        return await self.inner.delete(key)


def test_hard_destroy_deletes_objects_that_land_after_its_listing(url: str) -> None:
    """DESTROY-4: a GC's boundary file created while the hard destroy deletes (after its listing)
    is found by the listing taken before the latest manifest goes, and deleted first; the latest
    manifest is the last delete and nothing is left (else: an object and no manifest, a path no
    later destroy accepts)."""
    rt = Recorder()
    s = LandsDuringDeletes(store(url), lands=2)
    trio.run(lambda: destroy(s, rt, soft=False))
    assert keys_under(url) == []
    assert s.deleted[-1].startswith("manifest/") and "gc/manifest.boundary" in s.deleted
    assert [f["objects"] for k, f in rt.events if k == "destroy_late_objects"] == [2]


def test_hard_destroy_keeps_the_latest_manifest_while_objects_keep_appearing(url: str) -> None:
    """A process that never stops writing (the caller's guarantee broken): after a bounded number
    of listings the destroy gives up with the latest manifest in place (DESTROY-4), and a re-run
    once the writes stop finishes the job."""
    s = LandsDuringDeletes(store(url), lands=1000)
    with pytest.raises(InvalidDbStateError, match="objects still appear"):
        trio.run(lambda: destroy(s, ProductionRuntime(), soft=False))
    left = keys_under(url)
    assert any(k.startswith("manifest/") for k in left) and not any(k.startswith("manifest/") for k in s.deleted[-3:])
    hard(url)
    assert keys_under(url) == []


class RemovedAfterFirstRead(CrashingStore):
    """``inner`` where the whole database is removed (GC finishing a soft destroy) between the
    hard destroy's first manifest read (step 1) and the read of its mark's CAS (step 2)."""

    def __init__(self, inner) -> None:
        super().__init__(inner, Budget(None, applied=True))
        self.listings = 0

    async def list(self, prefix=""):
        if prefix == "manifest/":
            self.listings += 1
            if self.listings == 2:
                for m in self.inner.list_now(""):
                    self.inner.delete_now(m.key)
        return await self.inner.list(prefix)


def test_hard_destroy_of_a_database_gc_removes_under_it_is_done(url: str) -> None:
    """Destroy seed 24 with the listing switch on: GC's step 5 removed the soft-destroyed database
    between the hard destroy's read and its mark: step 1 again (an empty path: done), not the
    commit's ``InvalidDbStateError`` ("no database", once a ``CorruptionError``)."""
    soft(url)
    rt = Recorder()
    trio.run(lambda: destroy(RemovedAfterFirstRead(store(url)), rt, soft=False))
    assert keys_under(url) == [] and rt.steps() == [{"destroy_step": "already", "soft": False}]


class BoundaryGoesAfterMark(CrashingStore):
    """``inner`` where, right after a soft destroy's mark (the first manifest after its WAL fence)
    lands, and before the destroy reads the GC boundary back: with ``everything``, every object of
    the database goes (a racing hard destroy, destroy seed 115); otherwise the boundary file and
    the mark go, and the manifest before it is the latest again (a store tampered with by hand)."""

    def __init__(self, inner, everything: bool) -> None:
        super().__init__(inner, Budget(None, applied=True))
        self.everything = everything
        self.fenced = self.done = False

    async def put(self, key, data, mode: PutMode = OVERWRITE):
        out = await self.inner.put(key, data, mode)
        self.fenced = self.fenced or key.startswith("wal/")
        if self.fenced and key.startswith("manifest/") and not self.done:
            self.done = True
            gone = [m.key for m in self.inner.list_now("")] if self.everything else ["gc/manifest.boundary", key]
            for k in gone:
                self.inner.delete_now(k)
        return out


@pytest.mark.parametrize("everything", [True, False], ids=["database-gone", "tampered"])
def test_a_soft_destroy_whose_boundary_vanishes_is_done_only_when_the_database_is_gone(url: str, everything) -> None:
    """destroy.md S4: a soft destroy whose commit finds the boundary file gone ends as already
    destroyed when no manifest is left (a racing hard destroy removed the database); when the
    latest manifest is there and not marked, the store was tampered with and the error stands."""
    store(url).put_now("gc/manifest.boundary", b"1")  # GC ran: the destroy's first commit sees the boundary
    rt = Recorder()

    def soft_destroy() -> None:
        trio.run(lambda: destroy(BoundaryGoesAfterMark(store(url), everything), rt, soft=True))

    if everything:
        soft_destroy()
        assert [s["destroy_step"] for s in rt.steps()] == ["epoch", "fence", "already"]
        assert all(s["soft"] is True for s in rt.steps())
        assert rt.steps()[-1]["destroyed_at_s"] == 0 and keys_under(url, "manifest/") == []
    else:
        with pytest.raises(BoundaryVanishedError):
            soft_destroy()
        assert not latest(url).manifest.destroyed_at_s
