"""A read-only image of one database root: the listing, the latest manifest and `.compactions`,
the boundary files, and every manifest the checks need (the latest, those active checkpoints pin,
those above the manifest boundary). Loaded manifest first, listing after, so that every object the
latest manifest references was written before the listing was taken (a writer uploads an SST
before the manifest that names it).

Nothing here writes: a ``file://`` URL whose directory is missing is refused before a store is
opened (opening a local store creates its directory)."""

from __future__ import annotations

import os
import urllib.parse

import attrs

from slatedb.errors import CorruptionError, ObjectNotFoundError
from slatedb.format.compactions import decode_compactions
from slatedb.format.layout import (
    COMPACTIONS_BOUNDARY_KEY,
    COMPACTIONS_DIR,
    COMPACTIONS_SUFFIX,
    MANIFEST_BOUNDARY_KEY,
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    compactions_key,
    is_db_key,
    manifest_key,
    parse_id,
)
from slatedb.format.manifest import decode_manifest_v2
from slatedb.format.types import CompactionsV1, ManifestV2
from slatedb.objstore.base import ObjectMeta, ObjectStore
from slatedb.redact import shown_url


class CheckAccessError(Exception):
    """The database cannot be read at all (no such location, no objects, a store error): exit 2."""


def local_dir_of(url: str) -> str | None:
    """The directory a ``file://`` URL names (None for other schemes)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme.lower() != "file":
        return None
    return urllib.parse.unquote(parsed.path)


def open_existing(store: ObjectStore, url: str) -> ObjectStore | None:
    """``store.open_url(url)`` unless it names a local directory that does not exist (opening it
    would create it)."""
    path = local_dir_of(url)
    if path is not None and not os.path.isdir(path):
        return None
    return store.open_url(url)


@attrs.define
class DbImage:
    store: ObjectStore
    url: str
    listing: dict[str, ObjectMeta]
    manifest_ids: list[int]
    latest_id: int
    latest: ManifestV2 | None
    latest_error: str | None
    manifests: dict[int, ManifestV2]
    manifest_errors: dict[int, str]
    compactions_ids: list[int]
    compactions: CompactionsV1 | None
    compactions_error: str | None
    boundaries: dict[str, int | None]  # key -> value, None when absent
    boundary_errors: dict[str, str]

    def exists(self, key: str) -> bool:
        return key in self.listing

    def boundary(self, key: str) -> int:
        return self.boundaries.get(key) or 0


async def _ids(store: ObjectStore, directory: str, suffix: str) -> list[int]:
    ids = [parse_id(m.key, directory, suffix) for m in await store.list(directory)]
    return sorted(i for i in ids if i is not None)


async def _boundary(store: ObjectStore, key: str) -> tuple[int | None, str | None]:
    try:
        got = await store.get(key)
    except ObjectNotFoundError:
        return None, None
    text = bytes(got.data).decode("ascii", "replace").strip()
    if not text.isdigit():
        return None, f"holds {bytes(got.data)[:40]!r}, not a decimal id"
    return int(text), None


async def read_manifest(store: ObjectStore, manifest_id: int) -> ManifestV2:
    key = manifest_key(manifest_id)
    return decode_manifest_v2(bytes((await store.get(key)).data), key)


async def load_image(store: ObjectStore, *, max_history: int = 4096) -> DbImage:
    """Read what the checks need (see the module docstring). Raises :class:`CheckAccessError`
    when the root holds no object at all."""
    manifest_ids = await _ids(store, MANIFEST_DIR, MANIFEST_SUFFIX)
    latest_id = manifest_ids[-1] if manifest_ids else 0
    latest = None
    latest_error = None
    manifests: dict[int, ManifestV2] = {}
    errors: dict[int, str] = {}
    if latest_id:
        try:
            latest = await read_manifest(store, latest_id)
            manifests[latest_id] = latest
        except CorruptionError as e:
            latest_error = errors[latest_id] = str(e)
    compactions_ids = await _ids(store, COMPACTIONS_DIR, COMPACTIONS_SUFFIX)
    compactions = None
    compactions_error = None
    if compactions_ids:
        key = compactions_key(compactions_ids[-1])
        try:
            compactions = decode_compactions(bytes((await store.get(key)).data), key)
        except CorruptionError as e:
            compactions_error = str(e)
        except ObjectNotFoundError:
            compactions_error = "listed, then gone"
    boundaries: dict[str, int | None] = {}
    boundary_errors: dict[str, str] = {}
    for key in (MANIFEST_BOUNDARY_KEY, COMPACTIONS_BOUNDARY_KEY):
        value, error = await _boundary(store, key)
        boundaries[key] = value
        if error:
            boundary_errors[key] = error
    listing = {m.key: m for m in await store.list("")}
    if not any(is_db_key(k) for k in listing):
        # Nothing of a database's layout: another database nested below the path, a user's
        # file there, are no database here (layout.is_db_key; destroy.md H1, DESTROY-8).
        raise CheckAccessError(f"no database at {shown_url(store.url)}: no objects" + (" of a database's layout" if listing else ""))
    image = DbImage(store, store.url, listing, manifest_ids, latest_id, latest, latest_error, manifests, errors,
                    compactions_ids, compactions, compactions_error, boundaries, boundary_errors)
    # Every manifest an active checkpoint pins, and the history above the boundary.
    wanted = set()
    if latest is not None:
        wanted |= {c.manifest_id for c in latest.checkpoints}
    floor = image.boundary(MANIFEST_BOUNDARY_KEY)
    wanted |= {i for i in manifest_ids if i > floor}
    for mid in sorted(wanted, reverse=True)[:max_history]:
        if mid in manifests or mid in errors or not image.exists(manifest_key(mid)):
            continue
        try:
            manifests[mid] = await read_manifest(store, mid)
        except CorruptionError as e:
            errors[mid] = str(e)
        except ObjectNotFoundError:
            pass  # collected by GC after the listing
    return image
