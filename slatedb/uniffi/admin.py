"""``AdminBuilder`` / ``Admin`` with the official signatures over :mod:`slatedb.admin`: the
checkpoint calls, manifest and compaction reads and a GC pass. Each call runs the admin operation on a trio loop of its own
(a worker thread), so the caller's asyncio loop keeps running."""

from __future__ import annotations

import asyncio
from typing import Any

import trio

from slatedb import admin as _admin
from slatedb.checkpoint import CheckpointOptions as _CkptOptions
from slatedb.errors import CheckpointNotFoundError, InvalidDbStateError, NotFoundError
from slatedb.format.layout import is_db_key
from slatedb.objstore.url import resolve_store
from slatedb.redact import shown_url
from slatedb.uniffi.clone import CloneBuilder
from slatedb.uniffi.errors import Error, refused, translated
from slatedb.uniffi.manifest_view import checkpoint, compaction, versioned_compactions, versioned_manifest
from slatedb.uniffi.store import ObjectStore
from slatedb.uniffi.values import (
    Checkpoint, CheckpointCreateResult, CheckpointOptions, Compaction, CompactionSpec, CompactorStateView, SourceId,
    VersionedCompactions, VersionedManifest,
)


def _lowered_int(value: Any, name: str, lo: int, hi: int) -> int:
    """An integer argument checked as the official binding's generated code does (TypeError,
    ValueError), before any I/O."""
    try:
        value = value.__index__()
    except Exception:
        raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer") from None
    if not lo <= value < hi:
        raise ValueError(f"{name} requires {lo} <= value < {hi}")
    return value


#: The Unix seconds the official turns into a date (chrono's range, years -262143..262142):
#: ``get_sequence_for_timestamp`` outside it is ``Error.Invalid`` there (found by bisection).
_MIN_TIMESTAMP_S, _MAX_TIMESTAMP_S = -8334601228800, 8210266876799


def _lifetime_s(lifetime_ms: Any) -> float | None:
    """A checkpoint lifetime in ms as :mod:`slatedb.admin` takes it (seconds, positive). 0, which
    the official accepts (the checkpoint expires at once: its expiry is now), is taken as 1 ms:
    the expiry is stored in whole seconds rounded up, so the checkpoint expires within the
    second, as the official's (now, rounded down) does."""
    if lifetime_ms is None:
        return None
    if isinstance(lifetime_ms, int) and not isinstance(lifetime_ms, bool) and lifetime_ms == 0:
        return 0.001
    return lifetime_ms / 1000.0 if isinstance(lifetime_ms, (int, float)) and not isinstance(lifetime_ms, bool) else lifetime_ms


class Admin:
    """Administrative operations on the database at one path."""

    def __init__(self, url: str, options: dict[str, str], path: str = "", store: ObjectStore | None = None) -> None:
        self._url = url
        self._options = options
        self._path = path  # the path given to the builder (delete_db names objects under it)
        self._store = store  # the builder's store (clone sources are paths in it)

    async def _run(self, fn: Any, *args: Any) -> Any:
        url, options = self._url, self._options

        async def main() -> Any:
            store = resolve_store(url, options=options or None)
            try:
                return await fn(store, *args)
            finally:
                await store.aclose()

        with translated():
            return await asyncio.to_thread(trio.run, main)

    async def create_detached_checkpoint(self, options: CheckpointOptions) -> CheckpointCreateResult:
        if not isinstance(options, CheckpointOptions):
            raise TypeError(f"options must be a CheckpointOptions, not {type(options).__name__}")
        with translated():
            ours = _CkptOptions(lifetime_s=_lifetime_s(options.lifetime_ms),
                                source=None if options.source is None else _admin.as_checkpoint_id(options.source),
                                name=options.name)
        got = await self._run(_admin.create_checkpoint, ours)
        return CheckpointCreateResult(id=str(got.id), manifest_id=got.manifest_id)

    async def list_checkpoints(self, name_filter: str | None) -> list[Checkpoint]:
        """The checkpoints named ``name_filter`` (None: all). As in the official, ``""`` names the
        unnamed checkpoints (it compares the name, an unnamed one's being empty)."""
        if name_filter is not None and not isinstance(name_filter, str):
            raise TypeError(f"name_filter must be a str or None, not {type(name_filter).__name__}")
        if name_filter == "":
            got = [c for c in await self._run(_admin.list_checkpoints, None) if not c.name]
        else:
            got = await self._run(_admin.list_checkpoints, name_filter)
        return [checkpoint(c) for c in got]

    async def refresh_checkpoint(self, id: str, lifetime_ms: int | None) -> None:
        """Expiry = now + ``lifetime_ms`` (None: never; 0: at once, as in the official)."""
        with translated():
            lifetime_s = _lifetime_s(lifetime_ms)
        await self._run(_admin.refresh_checkpoint, id, lifetime_s)

    async def delete_checkpoint(self, id: str) -> None:
        """Idempotent, as in the official: deleting a checkpoint that is not there succeeds."""
        async def delete(store: Any, cid: str) -> None:
            try:
                await _admin.delete_checkpoint(store, cid)
            except CheckpointNotFoundError:
                pass
        await self._run(delete, id)

    async def run_gc_once(self, options: Any) -> None:
        if options is not None:
            raise refused("run_gc_once with GarbageCollectorOptions", "pass None: the database's GC settings apply")
        await self._run(lambda store: _admin.run_gc(store, None, True))

    async def read_manifest(self, id: int | None) -> VersionedManifest | None:
        """The manifest ``id``, or the latest (None when there is no such manifest)."""
        if id is not None and (isinstance(id, bool) or not isinstance(id, int) or id < 0):
            raise Error.Invalid(f"manifest id must be a non-negative int or None, not {id!r}")

        async def read(store: Any) -> Any:
            try:
                stored = await _admin.read_manifest(store, id)
            except NotFoundError:
                return None
            return versioned_manifest(stored.id, stored.manifest)
        return await self._run(read)

    async def list_manifests(self, _from: int | None, to: int | None) -> list[VersionedManifest]:
        """The manifests with ids in ``[_from, to)`` (None: open), by id."""
        async def read(store: Any) -> Any:
            infos = await _admin.list_manifests(store, _from, None if to is None else to - 1)
            out = []
            for info in infos:
                try:
                    stored = await _admin.read_manifest(store, info.id)
                except NotFoundError:
                    continue  # deleted by GC since the listing
                out.append(versioned_manifest(stored.id, stored.manifest))
            return out
        return await self._run(read)

    async def read_compactions(self, id: int | None) -> VersionedCompactions | None:
        """The ``.compactions`` file ``id``, or the latest (None when there is none)."""
        async def read(store: Any) -> Any:
            try:
                return versioned_compactions(await _admin.read_compactions(store, id))
            except NotFoundError:
                return None
        return await self._run(read)

    async def list_compactions(self, _from: int | None, to: int | None) -> list[VersionedCompactions]:
        """The ``.compactions`` files with ids in ``[_from, to)`` (None: open), by id."""
        async def read(store: Any) -> Any:
            got = await _admin.list_compactions(store, _from, None if to is None else to - 1)
            return [versioned_compactions(x) for x in got]
        return await self._run(read)

    async def read_compaction(self, compaction_id: str, compactions_id: int | None) -> Compaction | None:
        """One compaction by id, from the file ``compactions_id`` or the latest (None: not found)."""
        async def read(store: Any) -> Any:
            try:
                return compaction(await _admin.read_compaction(store, compaction_id, compactions_id))
            except NotFoundError:
                return None
        return await self._run(read)

    async def read_compactor_state_view(self) -> CompactorStateView:
        """The latest ``.compactions`` file (None when there is none) and the latest manifest."""
        async def read(store: Any) -> Any:
            try:
                cs = versioned_compactions(await _admin.read_compactions(store, None))
            except NotFoundError:
                cs = None
            m = await _admin.read_manifest(store, None)
            return CompactorStateView(compactions=cs, manifest=versioned_manifest(m.id, m.manifest))
        return await self._run(read)

    async def submit_compaction(self, spec: Any) -> Compaction:
        """Record ``spec`` (``CompactionSpec.TIERED``) as Submitted; the running compactor
        validates and runs it (an invalid one ends Failed). Segments are refused."""
        if not isinstance(spec, CompactionSpec):
            raise TypeError(f"spec must be a CompactionSpec, not {type(spec).__name__}")
        if spec.is_drain_segment() or spec.segment:
            raise refused("a compaction of a segment", "databases have one segment (segment=b'')")
        sources = []
        for src in spec.sources:
            if not isinstance(src, SourceId):
                raise TypeError(f"sources must be SourceId values, not {type(src).__name__}")
            sources.append({"Sst": src[0]} if src.is_sst_view() else {"SortedRun": src[0]})
        request = {"sources": sources, "destination": spec.destination}
        return compaction(await self._run(_admin.submit_compaction, request))

    async def delete_db(self, confirm: bool) -> list[str]:
        """The official ``delete_db``: with ``confirm`` false, the paths (``<path>/<key>``) that
        would be deleted; with ``confirm`` true, a hard destroy (:func:`slatedb.admin.destroy`,
        ``soft=False``: it releases the checkpoints the database pinned in its parents, then
        deletes every object of the database, the latest manifest last) and the paths deleted.
        Objects under the path that are not the database's (another database nested below it, a
        user's file: ``layout.is_db_key``, destroy.md DESTROY-8) are neither listed nor deleted.
        Idempotent: an empty path deletes nothing. A path holding objects but no manifest (any
        objects, as the official judges it: also one where only a nested database is left) is
        refused (``Error.Data``). Unlike the official, a database with an unexpired
        checkpoint other than its writer's is refused (``Error.Invalid``, DESTROY-1) rather than
        deleted under its holder, and no ``.deleting`` marker object is written or listed."""
        if not isinstance(confirm, bool):
            raise TypeError(f"confirm must be a bool, not {type(confirm).__name__}")
        prefix = self._path.strip("/")

        async def run(store: Any) -> list[str]:
            listed = sorted(m.key for m in await store.list(""))
            if listed and not any(k.startswith("manifest/") and k.endswith(".manifest") for k in listed):
                raise InvalidDbStateError(f"{shown_url(self._url)} holds objects but no SlateDB manifest: not a database")
            keys = [k for k in listed if is_db_key(k)]
            if confirm and keys:
                await _admin.destroy(store, False)
            return [f"{prefix}/{k}" if prefix else k for k in keys]

        return await self._run(run)

    async def get_sequence_for_timestamp(self, timestamp_secs: int, round_up: bool) -> Any:
        """The latest manifest's sequence tracker's entry for ``timestamp_secs`` (None when no
        manifest or no entry): :func:`slatedb.admin.get_sequence_for_timestamp`."""
        ts, up = _lowered_int(timestamp_secs, "i64", -2**63, 2**63), bool(round_up)
        if not _MIN_TIMESTAMP_S <= ts <= _MAX_TIMESTAMP_S:  # the official's chrono date range
            raise Error.Invalid(f"invalid timestamp seconds: {ts}")

        async def find(store: Any) -> Any:
            try:
                return await _admin.get_sequence_for_timestamp(store, ts, up)
            except NotFoundError:
                return None
        return await self._run(find)

    async def get_timestamp_for_sequence(self, seq: int, round_up: bool) -> Any:
        """The latest manifest's sequence tracker's timestamp (Unix seconds) for ``seq``:
        :func:`slatedb.admin.get_timestamp_for_sequence`."""
        q, up = _lowered_int(seq, "u64", 0, 2**64), bool(round_up)

        async def find(store: Any) -> Any:
            try:
                return await _admin.get_timestamp_for_sequence(store, q, up)
            except NotFoundError:
                return None
        return await self._run(find)

    def create_clone_builder_from_source(self, source: Any) -> Any:
        """A :class:`~slatedb.uniffi.clone.CloneBuilder` making the database at this admin's path
        from ``source`` (a ``CloneSourceSpec`` whose path is in the same store)."""
        if self._store is None:
            raise Error.Invalid("this Admin was not built by an AdminBuilder: it has no store to resolve sources in")
        return CloneBuilder(self._store, self._path, source)


class AdminBuilder:
    def __init__(self, path: str, object_store: ObjectStore) -> None:
        if not isinstance(object_store, ObjectStore):
            raise TypeError(f"object_store must be an ObjectStore, not {type(object_store).__name__}")
        self._url = object_store.url_of(path)
        self._options = object_store.options
        self._path = path
        self._store = object_store
        self._built = False

    def with_seed(self, seed: int) -> None:
        raise refused("with_seed", "ids come from the production runtime")

    def with_wal_object_store(self, wal_object_store: ObjectStore) -> None:
        raise refused("with_wal_object_store", "the WAL lives in the database's own store")

    def build(self) -> Admin:
        if self._built:
            raise Error.Invalid("this AdminBuilder was already built")
        self._built = True
        return Admin(self._url, self._options, self._path, self._store)
