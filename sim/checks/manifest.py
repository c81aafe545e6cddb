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
  below it (appended only; halved past its capacity);
* **PROJ-6** (projection-union.md): an SST is stored under one database only, so in a manifest
  an SST id listed in ``external_dbs`` appears under one path only (a union or clone that lists a
  source's nested external SSTs as the source's own names a second, wrong path for them);
* **GC-5** (checkpoints-gc.md): an L0 SST a manifest adds has a ULID time at or after the newest
  L0 of the manifest below it (else of its last compacted L0), and not before its writer's clock
  when it minted the id: the writer mints the id and sends the upload's first attempt at one
  virtual moment, and the stored object's ``last_modified`` is the uploader's clock when its last
  attempt applied, so the id's time must be at least that stamp less the virtual time between
  (with 5 % for clock drift; skipped when the uploader's wall clock jumped in between).
  PROJ-6 and GC-5 were caught before only as an escaping exception or by liveness (issue 27);
* **CKPT-4** (writer.md), in every scenario with this checker: a running writer keeps its writer
  checkpoint (:mod:`sim.checks.writer_checkpoint`).

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

from sim.checks.clock_tick import WAL_KEY, ClockTickRule
from sim.checks.writer_checkpoint import WriterCheckpointRule
from sim.world.invariants import InvariantViolation
from sim.world.trace import Event, Trace, listens

_KEY = re.compile(r"^(?P<root>.*?)manifest/(?P<id>[0-9]{20})\.manifest$")
_SST = re.compile(r"^(?P<root>.*?)compacted/[0-9A-Z]{26}\.sst$")
#: Clock drift the GC-5 bound allows for (the simulator draws at most 2 %), and the rounding of ms.
_DRIFT = 1.05
_ROUNDING_MS = 2


def _writer_change(prev: ManifestV2 | None, m: ManifestV2) -> bool:
    if prev is None:
        return False
    new_l0 = {v.id for v in m.l0} - {v.id for v in prev.l0}
    return bool(new_l0) or m.replay_after_wal_id > prev.replay_after_wal_id or m.last_l0_seq > prev.last_l0_seq


def _l0_views(m: ManifestV2) -> list:
    return list(m.l0) + [v for seg in m.segments for v in seg.l0]


def _newest_l0_ms(m: ManifestV2) -> int:
    """The ULID time of ``m``'s newest L0 SST, else of its last compacted L0 view; 0 if none
    (written here again, not imported: the rule the engine's ``sst_ids.newest_l0_ms`` serves)."""
    views = _l0_views(m)
    if views:
        return max(v.sst_id.milliseconds for v in views)
    last = [m.last_compacted_l0_sst_view_id] + [seg.last_compacted_l0_sst_view_id for seg in m.segments]
    return max((u.milliseconds for u in last if u is not None), default=0)


def _one_path_per_external_sst(m: ManifestV2) -> tuple[object, str, str] | None:
    """PROJ-6: an SST id listed under two paths of ``m.external_dbs`` (id, path, other path)."""
    where: dict[object, str] = {}
    for e in m.external_dbs:
        for i in e.sst_ids:
            other = where.setdefault(i, e.path)
            if other != e.path:
                return i, other, e.path
    return None


def _compactor_change(prev: ManifestV2 | None, m: ManifestV2) -> bool:
    if prev is None or m.compactor_epoch != prev.compactor_epoch:
        return False  # a compactor's startup manifest carries its own (new) epoch
    removed_l0 = {v.id for v in prev.l0} - {v.id for v in m.l0}
    return bool(removed_l0) or prev.compacted != m.compacted


class ManifestFenceChecks:
    """FENCE-5, CFENCE-1, TRACK-1/2, PROJ-6, GC-5 and CKPT-4 (see the module docstring). ``read(key)``
    returns the bytes stored under ``key`` now (None when absent)."""

    def __init__(self, read: Callable[[str], bytes | None],
                 modified_ms: Callable[[str], int | None] | None = None) -> None:
        self.read = read
        self.modified_ms = modified_ms  # the stored object's last_modified (GC-5's clock bound), None: absent
        self.first_put: dict[str, tuple[str, float]] = {}  # SST key -> (process, virtual time of its first put)
        self.applied: dict[str, float] = {}  # SST key -> virtual time its last put applied
        self.pending_sst: dict[tuple[str, int], str] = {}
        self.jumps: list[tuple[str, float]] = []  # (process, virtual time) of wall-clock jumps
        self.pending: dict[tuple[str, int], str] = {}
        self.writer_epoch: dict[str, int] = {}  # process -> its writer epoch
        self.compactor_epoch: dict[str, int] = {}  # process -> its compactor's epoch
        self.manifests: dict[str, dict[int, ManifestV2]] = defaultdict(dict)  # root -> id -> landed
        self.trackers: dict[str, dict[int, object]] = defaultdict(dict)  # root -> id -> its decoded tracker
        self.counts: dict[str, int] = defaultdict(int)
        self.writer_checkpoint = WriterCheckpointRule()  # CKPT-4
        self.clock = ClockTickRule(read)  # DUR-5
        self.pending_wal: dict[tuple[str, int], str] = {}

    def attach(self, trace: Trace) -> "ManifestFenceChecks":
        trace.listeners.append(self.on_event)
        return self

    @listens("writer_epoch", "load_fenced", "compactor_started", "closing", "store.put", "store.result", "clock.jump")
    def on_event(self, e: Event) -> None:
        kind = e.kind
        # The store's events first: nearly every call (a reply to each request, every put).
        if kind == "store.result":
            pending, pending_sst, pending_wal = self.pending, self.pending_sst, self.pending_wal
            if pending or pending_sst or pending_wal:  # a reply to a manifest, SST or WAL put in flight, maybe
                f = e.f
                request = (e.process, f["n"])
                key = pending.pop(request, None)
                if key is not None and str(f["outcome"]).startswith("ok"):
                    self._landed(e, key)
                sst = pending_sst.pop(request, None)
                if sst is not None and str(f["outcome"]).startswith("ok"):
                    self.applied[sst] = e.time_s
                wal = pending_wal.pop(request, None)
                if wal is not None and str(f["outcome"]).startswith("ok"):
                    self.clock.wal_landed(e, wal)
        elif kind == "store.put":
            f = e.f
            if _KEY.match(f["key"]):
                self.pending[(e.process, f["n"])] = f["key"]
            elif _SST.match(f["key"]):
                self.first_put.setdefault(f["key"], (e.process, e.time_s))
                self.pending_sst[(e.process, f["n"])] = f["key"]
            elif WAL_KEY.match(f["key"]):
                self.pending_wal[(e.process, f["n"])] = f["key"]
        elif kind == "writer_epoch":
            self.writer_epoch[e.process] = e.f["epoch"]
            self.writer_checkpoint.on_event(e, self.manifests)
        elif kind == "load_fenced":
            self.writer_checkpoint.on_event(e, self.manifests)
        elif kind == "compactor_started":
            self.compactor_epoch[e.process] = e.f["epoch"]
            self.writer_checkpoint.on_event(e, self.manifests)
        elif kind == "closing":
            self.writer_checkpoint.on_event(e, self.manifests)
        elif kind == "clock.jump":
            self.jumps.append((e.process, e.time_s))

    def _landed(self, e: Event, key: str) -> None:
        m_key = _KEY.match(key)
        assert m_key is not None
        root, mid = m_key["root"], int(m_key["id"])
        data = self.read(key)
        if data is None:
            return
        try:
            # Named as the engine names it (relative to the database root): the decode cache is
            # keyed by bytes and name, so the engine's pollers reuse this decode (issue 27 item 2).
            m = decode_manifest_v2(bytes(data), key[len(root):])
        except Exception:  # noqa: BLE001 - a bit flip the format cannot detect: not ours to judge
            return
        if mid <= self._boundary(root):
            # A stalled create on an id GC had freed (RFC 004): behind the durable boundary, so
            # its writer's boundary check refuses it and nobody reads it as the manifest history
            # (gc seed 383: a writer's add_l0 built on manifest 40 landed as a second 41).
            self.counts["behind_boundary"] += 1
            return
        known = self.manifests[root]
        known[mid] = m
        self.clock.manifest_landed(e, root, mid, m)
        self.writer_checkpoint.landed_by[(root, mid)] = e.process
        trackers = self.trackers[root]
        twice = _one_path_per_external_sst(m)
        if twice is not None:
            raise InvariantViolation(
                "PROJ-6", e, f"{root}manifest {mid} lists SST {twice[0]} in external_dbs under {twice[1]!r} and "
                             f"under {twice[2]!r}: an SST is stored under one database only")
        below = [i for i in known if i < mid]
        tracker = trackers[mid] = _tracker(m, key)
        if tracker is not None:
            problem = seq_tracker.order_problem(tracker, m.last_l0_seq)
            if problem:
                raise InvariantViolation("TRACK-1", e, f"{root}manifest {mid}'s sequence tracker: {problem}")
        if not below:
            return
        prev = known[max(below)]
        self.counts["manifest_landings"] += 1
        prev_tracker = trackers[max(below)]
        if tracker is not None and prev_tracker is not None:
            problem = seq_tracker.successor_problem(prev_tracker, tracker)
            if problem:
                raise InvariantViolation("TRACK-2", e, f"{root}manifest {mid}'s sequence tracker against manifest "
                                                       f"{max(below)}'s: {problem}")
        floor_ms = _newest_l0_ms(prev)
        added = {v.sst_id for v in _l0_views(m)} - {v.sst_id for v in _l0_views(prev)}
        for sst_id in sorted(added):
            self.counts["l0_added"] += 1
            if sst_id.milliseconds < floor_ms:
                raise InvariantViolation(
                    "GC-5", e, f"{root}manifest {mid} adds L0 SST {sst_id} (ULID time {sst_id.milliseconds}) below "
                               f"the newest L0 of manifest {max(below)} (ULID time {floor_ms}), by {e.process}")
            minted_ms = self._minted_at_least_ms(f"{root}compacted/{sst_id}.sst")
            if minted_ms is not None and sst_id.milliseconds < minted_ms:
                raise InvariantViolation(
                    "GC-5", e, f"{root}manifest {mid} adds L0 SST {sst_id} with ULID time {sst_id.milliseconds}, "
                               f"{minted_ms - sst_id.milliseconds} ms before its writer's clock when it minted the id "
                               f"(at least {minted_ms})")
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
        if max(below) == mid - 1:
            self.writer_checkpoint.landed(e, root, mid, prev, m)

    def _boundary(self, root: str) -> int:
        return durable_boundary(self.read, root)

    def _minted_at_least_ms(self, key: str) -> int | None:
        """A lower bound of the uploader's wall clock when it minted the SST id of ``key`` (None
        when this world did not see its upload, or the uploader's clock jumped meanwhile)."""
        first, applied = self.first_put.get(key), self.applied.get(key)
        if self.modified_ms is None or first is None or applied is None:
            return None
        process, minted_s = first
        if any(p == process and minted_s <= t <= applied for p, t in self.jumps):
            return None
        stamp = self.modified_ms(key)
        if stamp is None:
            return None
        return stamp - int((applied - minted_s) * 1000 * _DRIFT) - _ROUNDING_MS


def _tracker(m: ManifestV2, key: str) -> seq_tracker.SequenceTracker | None:
    """``m``'s sequence tracker; None when its bytes do not decode (a bit flip: FLIP-1's)."""
    try:
        return seq_tracker.decode(m.sequence_tracker, key)
    except CorruptionError:
        return None


def durable_boundary(read: Callable[[str], bytes | None], root: str) -> int:
    """The durable ``gc/manifest.boundary`` of ``root`` now (0 when absent or unreadable): a
    manifest landing at or below it is a stalled create on a freed id, refused by its writer's
    boundary check (RFC 004), not the database's history."""
    data = read(f"{root}gc/manifest.boundary")
    text = bytes(data).decode("ascii", "replace").strip() if data is not None else ""
    return int(text) if text.isdigit() else 0


def bucket_reader(bucket) -> Callable[[str], bytes | None]:
    """``read`` over a :class:`~slatedb.objstore.memory.MemoryBucket`."""

    def read(key: str) -> bytes | None:
        got = bucket.objects.get(key)
        return None if got is None else got[0]

    return read


def bucket_modified_ms(bucket) -> Callable[[str], int | None]:
    """``modified_ms`` over a :class:`~slatedb.objstore.memory.MemoryBucket`: the stored object's
    ``last_modified`` (the clock of the process whose put applied last)."""

    def modified_ms(key: str) -> int | None:
        got = bucket.objects.get(key)
        return None if got is None else got[1].last_modified_ms

    return modified_ms


def manifest_checks(setup) -> ManifestFenceChecks:
    """The checker over a world's bucket (``Checker("manifest", manifest_checks)``)."""
    return ManifestFenceChecks(bucket_reader(setup.bucket), bucket_modified_ms(setup.bucket))
