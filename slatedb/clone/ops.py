"""RFC 000 "Clones": make a new database that shares its parent's SSTs (spec/protocols/clone.md).

:func:`create_clone` runs the numbered procedure of the spec page, one step at a time, and is
safe to re-run after a crash at any point: every step either leaves the store as it found it or
is recognised and skipped by the next run.

1. Read the clone manifest (may be absent) and the parent's latest manifest (must exist, be
   initialized and not destroyed).
2. A clone manifest that exists must name the parent (and the given checkpoint) in its
   ``external_dbs``; if it is initialized, every external database must still hold its final
   checkpoint, and the clone is done. If not initialized, resume at step 5.
3. The source checkpoint: the given one, or a new ephemeral one (300 s) on the parent's latest
   manifest, which also raises its ``wal_id_last_seen`` to the parent's last WAL object (as a
   DbReader's checkpoint does), so the clone gets every write durable at the call.
4. Write clone manifest 1 (create-if-absent) from the parent manifest ``M_p'`` the source
   checkpoint pins, with ``initialized = false`` and a new ``final_checkpoint_id`` on every
   ``external_dbs`` entry (the parent's own entries, re-expressed relative to the clone, then one
   for the parent). Lost the race: back to 1.
5. On each external database create the final checkpoint from the entry's source checkpoint
   (no expiry; an existing one with that id is kept, CLONE-1). A nested entry whose source
   checkpoint is gone falls back to the parent's own final checkpoint on that database, which
   pins the same manifest. No source left: :class:`CheckpointNotFoundError`.
6. Copy the parent WAL objects with ids in ``(replay_after_wal_id, wal_id_last_seen]`` of
   ``M_p'`` (CLONE-3; create-if-absent, so a re-run keeps what it copied).
7. Write the next clone manifest with ``initialized = true``; lost the race: back to 1.

Each step emits ``runtime.event("clone", clone_step=...)``.
"""

from __future__ import annotations

import uuid

import attrs
from ulid import ULID

from slatedb.checkpoint import (
    CheckpointOptions,
    create_checkpoint,
    find_checkpoint,
    is_expired,
)
from slatedb.lsm.paths import SstLocator
from slatedb.errors import (
    CheckpointNotFoundError,
    InvalidArgumentError,
    InvalidDbStateError,
    NotFoundError,
    ObjectNotFoundError,
)
from slatedb.format.types import ExternalDb, ManifestV2
from slatedb.manifest.edits import AddReaderCheckpoint, MarkInitialized
from slatedb.manifest.segments import refuse_segments
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import create_if_absent, retry_transient
from slatedb.objstore.url import relative_db_path
from slatedb.projection.ops import referenced_sst_ids
from slatedb.runtime import Runtime, probes, switches
from slatedb.wal.writer import list_wal_ids, wal_key
from slatedb.redact import shown_url

#: RFC 000: the ephemeral source checkpoint's lifetime, an upper bound for retrying a clone.
EPHEMERAL_CHECKPOINT_LIFETIME_S = 300


class CloneMismatchError(InvalidDbStateError):
    """A database already exists at the clone's path but is not a clone of this parent (at this
    checkpoint), or it is an initialized clone whose final checkpoint on an external database
    is gone (the official engine's ``DatabaseAlreadyExists``)."""


def _norm(url: str) -> str:
    return url.rstrip("/")


class _Dbs:
    """The stores of the databases a clone refers to, opened once and closed together."""

    def __init__(self, clone_store: ObjectStore, parent_store: ObjectStore, runtime: Runtime) -> None:
        self.clone_store = clone_store
        self.parent_store = parent_store
        self.runtime = runtime
        self.parent_path = relative_db_path(clone_store.url, parent_store.url)
        self._from_clone = SstLocator(clone_store, runtime)
        self._from_parent = SstLocator(parent_store, runtime)

    def is_parent(self, path: str) -> bool:
        return path == self.parent_path or _norm(path) == _norm(self.parent_store.url)

    async def of_clone_entry(self, path: str) -> ObjectStore:
        """The store an ``ExternalDb.path`` of the clone's manifest names."""
        if self.is_parent(path):
            return self.parent_store
        store = await self._from_clone.root_of(path)
        return self.parent_store if _norm(store.url) == _norm(self.parent_store.url) else store

    async def of_parent_entry(self, path: str) -> ObjectStore:
        """The store an ``ExternalDb.path`` of the parent's manifest names."""
        return await self._from_parent.root_of(path)

    async def aclose(self) -> None:
        await self._from_clone.aclose()
        await self._from_parent.aclose()


async def create_clone(clone_store: ObjectStore, parent_store: ObjectStore, runtime: Runtime,
                       parent_checkpoint: uuid.UUID | str | None = None) -> StoredManifest:
    """Make the database at ``clone_store`` a clone of the one at ``parent_store`` (RFC 000
    ``admin::create_clone``), from ``parent_checkpoint`` or from the parent's latest state.
    Returns the clone's initialized manifest. Re-running it on a finished clone of the same
    parent only checks it. Errors: :class:`InvalidDbStateError` (parent missing, uninitialized
    or destroyed), :class:`CloneMismatchError`, :class:`CheckpointNotFoundError` (the source
    checkpoint is gone)."""
    if parent_checkpoint is not None and not isinstance(parent_checkpoint, uuid.UUID):
        try:
            parent_checkpoint = uuid.UUID(str(parent_checkpoint))
        except ValueError:
            raise InvalidArgumentError(f"parent checkpoint {parent_checkpoint!r} is not a UUID") from None
    if _norm(clone_store.url) == _norm(parent_store.url):
        raise InvalidArgumentError(f"a clone needs its own path, different from its parent's ({shown_url(parent_store.url)})")
    dbs = _Dbs(clone_store, parent_store, runtime)
    try:
        return await _create_clone(dbs, parent_checkpoint)
    finally:
        await dbs.aclose()


async def _create_clone(dbs: _Dbs, parent_checkpoint: uuid.UUID | None) -> StoredManifest:
    rt = dbs.runtime
    clone_ms = ManifestStore(dbs.clone_store, rt)
    parent_ms = ManifestStore(dbs.parent_store, rt)
    attempt = 0
    while True:
        attempt += 1
        # Step 1.
        cur = await clone_ms.read_latest()
        parent = await parent_ms.read_latest()
        rt.event("clone", clone_step="read", attempt=attempt, clone_manifest=cur.id if cur else None,
                 parent_manifest=parent.id if parent else None)
        _check_parent(dbs, parent)
        assert parent is not None
        # Step 2.
        if cur is not None:
            _check_attached(dbs, cur.manifest, parent_checkpoint)
            if cur.manifest.initialized:
                await _check_final_checkpoints(dbs, cur.manifest)
                rt.event("clone", clone_step="done", manifest=cur.id, resumed=True)
                return cur
            rt.event("clone", clone_step="resume", manifest=cur.id)
            clone = cur
        else:
            # Step 3.
            source_id = parent_checkpoint
            if source_id is None:
                parent, source_id = await _ephemeral_checkpoint(dbs, parent_ms)
            source = find_checkpoint(parent.manifest, source_id)
            if source is None:
                raise CheckpointNotFoundError(source_id, f"the parent database at {shown_url(dbs.parent_store.url)}")
            if is_expired(source, rt.now_ms() // 1000):
                raise InvalidDbStateError(f"source checkpoint {source_id} on {shown_url(dbs.parent_store.url)} has expired")
            rt.event("clone", clone_step="source_checkpoint", id=str(source_id), manifest_id=source.manifest_id,
                     ephemeral=parent_checkpoint is None)
            base = parent if source.manifest_id == parent.id else await parent_ms.read(source.manifest_id)
            # Step 4.
            manifest = await _clone_manifest(dbs, base.manifest, source_id)
            created = await clone_ms.create_initial(manifest)
            if created is None:
                rt.event("clone", clone_step="manifest_conflict")
                continue
            rt.event("clone", clone_step="manifest_written", manifest=created.id,
                     external_dbs=len(manifest.external_dbs))
            clone = created
        # Step 5.
        await _ensure_final_checkpoints(dbs, clone.manifest)
        # Step 6.
        await _copy_wal(dbs, clone.manifest)
        # Step 7 (a concurrent run of this clone may have done it: then nothing is written).
        done = (await clone_ms.commit(MarkInitialized(), current=clone)).stored
        rt.event("clone", clone_step="done", manifest=done.id, resumed=False)
        return done


async def _ephemeral_checkpoint(dbs: _Dbs, parent_ms: ManifestStore) -> tuple[StoredManifest, uuid.UUID]:
    """Step 3 without a given checkpoint: RFC 000's procedure from the current manifest, plus
    (as a DbReader establishing its checkpoint does) ``wal_id_last_seen`` raised to the last WAL
    object in the parent's ``wal/``, so that the clone also gets the parent's durable writes not
    yet in L0. Returns the manifest written and the new checkpoint's id."""
    rt = dbs.runtime
    edit = AddReaderCheckpoint(rt.new_uuid(), lifetime_s=EPHEMERAL_CHECKPOINT_LIFETIME_S, refuse="clone the database")
    added = await parent_ms.commit(edit, list_wal=lambda: list_wal_ids(dbs.parent_store, rt))
    cp = added.result.checkpoint
    rt.event("checkpoint_create", id=str(cp.id), manifest_id=cp.manifest_id, expire_s=cp.checkpoint_expire_time_s)
    return added.stored, cp.id


def _check_parent(dbs: _Dbs, parent: StoredManifest | None) -> None:
    if parent is None:
        raise InvalidDbStateError(f"cannot clone {shown_url(dbs.parent_store.url)}: no database there (no manifest)")
    if not parent.manifest.initialized:
        raise InvalidDbStateError(f"cannot clone {shown_url(dbs.parent_store.url)}: it is not initialized (an unfinished clone)")
    if parent.manifest.destroyed_at_s:
        raise InvalidDbStateError(f"cannot clone {shown_url(dbs.parent_store.url)}: it was destroyed at {parent.manifest.destroyed_at_s} s")
    refuse_segments(parent.manifest, dbs.parent_store.url, "clone it")  # its segments' SSTs would dangle


def _check_attached(dbs: _Dbs, m: ManifestV2, checkpoint: uuid.UUID | None) -> None:
    """Step 2: the existing clone manifest must be a clone of this parent (at ``checkpoint``)."""
    if not m.external_dbs:
        raise CloneMismatchError(f"a database exists at {shown_url(dbs.clone_store.url)} and is not a clone")
    if not any(dbs.is_parent(e.path) and (checkpoint is None or e.source_checkpoint_id == checkpoint)
               for e in m.external_dbs):
        raise CloneMismatchError(
            f"a database exists at {shown_url(dbs.clone_store.url)} but is not a clone of {shown_url(dbs.parent_store.url)}"
            f" at checkpoint {checkpoint if checkpoint is not None else '<any>'}")


async def _check_final_checkpoints(dbs: _Dbs, m: ManifestV2) -> None:
    for e in m.external_dbs:
        if e.final_checkpoint_id is None:
            continue
        latest = await ManifestStore(await dbs.of_clone_entry(e.path), dbs.runtime).read_latest()
        if latest is None or find_checkpoint(latest.manifest, e.final_checkpoint_id) is None:
            raise CloneMismatchError(
                f"the clone at {shown_url(dbs.clone_store.url)} is initialized but its final checkpoint {e.final_checkpoint_id}"
                f" on the external database {e.path!r} is gone")


async def _clone_manifest(dbs: _Dbs, base: ManifestV2, source_id: uuid.UUID) -> ManifestV2:
    """Step 4: the clone's first manifest, from the parent manifest ``base`` (``M_p'``)."""
    rt = dbs.runtime
    final_id = rt.new_uuid()
    external: list[ExternalDb] = []
    tracked: set[ULID] = set()
    paths: set[str] = set()
    for e in base.external_dbs:  # a nested clone: the parent's own external databases
        store = await dbs.of_parent_entry(e.path)
        path = relative_db_path(dbs.clone_store.url, store.url)
        # One final checkpoint id for every entry (as upstream), except an entry whose database
        # an earlier entry already names (a union of shards taken at different checkpoints):
        # one checkpoint there could pin only one of their manifests (CLONE-1).
        entry_final_id = final_id
        if path in paths:
            rt.probe(probes.CLONE_REPEATED_DATABASE)
            if switches.CLONE_SHARES_FINAL_CHECKPOINT not in rt.bugs:  # catalogued bug: upstream's one id
                entry_final_id = rt.new_uuid()
        paths.add(path)
        external.append(ExternalDb(path=path, source_checkpoint_id=e.source_checkpoint_id,
                                   final_checkpoint_id=entry_final_id, sst_ids=e.sst_ids))
        tracked.update(e.sst_ids)
    owned = tuple(i for i in referenced_sst_ids(base) if i not in tracked)
    external.append(ExternalDb(path=dbs.parent_path, source_checkpoint_id=source_id,
                               final_checkpoint_id=final_id, sst_ids=owned))
    return attrs.evolve(
        base,
        manifest_id=0,
        external_dbs=tuple(external),
        initialized=False,
        writer_epoch=base.writer_epoch + 1,
        checkpoints=(),
        destroyed_at_s=0,
    )


async def _ensure_final_checkpoints(dbs: _Dbs, m: ManifestV2) -> None:
    """Step 5 (CLONE-1): the final checkpoint of every entry exists on its database."""
    rt = dbs.runtime
    for e in m.external_dbs:
        if e.final_checkpoint_id is None:
            continue
        store = await dbs.of_clone_entry(e.path)
        ms = ManifestStore(store, rt)
        latest = await ms.read_latest()
        if latest is None or not latest.manifest.initialized:
            raise InvalidDbStateError(f"external database {e.path!r} of the clone at {shown_url(dbs.clone_store.url)}"
                                      " has no initialized manifest")
        sources = [e.source_checkpoint_id]
        if not dbs.is_parent(e.path):
            # A nested entry copied from the parent: its source checkpoint may have been an
            # ephemeral one, long gone; the parent's final checkpoint on the same database pins
            # the same manifest (CLONE-1 of the parent's own clone).
            parent = await ManifestStore(dbs.parent_store, rt).read_latest()
            for pe in parent.manifest.external_dbs if parent is not None else ():
                if (pe.source_checkpoint_id == e.source_checkpoint_id and pe.final_checkpoint_id is not None
                        and _norm((await dbs.of_parent_entry(pe.path)).url) == _norm(store.url)):
                    sources.append(pe.final_checkpoint_id)
        for i, source in enumerate(sources):
            try:
                made = await create_checkpoint(ms, rt, CheckpointOptions(lifetime_s=None, source=source),
                                               checkpoint_id=e.final_checkpoint_id)
            except CheckpointNotFoundError:
                if i + 1 < len(sources):
                    continue
                raise CheckpointNotFoundError(
                    e.source_checkpoint_id,
                    f"the external database {e.path!r} (the clone's source checkpoint; an ephemeral one expires"
                    f" after {EPHEMERAL_CHECKPOINT_LIFETIME_S} s)") from None
            rt.event("clone", clone_step="final_checkpoint", path=e.path, id=str(made.id), manifest_id=made.manifest_id)
            break


async def _pinned_wal_range(dbs: _Dbs, m: ManifestV2) -> ManifestV2:
    """The WAL range the source checkpoint pins: ``m``'s own."""
    return m


async def _bug_every_parent_wal(dbs: _Dbs, m: ManifestV2) -> ManifestV2:
    """Catalogued bug ``clone-copies-all-wal`` (sim/scenarios/catalogue.py): every parent WAL object above the
    replay point, also those written after the checkpoint."""
    return attrs.evolve(m, wal_id_last_seen=max([m.wal_id_last_seen, *await list_wal_ids(dbs.parent_store, dbs.runtime)]))


async def _copy_wal(dbs: _Dbs, m: ManifestV2) -> None:
    """Step 6 (CLONE-3): parent WAL ids in ``(replay_after_wal_id, wal_id_last_seen]`` only."""
    rt = dbs.runtime
    copied = 0
    wal_range = _bug_every_parent_wal if switches.CLONE_COPIES_ALL_WAL in rt.bugs else _pinned_wal_range
    m = await wal_range(dbs, m)
    for wal_id in range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1):
        key = wal_key(wal_id)
        try:
            got = await retry_transient(rt, lambda: dbs.parent_store.get(key), what=f"get parent {key}")
        except ObjectNotFoundError:
            raise NotFoundError(f"parent WAL object {key} of {shown_url(dbs.parent_store.url)}, pinned by the clone's source"
                                " checkpoint, is missing") from None
        await create_if_absent(dbs.clone_store, rt, key, bytes(got.data))
        rt.event("clone", clone_step="copy_wal", id=wal_id)
        copied += 1
    rt.event("clone", clone_step="wal_copied", count=copied, first=m.replay_after_wal_id + 1, last=m.wal_id_last_seen)
