"""CKPT-4 (writer.md): a running writer keeps its writer checkpoint, judged on the manifest history.

RFC 000 ("Writers"): the writer of epoch E establishes a ``WriterCheckpoint{E}`` on the manifest
that makes E the writer epoch, re-establishes it on the manifest being written whenever its L0
SSTs or sorted runs change, and (writer.md step 12) drops it only when it closes -- the close's
last manifest change. The checkpoint pins the SSTs of the writer's view against GC between a
compactor's commit and the writer's adoption of it. Checked at every manifest landing, from the
landed bytes and the manifest below (the history alone: nothing is recorded for it):

1. the manifest that makes E the writer epoch, written by E's writer (``writer_epoch`` event),
   holds a writer checkpoint of E pinning that very manifest;
2. a manifest another process writes while the writer epoch stays E (a compactor, GC, a reader,
   a checkpoint), on a database not destroyed, keeps the writer checkpoint of E the manifest
   below holds;
3. a manifest E's writer writes that adds an L0 SST and keeps its checkpoint re-establishes it
   on itself (``manifest_id`` = its own id);
4. once E's writer dropped its checkpoint (its close), it writes no further L0 flush and adds no
   writer checkpoint of E again: the drop was not the close's last change otherwise.

**CKPT-5** (writer.md step 12): the manifest in which a writer's close drops its writer checkpoint
also drops the startup pin of the process's in-process compactor (``compactor_started`` ``pin``),
when that compactor had started before the close began (``closing``): a pin left behind keeps a
hard destroy refused for ``checkpoint_lifetime`` after a clean close.

The writer of an epoch is the process that recorded ``writer_epoch`` with it (``DbCore`` open) or
``load_fenced`` (a bulk load's commit fences as a writer does and ends as a clean close does).
"""

from __future__ import annotations

from slatedb.format.types import ManifestV2
from slatedb.manifest.checkpoints import is_writer_checkpoint, writer_epoch_of

from sim.world.invariants import InvariantViolation
from sim.world.trace import Event


def _writer_checkpoints(m: ManifestV2, epoch: int) -> list:
    return [c for c in m.checkpoints if is_writer_checkpoint(c) and writer_epoch_of(c) == epoch]


class WriterCheckpointRule:
    """CKPT-4 over one world's manifest landings (fed by :class:`sim.checks.manifest.ManifestFenceChecks`)."""

    def __init__(self) -> None:
        self.owner: dict[str, int] = {}  # process -> the writer epoch it owns (its latest)
        self.dropped: dict[tuple[str, int], int] = {}  # (root, epoch) -> manifest id where its writer dropped it
        self.landed_by: dict[tuple[str, int], str] = {}  # (root, manifest id) -> process whose put landed it
        self.counts = {"kept": 0, "refreshed": 0, "dropped": 0, "established": 0, "pins_released": 0}
        self.pins: dict[str, str] = {}  # process -> its in-process compactor's startup pin (before its close began)
        self.closing: set[str] = set()  # processes whose writer close began

    def on_event(self, e: Event, manifests: dict[str, dict[int, ManifestV2]]) -> None:
        kind = e.kind
        if kind == "writer_epoch":
            epoch = e.f["epoch"]
            self.owner[e.process] = epoch
            mid = e.f.get("manifest")
            for root, known in manifests.items():
                m = known.get(mid)
                if m is None or m.writer_epoch != epoch or self.landed_by.get((root, mid)) != e.process:
                    continue
                self.counts["established"] += 1
                if not any(c.manifest_id == mid and c.checkpoint_expire_time_s == 0
                           for c in _writer_checkpoints(m, epoch)):
                    raise InvariantViolation(
                        "CKPT-4", e, f"{root}manifest {mid} makes {epoch} the writer epoch without a writer "
                                     f"checkpoint of epoch {epoch} pinning it (RFC 000 Establishing Initial Checkpoint)")
        elif kind == "load_fenced":
            self.owner[e.process] = e.f["epoch"]
        elif kind == "compactor_started":
            if e.process not in self.closing and "pin" in e.f:
                self.pins[e.process] = e.f["pin"]
        elif kind == "closing":
            self.closing.add(e.process)

    def landed(self, e: Event, root: str, mid: int, prev: ManifestV2 | None, m: ManifestV2) -> None:
        self.landed_by[(root, mid)] = e.process
        epoch = m.writer_epoch
        if prev is None or prev.writer_epoch != epoch or epoch == 0:
            return
        mine = _writer_checkpoints(m, epoch)
        had = _writer_checkpoints(prev, epoch)
        is_writer = self.owner.get(e.process) == epoch
        drop = self.dropped.get((root, epoch))
        added_l0 = bool({v.id for v in m.l0} - {v.id for v in prev.l0})
        if is_writer and drop is not None and (added_l0 or mine):
            raise InvariantViolation(
                "CKPT-4", e, f"{root}manifest {mid}: writer epoch {epoch} ({e.process}) dropped its writer checkpoint "
                             f"at manifest {drop}, while still writing (this manifest "
                             f"{'adds an L0 SST' if added_l0 else 'adds its checkpoint again'}): only its close may "
                             f"drop it, as its last manifest change")
        if had and not mine:
            if m.destroyed_at_s:
                return  # a destroy drops every writer checkpoint (destroy.md)
            if not is_writer:
                raise InvariantViolation(
                    "CKPT-4", e, f"{root}manifest {mid}, written by {e.process}, drops the writer checkpoint of the "
                                 f"running writer epoch {epoch} (manifest {max(c.manifest_id for c in had)} pinned)")
            self.dropped[(root, epoch)] = mid
            self.counts["dropped"] += 1
            pin = self.pins.get(e.process)
            if pin is not None:
                if any(str(c.id) == pin for c in m.checkpoints):
                    raise InvariantViolation(
                        "CKPT-5", e, f"{root}manifest {mid}: the close of writer epoch {epoch} ({e.process}) drops its "
                                     f"writer checkpoint but keeps its compactor's startup pin {pin}: a hard destroy "
                                     f"stays refused until the pin expires")
                self.counts["pins_released"] += 1
            return
        if is_writer and added_l0 and mine:
            self.counts["refreshed"] += 1
            if not any(c.manifest_id == mid for c in mine):
                raise InvariantViolation(
                    "CKPT-4", e, f"{root}manifest {mid}: writer epoch {epoch} adds an L0 SST but its writer checkpoint "
                                 f"still pins manifest {max(c.manifest_id for c in mine)}, not the manifest being "
                                 f"written (RFC 000 Refreshing the Checkpoint)")
        elif had and not is_writer:
            self.counts["kept"] += 1
