"""``CloneSourceSpec`` and ``CloneBuilder`` with the official signatures over
:func:`slatedb.admin.create_clone_from_sources` (RFC 000 clones, projection and union).

As probed on the official 0.17 wheel: ``Admin(path).create_clone_builder_from_source(spec)``
makes the database at the admin's ``path`` (``with_clone_path`` names another) from ``spec``'s
database (a path in the same store, at its ``checkpoint`` or its current state, restricted to its
``projection_range``); ``with_source`` adds sources (a union); ``with_projection_range`` restricts
the whole result. One source without a range is a clone, one with a range a projection, several
a union (docs/rescaling.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import trio

from slatedb import admin as _admin
from slatedb.projection.create import CloneSource
from slatedb.projection.ranges import KeyRange as _Range
from slatedb.uniffi.convert import bounds_of, half_open
from slatedb.uniffi.errors import Error, refused, translated
from slatedb.uniffi.store import ObjectStore
from slatedb.uniffi.values import KeyRange


class CloneSourceSpec:
    """One source of a clone: the database at ``path`` (in the builder's store), at
    ``checkpoint`` (a checkpoint id, or None: its current state), within ``projection_range``."""

    def __init__(self, *, path: str, checkpoint: str | None, projection_range: KeyRange | None) -> None:
        self.path = path
        self.checkpoint = checkpoint
        self.projection_range = projection_range

    def __str__(self) -> str:
        return "CloneSourceSpec(path={}, checkpoint={}, projection_range={})".format(
            self.path, self.checkpoint, self.projection_range)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CloneSourceSpec) and self.path == other.path
                and self.checkpoint == other.checkpoint and self.projection_range == other.projection_range)


def _spec(source: Any) -> CloneSourceSpec:
    if not isinstance(source, CloneSourceSpec):
        raise TypeError(f"source must be a CloneSourceSpec, not {type(source).__name__}")
    if not isinstance(source.path, str):
        raise TypeError(f"CloneSourceSpec.path must be a str, not {type(source.path).__name__}")
    if source.checkpoint is not None and not isinstance(source.checkpoint, str):
        raise TypeError(f"CloneSourceSpec.checkpoint must be a str or None, not {type(source.checkpoint).__name__}")
    if source.projection_range is not None:
        bounds_of(source.projection_range)  # an invalid range is refused at the call
    return source


class CloneBuilder:
    """Made by :meth:`slatedb.uniffi.Admin.create_clone_builder_from_source`; ``build()`` runs the
    clone once (safe to re-run after a crash, as ours is)."""

    def __init__(self, store: ObjectStore, clone_path: str, source: Any) -> None:
        self._store = store
        self._dest_store = store
        self._clone_path = clone_path
        self._sources = [_spec(source)]
        self._range: KeyRange | None = None
        self._built = False

    def with_clone_path(self, clone_path: str) -> None:
        if not isinstance(clone_path, str):
            raise TypeError(f"clone_path must be a str, not {type(clone_path).__name__}")
        self._clone_path = clone_path

    def with_object_store(self, object_store: ObjectStore) -> None:
        """The store the clone is made in (the sources stay in the admin's store)."""
        if not isinstance(object_store, ObjectStore):
            raise TypeError(f"object_store must be an ObjectStore, not {type(object_store).__name__}")
        self._dest_store = object_store

    def with_projection_range(self, projection_range: KeyRange | None) -> None:
        if projection_range is not None:
            bounds_of(projection_range)
        self._range = projection_range

    def with_source(self, source: CloneSourceSpec) -> None:
        self._sources.append(_spec(source))

    def with_seed(self, seed: int) -> None:
        raise refused("CloneBuilder.with_seed", "ids come from the production runtime")

    def with_wal_object_store(self, wal_object_store: ObjectStore) -> None:
        raise refused("CloneBuilder.with_wal_object_store", "the WAL lives in the database's own store")

    def _sources_ours(self) -> list[CloneSource]:
        final = None if self._range is None else bounds_of(self._range)
        out = []
        for spec in self._sources:
            b = None if spec.projection_range is None else bounds_of(spec.projection_range)
            if final is not None:
                b = final if b is None else b.intersect(final)
            key_range = None
            if b is not None:
                if b.is_empty():
                    raise Error.Invalid(f"the projection of {spec.path} is empty")
                lo, hi = half_open(b)
                key_range = None if lo is None and hi is None else _Range(lo, hi)
            with translated():
                out.append(CloneSource(self._store.url_of(spec.path), spec.checkpoint, key_range))
        return out

    async def build(self) -> None:
        if self._built:
            raise Error.Invalid("this CloneBuilder was already built")
        self._built = True
        sources = self._sources_ours()
        dest = self._dest_store.url_of(self._clone_path)

        async def main() -> None:
            await _admin.create_clone_from_sources(dest, sources)

        with translated():
            await asyncio.to_thread(trio.run, main)
