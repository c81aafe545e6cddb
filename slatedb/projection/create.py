"""Creating a database from one or several sources, each at its own checkpoint and projected
onto its own key range (RFC 000 "Manifest Projection and Union": "cloning from multiple
source databases is the same as clone"; the official ``CloneBuilder`` / ``CloneSourceSpec``).
spec/protocols/projection-union.md "Creating the database", steps C1-C7:

C1. Check the request: at least one source (:class:`UnionSetEmptyError`), no path twice
    (:class:`DuplicateCloneSourceError`), the destination none of them
    (:class:`IdenticalClonePathsError`). One source without a range is a plain clone
    (slatedb/clone/ops.py, which also copies the WAL).
C2. Read the destination manifest. If it exists it must have ``external_dbs`` and name no
    source at another checkpoint than the one asked for (:class:`CloneMismatchError`); if it is
    initialized, every final checkpoint must still exist and we are done; if not, resume at C6.
C3. Dry run on each source's pinned manifest (the given checkpoint's, else the latest): every
    source initialized and not destroyed; no WAL rows after its replay point
    (:class:`CloneSourceWithWalError`); project; union (overlaps: :class:`InvalidUnionError`).
    Every refusal happens here, before any checkpoint exists, so a refused request leaves
    nothing on a source.
C4. Pin every source without a given checkpoint with an ephemeral checkpoint (300 s, as
    clone step 3), then redo C3 on the pinned manifests (a source may have moved); a refusal
    now deletes the checkpoints this call made. A crash leaves them to expire (GC removes
    expired checkpoints).
C5. Write destination manifest 1 (create-if-absent; taken: back to C2): one source with a range
    = its projection as a clone (``writer_epoch`` + 1); several = :func:`union` (epochs 0).
    ``initialized = false``; every ``external_dbs`` entry with a new ``final_checkpoint_id``; a
    result that references no SST names every source with an empty entry (else a re-run could
    not tell its own empty result from another database at C2).
C6. On every external database (recursively: nested entries are in the list too) create the
    final checkpoint from the entry's source checkpoint (no expiry, fixed id: idempotent,
    CLONE-1); a nested entry whose source checkpoint is gone falls back to a source's own final
    checkpoint on that database with the same source checkpoint (same manifest).
C7. Write the next destination manifest with ``initialized = true`` (taken: back to C2); delete
    the ephemeral checkpoints this call made (the final ones pin the same manifests).

Each step emits ``runtime.event("union", union_step=...)``.
"""

from __future__ import annotations

import uuid
from typing import Sequence

import attrs

from slatedb.checkpoint import CheckpointOptions, create_checkpoint, delete_checkpoint, find_checkpoint, is_expired
from slatedb.clone.ops import EPHEMERAL_CHECKPOINT_LIFETIME_S, CloneMismatchError, create_clone
from slatedb.lsm.paths import SstLocator
from slatedb.errors import (
    CheckpointNotFoundError,
    CloneSourceWithWalError,
    DuplicateCloneSourceError,
    IdenticalClonePathsError,
    InvalidArgumentError,
    InvalidDbStateError,
    ObjectNotFoundError,
    SlateDBError,
    UnionSetEmptyError,
)
from slatedb.format.types import ExternalDb, ManifestV2
from slatedb.format.wal_sst import decode_wal_sst
from slatedb.manifest.edits import MarkInitialized
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore import resolve_store
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.objstore.url import relative_db_path
from slatedb.runtime import Runtime, probes, switches
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import list_wal_ids, wal_key

from .ops import UnionSource, project, referencing, union
from .ranges import KeyRange, as_bounds, format_range, parse_range
from slatedb.redact import shown_url

#: Catalogued bug (sim/scenarios/catalogue.py): the ephemeral source checkpoints are deleted before the
#: destination is initialized (its final checkpoints may not exist yet).
BUG_RELEASE_EARLY = switches.UNION_RELEASES_SOURCE_CHECKPOINT_EARLY


@attrs.frozen
class SourceSpec:
    """One source: an open store, the checkpoint to read it at (None: its latest state,
    pinned by an ephemeral checkpoint) and the key range to keep (None: every key)."""

    store: ObjectStore
    checkpoint: uuid.UUID | None = None
    key_range: KeyRange | None = None


def _norm(url: str) -> str:
    return url.rstrip("/")


def _as_uuid(value: object) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgumentError(f"source checkpoint {value!r} is not a UUID") from None


def check_request(dest_url: str, specs: Sequence[SourceSpec]) -> list[SourceSpec]:
    """C1 (also used by the admin API before it opens anything)."""
    if not specs:
        raise UnionSetEmptyError()
    seen: set[str] = set()
    out = []
    for s in specs:
        url = _norm(s.store.url)
        if url == _norm(dest_url):
            raise IdenticalClonePathsError(dest_url)
        if url in seen:
            raise DuplicateCloneSourceError(s.store.url)
        seen.add(url)
        if s.key_range is not None:
            as_bounds(s.key_range)
        out.append(attrs.evolve(s, checkpoint=_as_uuid(s.checkpoint)))
    return out


async def create_database(dest: ObjectStore, specs: Sequence[SourceSpec], runtime: Runtime) -> StoredManifest:
    """Make the database at ``dest`` from ``specs`` (C1-C7); safe to re-run after a crash at
    any store call. Returns its initialized manifest."""
    specs = check_request(dest.url, specs)
    if len(specs) == 1 and specs[0].key_range is None:
        return await create_clone(dest, specs[0].store, runtime, specs[0].checkpoint)
    job = _Job(dest, specs, runtime)
    try:
        return await job.run()
    finally:
        await job.aclose()


class _Job:
    def __init__(self, dest: ObjectStore, specs: list[SourceSpec], runtime: Runtime) -> None:
        self.dest = dest
        self.specs = specs
        self.rt = runtime
        self.dest_ms = ManifestStore(dest, runtime)
        self.dest_locator = SstLocator(dest, runtime)
        self.locators = [SstLocator(s.store, runtime) for s in specs]
        self.paths = [relative_db_path(dest.url, s.store.url) for s in specs]
        self.ephemeral: list[tuple[int, uuid.UUID]] = []  # (source index, checkpoint id) made by this call

    async def aclose(self) -> None:
        await self.dest_locator.aclose()
        for loc in self.locators:
            await loc.aclose()

    def step(self, step: str, **fields) -> None:
        self.rt.event("union", union_step=step, dest=self.dest.url, **fields)

    async def run(self) -> StoredManifest:
        attempt = 0
        while True:
            attempt += 1
            # C2.
            cur = await self.dest_ms.read_latest()
            self.step("read", attempt=attempt, manifest=cur.id if cur else None)
            if cur is not None:
                self._check_attached(cur.manifest)
                if cur.manifest.initialized:
                    await self._check_finals(cur.manifest)
                    self.step("done", manifest=cur.id, resumed=True)
                    return cur
                self.rt.probe(probes.UNION_RESUMED)
                self.step("resume", manifest=cur.id)
                made = cur
            else:
                # C3 (dry run, nothing written), then C4.
                await self._build([s.checkpoint for s in self.specs])
                try:
                    pins = await self._pin()
                    manifest = await self._build(pins)
                except SlateDBError:
                    await self._release()
                    raise
                # C5.
                made = await self.dest_ms.create_initial(manifest)
                if made is None:
                    self.step("manifest_conflict")
                    await self._release()
                    continue
                self.step("manifest_written", manifest=made.id, external_dbs=len(manifest.external_dbs),
                           l0=len(manifest.l0), runs=len(manifest.compacted), last_l0_seq=manifest.last_l0_seq)
                if switches.UNION_RELEASES_SOURCE_CHECKPOINT_EARLY in self.rt.bugs:  # catalogued bug: released before C6/C7
                    await self._release()
            # C6.
            await self._ensure_finals(made.manifest)
            # C7.
            committed = await self.dest_ms.commit(MarkInitialized(), current=made)
            if not committed.written:  # another run initialized it (or ours landed reported failed)
                self.step("initialize_conflict", manifest=made.id + 1)
                continue
            done = committed.stored
            self.step("done", manifest=done.id, resumed=False)
            await self._release()
            return done

    # -- C2 ---------------------------------------------------------------------------------

    def _check_attached(self, m: ManifestV2) -> None:
        if not m.external_dbs:
            raise CloneMismatchError(f"a database exists at {shown_url(self.dest.url)} and was not made from other databases")
        for s, path in zip(self.specs, self.paths):
            for e in m.external_dbs:
                if self._names(e.path, s.store) and s.checkpoint is not None and e.source_checkpoint_id != s.checkpoint:
                    raise CloneMismatchError(f"the database at {shown_url(self.dest.url)} was made from {shown_url(s.store.url)} at checkpoint"
                                             f" {e.source_checkpoint_id}, not {s.checkpoint}")

    def _names(self, path: str, store: ObjectStore) -> bool:
        return path == relative_db_path(self.dest.url, store.url) or _norm(path) == _norm(store.url)

    async def _check_finals(self, m: ManifestV2) -> None:
        for e in m.external_dbs:
            if e.final_checkpoint_id is None:
                continue
            latest = await ManifestStore(await self.dest_locator.root_of(e.path), self.rt).read_latest()
            if latest is None or find_checkpoint(latest.manifest, e.final_checkpoint_id) is None:
                raise CloneMismatchError(
                    f"the database at {shown_url(self.dest.url)} is initialized but its final checkpoint {e.final_checkpoint_id}"
                    f" on {e.path!r} is gone")

    # -- C3 / C4 / C5 -------------------------------------------------------------------------

    async def _source_manifest(self, i: int, checkpoint: uuid.UUID | None) -> tuple[ManifestV2, uuid.UUID | None]:
        s = self.specs[i]
        ms = ManifestStore(s.store, self.rt)
        latest = await ms.read_latest()
        if latest is None:
            raise InvalidDbStateError(f"cannot use {shown_url(s.store.url)} as a source: no database there (no manifest)")
        if not latest.manifest.initialized:
            raise InvalidDbStateError(f"cannot use {shown_url(s.store.url)} as a source: it is not initialized")
        if latest.manifest.destroyed_at_s:
            raise InvalidDbStateError(f"cannot use {shown_url(s.store.url)} as a source: it was destroyed")
        if checkpoint is None:
            return latest.manifest, None
        cp = find_checkpoint(latest.manifest, checkpoint)
        if cp is None:
            raise CheckpointNotFoundError(checkpoint, f"the source database at {shown_url(s.store.url)}")
        if is_expired(cp, self.rt.now_ms() // 1000):
            raise InvalidDbStateError(f"source checkpoint {checkpoint} on {shown_url(s.store.url)} has expired")
        base = latest if cp.manifest_id == latest.id else await ms.read(cp.manifest_id)
        return base.manifest, checkpoint

    async def _wal_rows(self, i: int, m: ManifestV2, pinned: bool) -> bool:
        """Does the source hold WAL rows after its replay point? With a given checkpoint, those in
        its range ``(replay_after_wal_id, wal_id_last_seen]``; otherwise any WAL object after the
        replay point (durable writes not yet in L0 would be missing from the result)."""
        store = self.specs[i].store
        ids = [w for w in await list_wal_ids(store, self.rt) if w > m.replay_after_wal_id]
        if pinned:
            ids = [w for w in ids if w <= m.wal_id_last_seen]
        for w in ids:
            key = wal_key(w)
            try:
                got = await retry_transient(self.rt, lambda: store.get(key), what=f"get {key}")
            except ObjectNotFoundError:
                continue
            if decode_wal_sst(bytes(got.data), f"{shown_url(store.url)}/{key}").rows:
                return True
        return False

    async def _reexpress(self, i: int, m: ManifestV2) -> ManifestV2:
        """``m``'s ``external_dbs`` paths as the destination names those databases."""
        out = []
        for e in m.external_dbs:
            store = await self.locators[i].root_of(e.path)
            out.append(attrs.evolve(e, path=relative_db_path(self.dest.url, store.url)))
        return attrs.evolve(m, external_dbs=tuple(out))

    async def _build(self, pins: Sequence[uuid.UUID | None]) -> ManifestV2:
        """The new manifest from the sources at ``pins`` (only reads: C3 runs it before pinning
        to refuse a bad request without writing anything)."""
        bases = []
        with_wal = []
        for i, pin in enumerate(pins):
            m, _ = await self._source_manifest(i, pin)
            if await self._wal_rows(i, m, pinned=self.specs[i].checkpoint is not None):
                with_wal.append(self.paths[i])
            bases.append(await self._reexpress(i, m))
        if with_wal:
            raise CloneSourceWithWalError(with_wal)
        checkpoint_of = [p if p is not None else uuid.UUID(int=0) for p in pins]
        if len(self.specs) == 1:
            s = self.specs[0]
            m = project(referencing(bases[0], self.paths[0], checkpoint_of[0]), s.key_range, self.rt.bugs)
            m = attrs.evolve(m, manifest_id=0, initialized=False, writer_epoch=m.writer_epoch + 1, checkpoints=(),
                             destroyed_at_s=0, replay_after_wal_id=0, wal_id_last_seen=0,
                             external_dbs=tuple(attrs.evolve(e, final_checkpoint_id=self.rt.new_uuid())
                                                for e in m.external_dbs))
        else:
            sources = [UnionSource(project(b, s.key_range, self.rt.bugs) if s.key_range is not None else b,
                                   path, cp)
                       for b, s, path, cp in zip(bases, self.specs, self.paths, checkpoint_of)]
            m = union(sources, new_uuid=self.rt.new_uuid, new_ulid=self.rt.new_ulid, bugs=self.rt.bugs)
        if not m.external_dbs:
            # C5: a result that references no SST (project/union drop empty entries) still names
            # its sources, with empty entries: a re-run after a crash recognises its own result
            # by them (C2); the official wheel keeps such an entry for a single-source
            # projection. GC detaches them once the database is initialized (checkpoints-gc.md
            # step 9).
            m = attrs.evolve(m, external_dbs=tuple(
                ExternalDb(path=path, source_checkpoint_id=cp, final_checkpoint_id=self.rt.new_uuid())
                for path, cp in zip(self.paths, checkpoint_of)))
        return m

    async def _pin(self) -> list[uuid.UUID]:
        pins = []
        for i, s in enumerate(self.specs):
            if s.checkpoint is not None:
                pins.append(s.checkpoint)
                continue
            made = await _ephemeral_checkpoint(s.store, self.rt)
            self.ephemeral.append((i, made))
            self.step("source_checkpoint", source=s.store.url, id=str(made), ephemeral=True)
            pins.append(made)
        return pins

    async def _release(self) -> None:
        """Delete the ephemeral checkpoints this call made (missing ones are fine)."""
        for i, cid in self.ephemeral:
            await delete_checkpoint(ManifestStore(self.specs[i].store, self.rt), self.rt, cid, missing_ok=True)
            self.step("source_checkpoint_released", source=self.specs[i].store.url, id=str(cid))
        self.ephemeral.clear()

    # -- C6 ---------------------------------------------------------------------------------

    async def _ensure_finals(self, m: ManifestV2) -> None:
        for e in m.external_dbs:
            if e.final_checkpoint_id is None:
                continue
            store = await self.dest_locator.root_of(e.path)
            ms = ManifestStore(store, self.rt)
            candidates = [e.source_checkpoint_id]
            for i, s in enumerate(self.specs):  # fallbacks: a source's own final checkpoint there
                src = await ManifestStore(s.store, self.rt).read_latest()
                for se in src.manifest.external_dbs if src is not None else ():
                    if se.source_checkpoint_id == e.source_checkpoint_id and se.final_checkpoint_id is not None \
                            and _norm((await self.locators[i].root_of(se.path)).url) == _norm(store.url):
                        candidates.append(se.final_checkpoint_id)
            for k, source in enumerate(candidates):
                try:
                    made = await create_checkpoint(ms, self.rt, CheckpointOptions(lifetime_s=None, source=source),
                                                   checkpoint_id=e.final_checkpoint_id)
                except CheckpointNotFoundError:
                    if k + 1 < len(candidates):
                        continue
                    raise CheckpointNotFoundError(
                        e.source_checkpoint_id,
                        f"the external database {e.path!r} (a source checkpoint; an ephemeral one expires after"
                        f" {EPHEMERAL_CHECKPOINT_LIFETIME_S} s)") from None
                self.step("final_checkpoint", path=e.path, id=str(made.id), manifest_id=made.manifest_id)
                break


async def _ephemeral_checkpoint(store: ObjectStore, rt: Runtime) -> uuid.UUID:
    """C4: a 300 s checkpoint on the source's current manifest."""
    made = await create_checkpoint(ManifestStore(store, rt), rt,
                                   CheckpointOptions(lifetime_s=EPHEMERAL_CHECKPOINT_LIFETIME_S))
    return made.id



@attrs.frozen
class CloneSource:
    """One source named by URL (the official ``CloneSourceSpec(path, checkpoint,
    projection_range)``); :func:`parse_clone_source` reads the command line's form, which
    ``str()`` writes: ``parse_clone_source(str(s)) == s``. A URL that form would misread (a ``:``
    in its path followed by text holding ``..``, an ``@`` in its last segment, a range after a URL
    without ``/``) is refused here (``InvalidArgumentError``): write such a ``:`` or ``@`` as
    ``%3A`` or ``%40``, the same path to the store (a URL's path is percent-decoded)."""

    url: str
    checkpoint: uuid.UUID | None = attrs.field(default=None, converter=_as_uuid)
    key_range: KeyRange | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url:
            raise InvalidArgumentError(f"a source's url must be a non-empty string, not {shown_url(self.url)!r}")
        # The text form with a stand-in range: what a parse of str(self) takes for the URL.
        text = (self.url + (f"@{self.checkpoint}" if self.checkpoint else "")
                + (":.." if self.key_range is not None else ""))
        try:
            url, checkpoint, _ = _split_source(text)
        except InvalidArgumentError:
            url, checkpoint = None, None
        if (url, checkpoint) != (self.url, self.checkpoint):
            raise InvalidArgumentError(
                f"source URL {shown_url(self.url)!r} cannot be written as URL[@CHECKPOINT][:RANGE] and read back (the "
                f"text {str(self)!r} does not read back as this source): write a ':' or '@' in its path as %3A or %40 "
                "(the same path)" + ("; a URL with a range needs a '/'" if "/" not in self.url else ""))

    def __str__(self) -> str:
        rng = ""
        if self.key_range is not None:
            # A ':' in a key is written \x3a: the range follows the text's last ':'.
            rng = ":" + (format_range(self.key_range).replace(":", "\\x3a") if isinstance(self.key_range, KeyRange)
                         else format_range(self.key_range))
        return self.url + (f"@{self.checkpoint}" if self.checkpoint else "") + rng


def _split_source(text: str) -> tuple[str, uuid.UUID | None, KeyRange | None]:
    """:func:`parse_clone_source`'s reading of ``text``: (url, checkpoint, key range)."""
    if not isinstance(text, str) or not text:
        raise InvalidArgumentError(f"a source is URL[@CHECKPOINT][:RANGE], not {text!r}")
    rest, key_range = text, None
    colon = text.rfind(":")
    if colon > 0 and ".." in text[colon + 1:] and "/" in text[:colon]:
        rest, key_range = text[:colon], parse_range(text[colon + 1:])
    checkpoint = None
    at = rest.rfind("@")
    if at > 0:
        try:
            checkpoint = uuid.UUID(rest[at + 1:])
            rest = rest[:at]
        except ValueError:
            if "/" not in rest[at + 1:]:
                raise InvalidArgumentError(f"{rest[at + 1:]!r} in source {text!r} is not a checkpoint UUID") from None
    return rest, checkpoint, key_range


def parse_clone_source(text: str) -> CloneSource:
    """``URL[@CHECKPOINT][:RANGE]``: the range follows the last ``:`` when what follows holds
    ``..`` (write a ``:`` inside a key as ``\\x3a``); the checkpoint (a UUID) follows the last
    ``@`` before it. The inverse of ``str(CloneSource)``."""
    return CloneSource(*_split_source(text))


async def create_database_url(dest_url: str, sources: Sequence[CloneSource | str], runtime: Runtime | None = None
                              ) -> StoredManifest:
    """:func:`create_database` with every database named by URL (``memory://``, ``file:///``,
    ``s3://``); sources may be given as ``URL[@CHECKPOINT][:RANGE]`` strings."""
    srcs = [parse_clone_source(s) if isinstance(s, str) else s for s in sources]
    if not srcs:
        raise UnionSetEmptyError()
    if runtime is None:
        runtime = ProductionRuntime()
    dest = resolve_store(dest_url, clock_ms=runtime.now_ms)
    opened: list[ObjectStore] = []
    try:
        for s in srcs:
            opened.append(dest.open_url(s.url))
        specs = [SourceSpec(st, s.checkpoint, s.key_range) for st, s in zip(opened, srcs)]
        return await create_database(dest, specs, runtime)
    finally:
        for st in opened:
            await st.aclose()
        await dest.aclose()


__all__ = ["BUG_RELEASE_EARLY", "CloneSource", "SourceSpec", "check_request", "create_database", "create_database_url",
           "parse_clone_source"]
