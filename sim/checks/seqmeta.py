"""SEQMETA-1 and SEQMETA-2 (spec/protocols/sequenced-metadata.md, RFC 004): no manifest id is
reported committed twice, and none without a fresh create of it by the process reporting it."""

from __future__ import annotations

from slatedb.manifest.store import MANIFEST_DIR, MANIFEST_SUFFIX, parse_id
from slatedb.objstore import CREATE_IF_ABSENT

from sim.world.invariants import InvariantViolation
from sim.world.trace import Event, Trace


class SeqmetaChecks:
    """SEQMETA-1 and SEQMETA-2 over the ``manifest/`` events of one world."""

    def __init__(self) -> None:
        self.committed: dict[int, str] = {}  # id -> process that reported it committed
        self.pending: dict[tuple[str, int], int] = {}  # (process, request n) -> manifest id
        self.max_created = 0  # highest manifest id ever created (successfully) so far
        self.fresh: dict[tuple[str, int], bool] = {}  # (process, id) -> its last create was fresh
        self.rejected = 0  # creates that succeeded but were refused by the boundary check
        self.last_create: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def attach(self, trace: Trace) -> "SeqmetaChecks":
        trace.listeners.append(self.on_event)
        return self

    def on_event(self, e: Event) -> None:
        f = e.f
        kind = e.kind
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind == "store.result" and f.get("outcome") == "transient-error":
            self.counts["fault.transient"] = self.counts.get("fault.transient", 0) + 1
        if kind == "store.put" and str(f.get("mode")) == str(CREATE_IF_ABSENT):
            i = parse_id(f["key"], MANIFEST_DIR, MANIFEST_SUFFIX)
            if i is not None:
                self.pending[(e.process, f["n"])] = i
        elif kind == "store.result":
            i = self.pending.pop((e.process, f["n"]), None)
            if i is not None and str(f["outcome"]).startswith("ok"):
                self.fresh[(e.process, i)] = self.max_created < i
                self.max_created = max(self.max_created, i)
        elif kind == "create" and f.get("outcome") in ("ok", "gone"):  # gone: maybe ours (step 3)
            i = parse_id(f["path"], MANIFEST_DIR, MANIFEST_SUFFIX)
            if i is not None:
                self.last_create[e.process] = i
        elif kind == "boundary_read":
            i = self.last_create.get(e.process)
            if i is not None and f["boundary"] >= i:
                self.rejected += 1
        elif kind == "commit" and f.get("ns") == "manifest":
            i = f["id"]
            owner = self.committed.get(i)
            if owner is not None:
                raise InvariantViolation("SEQMETA-1", e, f"manifest id {i} already reported committed to {owner}")
            self.committed[i] = e.process
            if not self.fresh.get((e.process, i), False):
                raise InvariantViolation(
                    "SEQMETA-2", e, f"manifest id {i} reported committed, but {e.process} made no fresh create of it")
