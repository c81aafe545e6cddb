"""Administration of a database without opening a writer (trio functions; the CLI wraps them).

Compactions (RFC 002 "External Process Integration"): :func:`submit_compaction`,
:func:`read_compaction`, :func:`read_compactions`, :func:`list_compactions`,
:func:`run_compactor`. Checkpoints, GC, clones and destroy join here with their issue.

Every function takes an :class:`~slatedb.objstore.base.ObjectStore` of the database root.
"""

from __future__ import annotations

import json
from typing import Any

from ulid import ULID

from slatedb.compactor import CompactionSpec, Compactor, full_spec
from slatedb.compactor import submit_compaction as _submit
from slatedb.compactor.compactor import failed_reason_key
from slatedb.compactor.store import CompactionsStore, StoredCompactions
from slatedb.config import Settings
from slatedb.errors import InvalidArgumentError, NotFoundError, ObjectNotFoundError, SlateDBError  # noqa: F401
from slatedb.format.types import Compaction, TieredCompactionSpec
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import ObjectStore
from slatedb.runtime import Runtime
from slatedb.runtime.production import ProductionRuntime


def parse_request(request: Any) -> CompactionSpec | str:
    """A submission: ``"Full"``, ``{"Spec": {...}}`` or a bare spec (see ``CompactionSpec.from_json``).

    JSON text is accepted too. Returns ``"Full"`` or the spec."""
    if isinstance(request, CompactionSpec):
        return request
    if isinstance(request, str):
        if request.strip().strip('"').lower() == "full":
            return "Full"
        try:
            request = json.loads(request)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"compaction request is not JSON: {e.msg} (at {e.pos})") from e
        if isinstance(request, str):
            return parse_request(request)
    if isinstance(request, dict) and set(request) == {"Spec"}:
        request = request["Spec"]
    return CompactionSpec.from_json(request)


async def submit_compaction(store: ObjectStore, request: Any, runtime: Runtime | None = None) -> Compaction:
    """Record a compaction as ``Submitted``; the running compactor validates and runs it."""
    rt = runtime or ProductionRuntime("admin")
    spec = parse_request(request)
    if spec == "Full":
        latest = await ManifestStore(store, rt).read_latest()
        if latest is None:
            raise InvalidArgumentError("no database at this path (no manifest)")
        spec = full_spec(latest.manifest)
        if spec is None:
            raise InvalidArgumentError("nothing to compact: the database has no L0 SST and no sorted run")
    assert isinstance(spec, CompactionSpec)
    return await _submit(store, rt, spec)


async def read_compactions(store: ObjectStore, compactions_id: int | None = None, runtime: Runtime | None = None) -> StoredCompactions:
    cs = CompactionsStore(store, runtime or ProductionRuntime("admin"))
    if compactions_id is None:
        got = await cs.read_latest()
        if got is None:
            raise NotFoundError("the database has no .compactions file yet")
        return got
    try:
        return await cs.read(compactions_id)
    except ObjectNotFoundError:
        raise NotFoundError(f"compactions file {compactions_id} does not exist") from None


async def read_compaction(store: ObjectStore, compaction_id: str | ULID, compactions_id: int | None = None,
                          runtime: Runtime | None = None) -> Compaction:
    try:
        cid = compaction_id if isinstance(compaction_id, ULID) else ULID.from_str(compaction_id)
    except ValueError:
        raise InvalidArgumentError(f"compaction id {compaction_id!r} is not a ULID") from None
    stored = await read_compactions(store, compactions_id, runtime)
    found = stored.find(cid)
    if found is None and compactions_id is None:
        # Finished compactions are trimmed from later files (only the most recent one stays):
        # look back through the older files that GC has not removed yet, newest first.
        for older in reversed(await list_compactions(store, end=stored.id - 1, runtime=runtime)):
            found = older.find(cid)
            if found is not None:
                break
    if found is None:
        where = f"compactions file {stored.id}" if compactions_id is not None else "any compactions file"
        raise NotFoundError(f"no compaction {cid} in {where}")
    return found


async def list_compactions(store: ObjectStore, start: int | None = None, end: int | None = None,
                           runtime: Runtime | None = None) -> list[StoredCompactions]:
    """Every ``.compactions`` file with ``start <= id <= end`` (files GC removed are skipped)."""
    cs = CompactionsStore(store, runtime or ProductionRuntime("admin"))
    out = []
    for i in await cs.list_ids():
        if (start is None or i >= start) and (end is None or i <= end):
            try:
                out.append(await cs.read(i))
            except ObjectNotFoundError:
                continue
    return out


async def failure_reason(store: ObjectStore, compaction_id: ULID) -> str | None:
    try:
        got = await store.get(failed_reason_key(compaction_id))
    except ObjectNotFoundError:
        return None
    return json.loads(bytes(got.data))["reason"]


async def run_compactor(store: ObjectStore, settings: Settings | None = None, *, once: bool = False,
                        runtime: Runtime | None = None) -> Compactor:
    """Run a standalone compactor (it fences any other). ``once``: until there is nothing left
    to compact; otherwise until cancelled or fenced."""
    c = Compactor(store, runtime or ProductionRuntime("compactor"), settings or Settings())
    if once:
        await c.run_until_idle()
    else:
        await c.run()
    return c


# ---------------------------------------------------------------------------------------------
# JSON views (the CLI prints these)
# ---------------------------------------------------------------------------------------------


def compaction_json(c: Compaction, reason: str | None = None) -> dict:
    spec: dict[str, Any]
    if isinstance(c.spec, TieredCompactionSpec):
        spec = CompactionSpec.from_format(c.spec).to_json()
    else:
        spec = {"drain_segment": c.spec.segment.hex()}
    out = {"id": str(c.id), "status": c.status.name.title(), "spec": spec,
           "output_ssts": [str(s.id) for s in c.output_ssts]}
    if c.ctx is not None:
        out["retention_min_seq"] = c.ctx.retention_min_seq
    if reason is not None:
        out["reason"] = reason
    return out


def compactions_json(stored: StoredCompactions) -> dict:
    return {"id": stored.id, "compactor_epoch": stored.compactions.compactor_epoch,
            "recent_compactions": [compaction_json(c) for c in stored.compactions.recent_compactions]}
