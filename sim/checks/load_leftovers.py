"""LOAD-10 in the ``load`` scenario (spec/protocols/bulk-load.md): a load that ended leaves
nothing but what its commit made visible (and LOAD-13, :class:`LiveUnionChecks`: no begin destroys a
union a live sharded load is making).

Judged at the end of a run, over the fault-free bucket, for every load whose end ran to
completion -- its driver's commit and clean-up (``cleanup_load``; for a sharded load the abort of
a refused commit, or ``collect_shards`` after its commit), or an operator's abort after the
driver crashed. A load whose driver died with nobody aborting it is left out (its objects are
collected once its plan is ``abandoned_after_s`` old, which no run reaches). Attempts still
running when the load ended (a losing speculative attempt of a sharded load) have finished by
then: each must have found the open marker gone and deleted what it wrote.

* no object under ``bulk-load/<load id>/`` (the open marker, the intents);
* a plain load: none of the SSTs its attempts staged, unless a manifest references it (its
  commit's: a compaction may have replaced it since, and what a compaction replaced is GC's to
  delete, not the load's -- load seed 1440);
* a sharded load: no shard database under ``shards/<load id>/`` that the latest manifest's
  ``external_dbs`` does not name.
"""

from __future__ import annotations

from typing import Callable, Iterable

from slatedb.format.types import ManifestV2
from slatedb.gc.retention import manifest_sst_ids

from sim.checks.load import Load
from sim.world.invariants import InvariantViolation
from sim.world.trace import Event, Trace


def leftovers(objects: dict, loads: Iterable[Load], latest: ManifestV2 | None,
              manifests: Iterable[ManifestV2] = ()) -> list[str]:
    """Every LOAD-10 violation, as ``"LOAD-10: what"`` messages; ``manifests``: every manifest
    left in the bucket (a staged SST any of them references is not a leftover)."""
    out: list[str] = []
    paths = [e.path.rstrip("/") for e in latest.external_dbs] if latest is not None else []
    every = [*([latest] if latest is not None else []), *manifests]
    referenced = {str(i) for m in every for i in manifest_sst_ids(m)}
    for ld in loads:
        if ld.load_id is None or not ld.ended:
            continue
        left = sorted(k for k in objects if k.startswith(f"bulk-load/{ld.load_id}/"))
        if left:
            out.append(f"LOAD-10: {ld.name} ended ({ld.outcome}) but {len(left)} of its objects are left, e.g. {left[0]}")
        if ld.sharded:
            shards = sorted({"/".join(k.split("/")[:3]) for k in objects if k.startswith(f"shards/{ld.load_id}/")})
            stray = [sh for sh in shards if not any(p == sh or p.endswith("/" + sh) for p in paths)]
            if stray:
                out.append(f"LOAD-10: {ld.name} ended ({ld.outcome}) but {len(stray)} shard database(s) no manifest "
                           f"names are left, e.g. {stray[0]}")
        else:
            stray = sorted(str(i) for i in ld.staged_ids if f"compacted/{i}.sst" in objects and str(i) not in referenced)
            if stray:
                out.append(f"LOAD-10: {ld.name} ended ({ld.outcome}) but {len(stray)} SST(s) its attempts staged are "
                           f"left unreferenced, e.g. compacted/{stray[0]}.sst")
    return out


class LiveUnionChecks:
    """LOAD-13 as it happens: a sharded load's begin that removes an uninitialized union as a
    dead driver's leftover (event ``shard_leftover_removed``) while another sharded load's driver
    is alive and committing (making that union), or once that load committed, destroyed a live
    load's union. ``loads``: the world's loads, read at each event."""

    def __init__(self, loads: Callable[[], Iterable[Load]]) -> None:
        self.loads = loads

    def attach(self, trace: Trace) -> "LiveUnionChecks":
        trace.listeners.append(self.on_event)
        return self

    def on_event(self, e: Event) -> None:
        if e.kind != "shard_leftover_removed":
            return
        live = [ld.name for ld in self.loads() if ld.sharded and ld.name != e.process
                and (ld.outcome == "committing" and not ld.done or ld.outcome == "committed")]
        if live:
            raise InvariantViolation("LOAD-13", e, f"{e.process}'s begin removed the uninitialized union (manifest "
                                                   f"{e.f.get('manifest_id')}) that {live[0]}'s live driver is making")
