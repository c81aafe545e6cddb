"""``slatedb check`` at the end of every simulated run (issue 26 item 2): the stored structure of
each database a world made must satisfy the invariants the checker reads from objects
(:mod:`slatedb.checker`: GC-4, CKPT-2/3, FENCE-1, READ-2, BOUNDARY-1/4, FENCE-4, CFENCE-3, DUR-2, DUR-5,
COMPACT-1/4, GC-3, CLONE-1/2, PROJ-5/6, DESTROY-4). The same code users run on their databases, on
a fault-free view of the world's bucket at the world's final time; a finding fails the seed with
its invariant id. The trace oracles (:mod:`sim.checks.writer`, :mod:`sim.checks.gc`, ...) see
each step as it happens; this sees what the steps left, including damage no step's oracle
watches (an orphan checkpoint pins data for ever, a missing WAL object no reader reached yet).

The rescale scenario's reference check (CLONE-2) is this check too (:func:`references_resolve`).
Every scenario that leaves a database runs it at its end: db (unless a bit was flipped on
purpose), takeover, seqmeta (manifests and boundary only), compactor, gc, destroy (what is
left, if anything) and rescale. The store scenario makes no database (it drives the object
store's contract alone), so there is nothing to check.
"""

from __future__ import annotations

from typing import Callable, Iterable

from slatedb.checker import CheckAccessError, CheckReport, check_store
from slatedb.objstore.memory import MemoryBucket, MemoryRegistry, MemoryStore

SIM_BUCKET = "sim"


def world_store(bucket: MemoryBucket, name: str, clock_ms: Callable[[], int]) -> MemoryStore:
    """A fault-free store over ``memory://sim/<name>`` (``""``: the bucket's root) whose
    ``open_url`` reaches the other databases of the same world (a clone's parent)."""
    registry = MemoryRegistry()
    registry.adopt(SIM_BUCKET, bucket)
    root = f"{name.strip('/')}/" if name else ""
    url = f"memory://{SIM_BUCKET}" + (f"/{name.strip('/')}" if name else "")
    return MemoryStore(bucket, clock_ms, root=root, url=url, registry=registry)


async def check_world(bucket: MemoryBucket, names: Iterable[str], now_ms: int, *, deep: bool = False,
                      allow: frozenset[str] = frozenset()) -> dict[str, CheckReport]:
    """Check each database ``names`` of the world (a name with no objects is skipped: never made,
    or destroyed) and raise ``AssertionError`` naming the first finding's invariant."""
    reports: dict[str, CheckReport] = {}
    for name in names:
        store = world_store(bucket, name, lambda: now_ms)
        try:
            report = await check_store(store, deep=deep, now_ms=now_ms)
        except CheckAccessError:
            continue
        reports[name] = report
        found = [f for f in report.findings if f.invariant not in allow]
        if found:
            raise AssertionError(f"{found[0].invariant}: slatedb check at the end of the run, database "
                                 f"{store.url}: " + "; ".join(f.line() for f in found[:3]))
    return reports


async def references_resolve(bucket: MemoryBucket, name: str, now_ms: int) -> None:
    """CLONE-2 / GC-4: every SST the latest manifest of ``name`` references exists where it
    lives (its own root, or an external database's). Raises ``AssertionError`` naming it."""
    await check_world(bucket, [name], now_ms, allow=frozenset(
        i for i in _ALL if i not in ("CLONE-2", "GC-4")))


async def final_checkpoints_pin(bucket: MemoryBucket, name: str, now_ms: int) -> None:
    """CLONE-1: the final checkpoint of every ``external_dbs`` entry of ``name``'s latest manifest
    exists on its database and pins a manifest that lists every SST the entry reads. Raises
    ``AssertionError`` naming it."""
    await check_world(bucket, [name], now_ms, allow=frozenset(i for i in _ALL if i != "CLONE-1"))


_ALL = ("DESTROY-4", "GC-2", "GC-4", "CKPT-2", "CKPT-3", "FENCE-1", "READ-2", "BOUNDARY-1", "BOUNDARY-4", "FENCE-4",
        "CFENCE-3", "DUR-2", "DUR-5", "COMPACT-1", "COMPACT-4", "GC-3", "CLONE-1", "CLONE-2", "PROJ-5", "PROJ-6")
