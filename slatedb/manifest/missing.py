"""Telling a new database from one whose manifests are lost (issue 16 item 3).

A path with no ``manifest/`` file is a new database only if it holds nothing else of one: WAL
objects, SSTs, ``.compactions`` files or GC boundary files left there mean its manifests were
lost or deleted, and creating a new database over them would orphan the SSTs (GC deletes them)
and replay stray WAL objects. Only SlateDB's own directories at the root count: another
database nested below the root, or a user's file, is not this database's data.

A concurrent first open is not a loss: a writer writes its first manifest before any WAL
object, so an opener that saw no manifest but then finds WAL objects lists ``manifest/`` again
and opens the database that appeared meanwhile.
"""

from __future__ import annotations

from slatedb.errors import ManifestsMissingError, NotFoundError
from slatedb.format.layout import LOAD_INTENTS_DIR, is_db_key  # a bulk load's open marker and intents (bulk-load.md)
from slatedb.objstore.retry import retry_transient

from .store import ManifestStore, StoredManifest, parse_id
from slatedb.redact import shown_url

#: A database's directories other than ``manifest/`` (gc/destroyed.py deletes the same ones).
DATA_DIRECTORIES = ("wal/", "compacted/", "compactions/", "gc/")

#: ``Db.open(create=...)``: create where nothing is (default), open only, or create anyway.
CREATE_MODES = ("if_missing", "never", "force")


def intent_sst_id(key: str) -> str | None:
    """The ULID (text) of the SST a bulk load's intent key names; None: not an intent (the
    load's open marker)."""
    name = key.rsplit("/", 1)[-1]
    parts = name.split("-")
    return parts[2] if len(parts) == 3 and len(parts[2]) == 26 else None


async def leftovers(manifests: ManifestStore) -> tuple[dict[str, int], list[str]]:
    """``({directory: object count}, a few example keys)`` of the data directories (non-empty only).

    SSTs a bulk load staged (named by its intents) are not leftovers: a first load into a new
    URL writes no manifest before its commit (LOAD-11), and a writer may open the database
    meanwhile (the load then commits into it); what a failed load left is its own clean-up's."""
    found: dict[str, int] = {}
    examples: list[str] = []
    runtime, store = manifests.runtime, manifests.store
    listed = {d: [m for m in await retry_transient(runtime, lambda d=d: store.list(d), what=f"list {d}") if is_db_key(m.key)]
              for d in DATA_DIRECTORIES}  # a database nested in one of them (<url>/compacted/x) is not ours (DESTROY-8)
    if listed["compacted/"]:
        # The intents after the SSTs: a load puts an SST's intent before the SST, so every staged
        # SST listed above is named by an intent listed now, unless its load deleted both
        # meanwhile (the SST first): an SST still unnamed is listed again.
        intents = await retry_transient(runtime, lambda: store.list(LOAD_INTENTS_DIR), what=f"list {LOAD_INTENTS_DIR}")
        staged = {f"compacted/{i}.sst" for i in map(intent_sst_id, (m.key for m in intents)) if i is not None}
        unnamed = [m for m in listed["compacted/"] if m.key not in staged]
        if unnamed:
            still = {m.key for m in await retry_transient(runtime, lambda: store.list("compacted/"),
                                                          what="list compacted/")}
            unnamed = [m for m in unnamed if m.key in still]
        listed["compacted/"] = unnamed
    for directory in DATA_DIRECTORIES:
        metas = listed[directory]
        if metas:
            found[directory] = len(metas)
            examples.append(min(m.key for m in metas))
    return found, examples[:3]


async def latest_or_refuse(manifests: ManifestStore, *, create: str = "if_missing") -> StoredManifest | None:
    """The latest manifest; None when the path holds no database and one may be created there.

    Raises :class:`ManifestsMissingError` when there is no manifest but data is left (unless
    ``create == "force"``), :class:`NotFoundError` when there is nothing and ``create == "never"``.
    """
    latest = await manifests.read_latest()
    if latest is not None or create == "force":
        return latest
    found, examples = await leftovers(manifests)
    if found:
        latest = await manifests.read_latest()  # a concurrent creator wrote its manifest first
        if latest is not None:
            return latest
        raise ManifestsMissingError(manifests.store.url, found, examples)
    if create == "never":
        raise NotFoundError(f'no database at {shown_url(manifests.store.url)} (no manifest; create="never")')
    return None


async def require_latest(manifests: ManifestStore) -> StoredManifest:
    """The latest manifest, for tools that never create (admin, CLI): :class:`NotFoundError`
    when the path holds nothing, :class:`ManifestsMissingError` when it holds data but no manifest."""
    latest = await latest_or_refuse(manifests, create="if_missing")
    if latest is None:
        raise NotFoundError(f"no database at {shown_url(manifests.store.url)} (no manifest)")
    return latest


async def initial_over_leftovers(manifests: ManifestStore) -> tuple[int, int]:
    """``create="force"``: ``(first manifest id, WAL id to replay after)`` of a new database at a
    path that may hold leftovers. Ids continue above the manifest boundary (ids at or below it
    would not commit) and the stray WAL objects are not replayed: the new database is empty, and
    GC removes the leftovers (its SSTs and WAL objects are referenced by nothing)."""
    boundary, _etag = await manifests.read_boundary()
    metas = await retry_transient(manifests.runtime, lambda: manifests.store.list("wal/"), what="list wal/")
    wal_ids = [i for i in (parse_id(m.key, "wal/", ".sst") for m in metas) if i is not None]
    return boundary + 1, max(wal_ids, default=0)
