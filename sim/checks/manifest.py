"""Manifest-level fencing, checked at the moment every ``.manifest`` lands in the simulated store.

WAL fencing (FENCE-1..4, DUR-1) is checked on WAL objects; these are the same rules for the
manifest, where a fenced writer or compactor that skips its epoch check would otherwise surface,
if at all, as an unrelated "no such object" dozens of seeds later:

* **FENCE-5** (wal-fencing.md): a manifest that carries a writer's L0 flush (a new L0 SST view,
  or ``replay_after_wal_id`` / ``last_l0_seq`` moving) lands only if no manifest below it carries
  a writer epoch above the epoch of the process that wrote it (``writer_epoch`` event);
* **CFENCE-1** (compaction.md), in every scenario: a manifest that carries a compaction commit
  (L0 SSTs removed or sorted runs changed, the compactor epoch unchanged) lands only if no
  manifest below it carries a compactor epoch above the epoch its process announced
  (``compactor_started``);
* **TRACK-1 / TRACK-2** (writer.md), in every scenario: a landed manifest's sequence tracker is
  in order and records no seq above its ``last_l0_seq``, and keeps every pair of the manifest
  below it (appended only; halved past its capacity).

Manifest ids are a sequence (create-if-absent of ``N+1`` after reading ``N``), so "a newer epoch
was durable when this update landed" is "a manifest with a smaller id carries it". The checker
watches the store's own events (``store.put`` of a ``manifest/`` key, then its ``store.result``,
recorded when the request applies) and reads the landed bytes from the bucket at that moment.
Several database roots (``parent/``, ``clone/``) are told apart by the key's prefix.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Callable

from slatedb.errors import CorruptionError
from slatedb.format import seq_tracker
from slatedb.format.manifest import decode_manifest_v2
from slatedb.format.types import ManifestV2

from sim.world.invariants import InvariantViolation
from sim.world.trace import Event, Trace

_KEY = re.compile(r"^(?P<root>.*?)manifest/(?P<id>[0-9]{20})\.manifest$")


def _writer_change(prev: ManifestV2 | None, m: ManifestV2) -> bool:
    if prev is None:
        return False
    new_l0 = {v.id for v in m.l0} - {v.id for v in prev.l0}
    return bool(new_l0) or m.replay_after_wal_id > prev.replay_after_wal_id or m.last_l0_seq > prev.last_l0_seq


def _compactor_change(prev: ManifestV2 | None, m: ManifestV2) -> bool:
    if prev is None or m.compactor_epoch != prev.compactor_epoch:
        return False  # a compactor's startup manifest carries its own (new) epoch
    removed_l0 = {v.id for v in prev.l0} - {v.id for v in m.l0}
    return bool(removed_l0) or prev.compacted != m.compacted


class ManifestFenceChecks:
    """FENCE-5 and CFENCE-1 (see the module docstring). ``read(key)`` returns the bytes stored
    under ``key`` now (None when absent)."""

    def __init__(self, read: Callable[[str], bytes | None]) -> None:
        self.read = read
        self.pending: dict[tuple[str, int], str] = {}
        self.writer_epoch: dict[str, int] = {}  # process -> its writer epoch
        self.compactor_epoch: dict[str, int] = {}  # process -> its compactor's epoch
        self.manifests: dict[str, dict[int, ManifestV2]] = defaultdict(dict)  # root -> id -> landed
        self.counts: dict[str, int] = defaultdict(int)

    def attach(self, trace: Trace) -> "ManifestFenceChecks":
        trace.listeners.append(self.on_event)
        return self

    def on_event(self, e: Event) -> None:
        kind = e.kind
        if kind == "writer_epoch":
            self.writer_epoch[e.process] = dict(e.fields)["epoch"]
        elif kind == "compactor_started":
            self.compactor_epoch[e.process] = dict(e.fields)["epoch"]
        elif kind == "store.put":
            f = dict(e.fields)
            if _KEY.match(f["key"]):
                self.pending[(e.process, f["n"])] = f["key"]
        elif kind == "store.result":
            f = dict(e.fields)
            key = self.pending.pop((e.process, f["n"]), None)
            if key is not None and str(f["outcome"]).startswith("ok"):
                self._landed(e, key)

    def _landed(self, e: Event, key: str) -> None:
        m_key = _KEY.match(key)
        assert m_key is not None
        root, mid = m_key["root"], int(m_key["id"])
        data = self.read(key)
        if data is None:
            return
        try:
            m = decode_manifest_v2(bytes(data), key)
        except Exception:  # noqa: BLE001 - a bit flip the format cannot detect: not ours to judge
            return
        known = self.manifests[root]
        known[mid] = m
        below = [i for i in known if i < mid]
        tracker = _tracker(m, key)
        if tracker is not None:
            problem = seq_tracker.order_problem(tracker, m.last_l0_seq)
            if problem:
                raise InvariantViolation("TRACK-1", e, f"{root}manifest {mid}'s sequence tracker: {problem}")
        if not below:
            return
        prev = known[max(below)]
        self.counts["manifest_landings"] += 1
        prev_tracker = _tracker(prev, key)
        if tracker is not None and prev_tracker is not None:
            problem = seq_tracker.successor_problem(prev_tracker, tracker)
            if problem:
                raise InvariantViolation("TRACK-2", e, f"{root}manifest {mid}'s sequence tracker against manifest "
                                                       f"{max(below)}'s: {problem}")
        epoch = self.writer_epoch.get(e.process)
        if epoch is not None and _writer_change(prev, m):
            self.counts["writer_updates"] += 1
            newer = max((known[i].writer_epoch, i) for i in below)
            if newer[0] > epoch:
                raise InvariantViolation(
                    "FENCE-5", e, f"{root}manifest {mid} carries an L0 flush of {e.process} (writer epoch {epoch}) "
                                  f"but manifest {newer[1]} below it already has writer epoch {newer[0]}")
        cepoch = self.compactor_epoch.get(e.process)
        if cepoch is not None and _compactor_change(prev, m):
            self.counts["compactor_updates"] += 1
            newer = max((known[i].compactor_epoch, i) for i in below)
            if newer[0] > cepoch:
                raise InvariantViolation(
                    "CFENCE-1", e, f"{root}manifest {mid} carries a compaction commit of {e.process} (compactor "
                                   f"epoch {cepoch}) but manifest {newer[1]} below it already has compactor epoch "
                                   f"{newer[0]}")


def _tracker(m: ManifestV2, key: str) -> seq_tracker.SequenceTracker | None:
    """``m``'s sequence tracker; None when its bytes do not decode (a bit flip: FLIP-1's)."""
    try:
        return seq_tracker.decode(m.sequence_tracker, key)
    except CorruptionError:
        return None


def bucket_reader(bucket) -> Callable[[str], bytes | None]:
    """``read`` over a :class:`~slatedb.objstore.memory.MemoryBucket`."""

    def read(key: str) -> bytes | None:
        got = bucket.objects.get(key)
        return None if got is None else got[0]

    return read
