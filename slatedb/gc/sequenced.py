"""GC of a sequenced-metadata namespace (``manifest/``, ``compactions/``): RFC 004's boundary
first, then the deletes (spec/protocols/sequenced-metadata.md, GC steps 1-3).

Order matters: the boundary is made durable at or above every id about to be deleted before the
first delete (BOUNDARY-1). A stalled writer whose create lands later on a freed id then reads a
boundary at or above it and does not report the write committed (BOUNDARY-3).
"""

from __future__ import annotations

from slatedb.config import GarbageCollectorDirectoryOptions
from slatedb.manifest.store import SequencedStore, parse_id
from slatedb.objstore.base import ObjectMeta
from slatedb.objstore.retry import retry_transient
from slatedb.runtime import switches

from .retention import desired_boundary

#: The boundary "in force" when boundary files are disabled: no limit (the pre-RFC 004 rules).
NO_BOUNDARY = 2**64


async def list_namespace(ns: SequencedStore) -> list[tuple[int, ObjectMeta]]:
    """``(id, meta)`` of every ``<dir><id:020><suffix>`` file, ascending (other names ignored)."""
    metas = await retry_transient(ns.runtime, lambda: ns.store.list(ns.directory), what=f"list {ns.directory}")
    files = [(parse_id(m.key, ns.directory, ns.suffix), m) for m in metas]
    return sorted(((i, m) for i, m in files if i is not None), key=lambda f: f[0])


async def settle_boundary(ns: SequencedStore, listing: list[tuple[int, ObjectMeta]], now_ms: int,
                          opts: GarbageCollectorDirectoryOptions, *, enabled: bool) -> tuple[int, bool, bool]:
    """Move ``gc/<ns>.boundary`` up to the desired value (RFC 004 "Advancing Boundaries") and
    return ``(boundary in force, whether this call moved it, whether it found no boundary file
    and moved it: a create, which the caller checks against a destroy, DESTROY-7)``. Only ids at
    or below the returned boundary may be deleted. A dry run moves nothing and returns what a
    real run would reach."""
    if not enabled:
        return NO_BOUNDARY, False, False
    desired = desired_boundary(listing, now_ms, opts.min_age)
    current, etag = await ns.read_boundary()
    if desired is None or desired <= current:
        return current, False, False
    if opts.dry_run:
        return desired, False, False
    advance = _bug_boundary_unwritten if switches.GC_DELETE_BEFORE_BOUNDARY in ns.runtime.bugs else _advance
    after, moved = await advance(ns, desired)
    return after, moved, moved and etag is None


async def _advance(ns: SequencedStore, desired: int) -> tuple[int, bool]:
    """Make the boundary durable before anything at or below it is deleted (BOUNDARY-1)."""
    after = await ns.advance_boundary(desired)
    assert after >= desired, (ns.namespace, after, desired)
    return after, True


async def _bug_boundary_unwritten(ns: SequencedStore, desired: int) -> tuple[int, bool]:
    """Catalogued bug ``gc-delete-before-boundary`` (sim/scenarios/catalogue.py): GC deletes up to the boundary
    it wants without first making that boundary durable."""
    return desired, False
