"""DESTROY-1..6 (spec/protocols/destroy.md) over the store traffic of one world of databases
under roots of one bucket.

Every check reads what *landed* (a ``store.result`` ok after a ``store.put`` or
``store.delete``: the moment the simulated store applied the request) and the bucket itself:

* **DESTROY-2**: once a manifest with ``destroyed_at_s`` has landed (the soft destroy's mark,
  which lands only while the destroyer's epoch is the latest), no data WAL object of a writer with
  an older epoch lands (its own fence, a 0-byte object sent before the destroy and stalled, may:
  it holds no row, and FENCE-2 allows an older writer's fence above a newer one's; destroy seed 98);
* **DESTROY-3**: no manifest lands that raises ``writer_epoch`` or adds a checkpoint over a
  destroyed manifest, except by a destroyer (processes whose name starts with ``d``: a racing
  soft destroyer claims the epoch of a destroyed manifest on purpose, ``allow_destroyed``);
* **DESTROY-1**: no object is deleted by a hard destroyer (processes ``hd*``) while the latest
  manifest of its database lists an unexpired checkpoint other than a writer checkpoint;
* **DESTROY-4**: after every delete, a database that still holds objects still holds a
  manifest, and its latest manifest is deleted only when nothing else of it is left;
* **DESTROY-5**: when a clone's last manifest is deleted, no parent still lists a final
  checkpoint of that clone;
* **DESTROY-6** (liveness, :func:`destroyed_and_gone`): a destroyed database is gone once no
  checkpoint pins it and its grace has passed;
* **DESTROY-7**: an object a GC process (``g*``) creates on a database that is gone (its last
  manifest deleted with nothing else left: the create was decided on a manifest read before the
  destroy) no longer exists when that process ends its pass (``gc_pass``): GC takes it back;
* **DESTROY-8**: no delete lands on one of the ``foreign`` keys (objects under a root that are not
  its database's: a database nested below it, a user's file), and at the end every one of them
  is still there with its bytes (:func:`foreign_intact`). The other checks count them as no
  database's objects.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

from slatedb.format.manifest import decode_manifest_v2
from slatedb.format.types import ManifestV2, WriterCheckpoint
from slatedb.manifest.checkpoints import is_writer_checkpoint
from slatedb.objstore.memory import MemoryBucket

from sim.checks.manifest import bucket_reader, durable_boundary
from sim.world.invariants import InvariantViolation
from sim.world.runtime import SIM_EPOCH_MS
from sim.world.trace import Event, Trace

#: Seconds of clock skew between processes a checkpoint's expiry is given (DESTROY-1).
SKEW_S = 2.0


def _manifest_id(rel: str) -> int | None:
    if rel.startswith("manifest/") and rel.endswith(".manifest"):
        return int(rel[len("manifest/"):-len(".manifest")])
    return None


class DestroyChecks:
    """The trace checks of DESTROY-1..5 for databases under ``roots`` (``"parent/"``...);
    ``writer_epochs`` maps a process to the writer epoch it opened with (``writer_epoch``
    events)."""

    def __init__(self, bucket: MemoryBucket, roots: tuple[str, ...], foreign: frozenset[str] = frozenset()) -> None:
        self.bucket = bucket
        self.roots = roots
        self.foreign = foreign
        self.pending: dict[tuple[str, int], tuple[str, str]] = {}
        self.epoch_of: dict[str, int] = {}
        self.marked_epoch: dict[str, int] = {}  # root -> writer epoch of its first destroyed manifest
        self.manifests: dict[str, dict[int, ManifestV2]] = defaultdict(dict)
        self.final_checkpoints: dict[str, set[str]] = defaultdict(set)  # clone root -> its final checkpoint ids
        self.counts: dict[str, int] = defaultdict(int)
        self._read = bucket_reader(bucket)
        self.gone: set[str] = set()  # roots whose last object a delete removed
        self.late: dict[str, list[str]] = defaultdict(list)  # GC process -> keys it created on a gone root
        #: writer process -> (root, [its manifest]) an open landed on a gone root (DESTROY-3, -7)
        self.late_open: dict[str, tuple[str, list[str]]] = {}

    def attach(self, trace: Trace) -> "DestroyChecks":
        trace.listeners.append(self.on_event)
        return self

    def _root(self, key: str) -> tuple[str | None, str]:
        for root in self.roots:
            if key.startswith(root):
                return root, key[len(root):]
        return None, key

    def on_event(self, e: Event) -> None:
        kind = e.kind
        if kind == "writer_epoch":
            self.epoch_of[e.process] = e.f["epoch"]
        elif kind == "gc_pass" and e.process in self.late:
            kept = [k for k in self.late.pop(e.process) if k in self.bucket.objects]
            if kept:
                raise InvariantViolation("DESTROY-7", e, f"{e.process} ended its pass with {kept[0]} it created on a "
                                                         f"destroyed and removed database still there")
        elif kind in ("store.put", "store.delete"):
            f = e.f
            self.pending[(e.process, f["n"])] = (kind, f["key"], f.get("size"))
        elif kind == "store.result":
            f = e.f
            got = self.pending.pop((e.process, f["n"]), None)
            if got is None or not str(f["outcome"]).startswith("ok"):
                return
            op, key, size = got
            if key in self.foreign and op == "store.delete":
                raise InvariantViolation("DESTROY-8", e, f"{e.process} deleted {key}, an object under a database's root "
                                                         f"that is not the database's")
            root, rel = self._root(key)
            if root is None:
                return
            if op == "store.put":
                self._put_landed(e, root, rel, key, size)
            else:
                self._delete_landed(e, root, rel)

    # -- puts ---------------------------------------------------------------------------------

    def _put_landed(self, e: Event, root: str, rel: str, key: str, size: int | None = None) -> None:
        if root in self.gone and e.process.startswith("g"):
            # DESTROY-7 judges it at the process's next gc_pass (GC takes it back), not DESTROY-3
            # at the landing (destroy seed 1880: an ExpireCheckpoints on a manifest read before
            # the hard destroy, landing as manifest 10 on the emptied root).
            self.late[e.process].append(key)
            self.counts["gc_late_creates"] += 1
            return
        mid = _manifest_id(rel)
        opened = self.late_open.get(e.process)
        if opened is not None and opened[0] == root:
            if not (rel.startswith("wal/") and size == 0):  # its fence may follow; anything else may not
                kept = [k for k in opened[1] if k in self.bucket.objects]
                if kept:
                    raise InvariantViolation("DESTROY-3", e, f"{e.process} goes on writing to {root} ({rel}) after "
                                                             f"its manifest {kept[0]} (adding a writer checkpoint) landed on the removed database")
                del self.late_open[e.process]
        if (mid is not None and root in self.gone and not e.process.startswith(("g", "d"))
                and mid > self._boundary(root) and self._writer_bump(root, key)):
            # A writer's epoch bump decided before a destroy landed on the emptied root (destroy
            # seed 409): its writer takes it back (and its fence) before it writes anything else.
            self.late_open[e.process] = (root, [key])
            self.counts["open_late_creates"] += 1
            return
        if mid is not None and mid <= self._boundary(root):
            # A stalled create on an id GC had freed (RFC 004): its writer's boundary check
            # refuses it; not the database's history (destroy seeds 305, 409, 417, 530: a reader's,
            # the writer's or the clone's commit built on a manifest read long before the mark).
            self.counts["behind_boundary"] += 1
            return
        if mid is not None and key in self.bucket.objects:
            m = decode_manifest_v2(bytes(self.bucket.objects[key][0]), key)
            before = self.manifests[root].get(max(self.manifests[root], default=-1))
            self.manifests[root][mid] = m
            for ext in m.external_dbs:
                if ext.final_checkpoint_id is not None:
                    self.final_checkpoints[root].add(str(ext.final_checkpoint_id))
            if before is not None and before.destroyed_at_s and not e.process.startswith("d"):
                new_cps = {c.id for c in m.checkpoints} - {c.id for c in before.checkpoints}
                if m.writer_epoch > before.writer_epoch or new_cps:
                    raise InvariantViolation("DESTROY-3", e, f"{e.process} wrote {root}manifest {mid} over destroyed "
                                                             f"manifest (epoch {before.writer_epoch} -> {m.writer_epoch}, "
                                                             f"{len(new_cps)} new checkpoint(s))")
            if m.destroyed_at_s and root not in self.marked_epoch:
                self.marked_epoch[root] = m.writer_epoch
                self.counts["marked"] += 1
            return
        if rel.startswith("wal/") and root in self.marked_epoch and size != 0:  # a fence holds no row
            epoch = self.epoch_of.get(e.process)
            if epoch is not None and epoch < self.marked_epoch[root]:
                raise InvariantViolation("DESTROY-2", e, f"{e.process} (writer epoch {epoch}) created {root}{rel} "
                                                         f"after the destroy of epoch {self.marked_epoch[root]} landed")

    def _writer_bump(self, root: str, key: str) -> bool:
        """The manifest at ``key`` adds checkpoints, all of them writer checkpoints: an epoch bump
        (a writer's open), not a reader's or a clone's checkpoint, which DESTROY-3 judges at once."""
        if key not in self.bucket.objects:
            return False
        m = decode_manifest_v2(bytes(self.bucket.objects[key][0]), key)
        known = {c.id for seen in self.manifests[root].values() for c in seen.checkpoints}
        new = [c for c in m.checkpoints if c.id not in known]
        return bool(new) and all(is_writer_checkpoint(c) for c in new)

    # -- deletes ------------------------------------------------------------------------------

    def _boundary(self, root: str) -> int:
        return durable_boundary(self._read, root)

    def _objects(self, root: str) -> list[str]:
        return [k for k in self.bucket.objects if k.startswith(root) and k not in self.foreign]

    def _latest(self, root: str) -> ManifestV2 | None:
        ids = sorted(i for k in self._objects(root) if (i := _manifest_id(k[len(root):])) is not None)
        if not ids:
            return None
        key = f"{root}manifest/{ids[-1]:020d}.manifest"
        return decode_manifest_v2(bytes(self.bucket.objects[key][0]), key)

    def _delete_landed(self, e: Event, root: str, rel: str) -> None:
        left = self._objects(root)
        latest = self._latest(root)
        if not left:
            self.gone.add(root)
        if left and latest is None:
            raise InvariantViolation("DESTROY-4", e, f"{root} still holds {len(left)} objects (e.g. {sorted(left)[:2]}) "
                                                     f"but no manifest")
        mid = _manifest_id(rel)
        if mid is not None and left:
            older = [i for k in left if (i := _manifest_id(k[len(root):])) is not None]
            if all(i < mid for i in older):
                # Its latest manifest went while other objects remain: the destroy deleted what
                # an earlier listing held, not what landed since (a stalled manifest create on an
                # id it had freed, destroy seed 44). Nobody else deletes a latest manifest.
                raise InvariantViolation("DESTROY-4", e, f"{e.process} deleted {root}{rel}, the latest manifest, while "
                                                         f"{len(left)} objects remain (e.g. {sorted(left)[:2]})")
        if e.process.startswith("hd") and latest is not None:
            now_s = (SIM_EPOCH_MS / 1000) + e.time_s
            active = [c for c in latest.checkpoints if not isinstance(c.metadata, WriterCheckpoint)
                      and (not c.checkpoint_expire_time_s or c.checkpoint_expire_time_s > now_s + SKEW_S)]
            if active:
                raise InvariantViolation("DESTROY-1", e, f"hard destroy deletes {root}{rel} while the latest manifest "
                                                         f"holds {len(active)} active checkpoint(s)")
        if latest is None and self.final_checkpoints.get(root):
            for parent in self.roots:
                pm = self._latest(parent) if parent != root else None
                held = {str(c.id) for c in pm.checkpoints} & self.final_checkpoints[root] if pm else set()
                if held:
                    raise InvariantViolation("DESTROY-5", e, f"{root} is gone but {parent} still holds its final "
                                                             f"checkpoint(s) {sorted(held)[:2]}")
        self.counts["deletes"] += 1


def destroyed_and_gone(bucket: MemoryBucket, root: str, why_not: Callable[[], Any] = lambda: "",
                       foreign: frozenset[str] = frozenset()) -> list[str]:
    """DESTROY-6: a destroyed database no checkpoint pins, past its grace, holds no object
    (the ``foreign`` keys under its root are not its objects)."""
    left = sorted(k for k in bucket.objects if k.startswith(root) and k not in foreign)
    if left:
        return [f"DESTROY-6: destroyed database {root} still holds {len(left)} objects, e.g. {left[:3]} {why_not()}"]
    return []


def foreign_intact(bucket: MemoryBucket, foreign: dict[str, bytes]) -> list[str]:
    """DESTROY-8: every object under a root that is not its database's (key -> the bytes put
    there before the run) is still there, unchanged, whatever destroys ran."""
    lost = sorted(k for k, data in foreign.items() if k not in bucket.objects or bytes(bucket.objects[k][0]) != data)
    if lost:
        return [f"DESTROY-8: {len(lost)} object(s) under a destroyed database's root that are not the database's were "
                f"deleted or changed, e.g. {lost[:3]}"]
    return []
