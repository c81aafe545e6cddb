"""Trace checks of garbage collection, checkpoints, readers and clones
(``spec/protocols/checkpoints-gc.md``, ``sequenced-metadata.md``, ``clone.md``).

:class:`GcChecks` watches the event trace of the gc scenario (``sim/scenarios/gc.py``) and, through
a fault-free view of the shared bucket, the stored objects themselves. Every database of the world
lives under its own root in one bucket (``parent/``, ``clone/``) and the scenario's stores trace
keys with that root, so a store event names its database. An engine event (``gc_delete``,
``reader_checkpoint``, ``clone``) names its database through the process that reports it
(``db_of``).

What "active" means: a checkpoint is active when it never expires or expires more than
:data:`MARGIN_S` after the world's wall clock (processes' clocks differ from it by at most a
second); a checkpoint within the margin is treated in GC's favour.

Checked as things happen:

* **GC-1** at ``gc_delete`` of an SST: it is referenced neither by the latest manifest nor by a
  manifest that an active checkpoint of the latest manifest pins.
* **GC-2** at ``gc_delete`` of a manifest, and at every landed manifest delete: it is not the
  latest and no active checkpoint of the latest manifest pins it.
* **GC-3** at ``gc_delete`` of an SST: it is no input or output (recorded so far) of a
  compaction that the latest ``.compactions`` file lists Submitted or Running.
* **GC-4** at every manifest landing that becomes the latest, every SST it references exists
  (in its own database, or the parent's for a clone's external SSTs); at every landed SST
  delete, the latest manifest does not reference it.
* **CKPT-1** at every landed SST delete: no manifest pinned by an active checkpoint of the latest
  manifest references it. **CKPT-2** at every latest manifest landing: each active checkpoint's
  manifest exists and so do its SSTs.
* **READ-1** at ``reader_checkpoint``: every WAL object in ``(replay_after, last_seen]`` exists.
  **READ-2** at every landed WAL delete: it is in no active checkpoint's pinned range.
* **BOUNDARY-1** at ``gc_delete`` of a ``.manifest`` / ``.compactions`` file: the durable
  boundary file is at or above its id. **BOUNDARY-2** successive boundary writes never decrease;
  no boundary file is deleted.
* **CLONE-1** a clone's final checkpoint pins the parent manifest its source checkpoint pinned.
  **CLONE-2** at every landed parent SST delete: the initialized clone's latest manifest does not
  reference it. **CLONE-3** every WAL id a clone copies is in ``(replay_after, wal_id_last_seen]``
  of the clone's first manifest. **CLONE-4** at every latest manifest landing that drops the
  clone's final checkpoint from the parent, or an entry from the clone's ``external_dbs``: no
  clone manifest still readable (the latest, or one an active clone checkpoint pins) lists SSTs
  of that entry.

Also counted (not a failure; see docs/simulation.md): manifests that hold an L0 SST twice or
re-add an L0 SST an earlier manifest had dropped (``double_apply``), the trace of RFC 004's
boundary-check false negative re-applying a writer's L0 flush.
"""

from __future__ import annotations

from collections import defaultdict

from ulid import ULID

from slatedb.format.compactions import decode_compactions
from slatedb.format.manifest import decode_manifest_v2
from slatedb.format.types import CompactionsV1, CompactionStatus, ManifestV2
from slatedb.gc.retention import manifest_sst_ids
from slatedb.objstore.memory import MemoryBucket

from sim.world.invariants import InvariantViolation
from sim.world.runtime import SIM_EPOCH_MS
from sim.world.trace import Event, listens

#: Seconds by which a checkpoint must outlive the world's wall clock to count as active.
MARGIN_S = 3
_IN_FLIGHT = (CompactionStatus.SUBMITTED, CompactionStatus.RUNNING)


def _seq_id(rel: str, directory: str, suffix: str) -> int | None:
    if not (rel.startswith(directory) and rel.endswith(suffix)):
        return None
    digits = rel[len(directory):-len(suffix)]
    return int(digits) if digits.isdigit() else None


def _sst_of(rel: str) -> ULID | None:
    if not (rel.startswith("compacted/") and rel.endswith(".sst")):
        return None
    try:
        return ULID.from_str(rel[len("compacted/"):-len(".sst")])
    except ValueError:
        return None


def snapshot_isolation(process: str, seq: int, first: dict, again: dict, model: dict | None = None) -> str | None:
    """**READ-6** for one snapshot: ``first`` is its scan when it was taken (nothing was written in
    between: the state at ``seq``), ``again`` its scan after flushes, compactions and GC ran; they
    must be equal, and with ``model`` (the durable history's state at ``seq``,
    :meth:`sim.checks.prefix.History.state_at`) equal to it. The violation's text, or None."""
    if model is not None and (first != model or again != model):
        got = again if again != model else first
        diff = sorted(k for k in set(got) | set(model) if got.get(k) != model.get(k))
        return (f"READ-6: snapshot at seq {seq} of {process} reads {len(got)} keys, the model of the state at "
                f"that seq {len(model)}: {len(diff)} keys differ, e.g. {diff[:3]}")
    if again == first:
        return None
    diff = sorted(k for k in set(first) | set(again) if first.get(k) != again.get(k))
    return (f"READ-6: snapshot at seq {seq} of {process} reads differently after compactions and GC: "
            f"{len(diff)} keys differ, e.g. {diff[:3]}")


class DbState:
    """What the checks know of one database (its root in the bucket)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.manifests: dict[int, ManifestV2] = {}
        self.latest = 0
        self.compactions: CompactionsV1 | None = None
        self.compactions_id = 0
        self.boundary: dict[str, int] = {}
        self.l0_ever: set[ULID] = set()  # L0 view ids seen in some manifest
        self.l0_gone: set[ULID] = set()  # ... and later dropped from the latest


class GcChecks:
    """The checks of the module docstring over one world's trace."""

    def __init__(self, bucket: MemoryBucket, roots: tuple[str, ...], db_of, skip: frozenset[str] = frozenset()) -> None:
        self.bucket = bucket
        self.skip = skip  # invariant ids not checked on the trace (to show an oracle catching a bug alone)
        self.dbs = {r: DbState(r) for r in roots}
        self._sst_names: dict[ULID, str] = {}
        #: Per manifest object (by id, the object kept): its database, the (store key, store
        #: root, SST) of every SST it references (see :meth:`_sst_keys`) and those store keys alone.
        self._sst_keys_of: dict[int, tuple[ManifestV2, DbState, tuple[tuple[str, str, ULID], ...],
                                           tuple[str, ...]]] = {}
        self.db_of = db_of  # process name -> root of the database its engine events are about
        self.pending: dict[tuple[str, int], tuple[str, str]] = {}
        self.clone_sources: dict[str, int] = {}  # source checkpoint id -> manifest id
        self.counts: dict[str, int] = defaultdict(int)
        self.double_apply: list[str] = []
        self.now_s = 0.0

    def attach(self, trace) -> "GcChecks":
        trace.listeners.append(self.on_event)
        return self

    # -- helpers --------------------------------------------------------------------------

    def _exists(self, key: str) -> bool:
        return key in self.bucket.objects

    def _sst_keys(self, db: DbState, m: ManifestV2) -> tuple[tuple[str, str, ULID], ...]:
        """(store key, store root, SST) of every SST of ``m`` (:func:`manifest_sst_ids`, in its
        order), worked out once per manifest object: every landing checks every SST of the
        latest manifest and of every pinned one again, and a manifest never changes."""
        return self._sst_keys_entry(db, m)[2]

    def _all_ssts_exist(self, db: DbState, m: ManifestV2) -> bool:
        """Every SST of ``m`` exists (the store keys of :meth:`_sst_keys` looked up in C)."""
        return all(map(self.bucket.objects.__contains__, self._sst_keys_entry(db, m)[3]))

    def _sst_keys_entry(self, db: DbState, m: ManifestV2) -> tuple:
        got = self._sst_keys_of.get(id(m))
        if got is not None and got[0] is m and got[1] is db:
            return got
        keys = []
        for sst in manifest_sst_ids(m):
            root = self._sst_store_root(db, m, sst)
            name = self._sst_names.get(sst)
            if name is None:
                name = self._sst_names[sst] = f"compacted/{sst}.sst"
            keys.append((root + name, root, sst))
        got = self._sst_keys_of[id(m)] = (m, db, tuple(keys), tuple(k for k, _, _ in keys))
        return got

    def _split(self, key: str) -> tuple[DbState | None, str]:
        root, _, rel = key.partition("/")
        return self.dbs.get(root + "/"), rel

    def _wall_s(self, e: Event) -> float:
        return SIM_EPOCH_MS / 1000 + e.time_s

    def _active(self, db: DbState, e: Event) -> list[tuple[object, int]]:
        """(checkpoint, pinned manifest id) of the latest manifest's clearly active checkpoints."""
        m = db.manifests.get(db.latest)
        if m is None:
            return []
        now = self._wall_s(e)
        return [(c, c.manifest_id) for c in m.checkpoints
                if c.checkpoint_expire_time_s == 0 or c.checkpoint_expire_time_s > now + MARGIN_S]

    def _pinned_ssts(self, db: DbState, e: Event) -> dict[ULID, int]:
        out: dict[ULID, int] = {}
        for _c, mid in self._active(db, e):
            pm = db.manifests.get(mid)
            if pm is not None:
                for s in manifest_sst_ids(pm):
                    out.setdefault(s, mid)
        return out

    def _sst_store_root(self, db: DbState, m: ManifestV2, sst: ULID) -> str:
        for ext in m.external_dbs:
            if sst in ext.sst_ids:
                return "parent/"  # the scenario's only external database
        return db.root

    # -- events -----------------------------------------------------------------------------

    @listens("store.put", "store.delete", "store.result", "gc_delete", "reader_checkpoint", "clone")
    def on_event(self, e: Event) -> None:
        kind = e.kind
        if kind in ("store.put", "store.delete"):
            f = e.f
            self.pending[(e.process, f["n"])] = (kind, f["key"])
        elif kind == "store.result":
            f = e.f
            got = self.pending.pop((e.process, f["n"]), None)
            if got is not None and str(f["outcome"]).startswith("ok"):
                op, key = got
                if op == "store.put":
                    self._put_landed(e, key)
                else:
                    self._delete_landed(e, key)
        elif kind == "gc_delete":
            self._gc_delete(e)
        elif kind == "reader_checkpoint":
            self._reader_checkpoint(e)
        elif kind == "clone":
            self._clone(e)

    # -- landings ---------------------------------------------------------------------------

    def _put_landed(self, e: Event, key: str) -> None:
        db, rel = self._split(key)
        if db is None:
            return
        mid = _seq_id(rel, "manifest/", ".manifest")
        if mid is not None:
            self._manifest_landed(e, db, mid, key, rel)
            return
        cid = _seq_id(rel, "compactions/", ".compactions")
        if cid is not None:
            if cid > db.compactions_id and key in self.bucket.objects:
                db.compactions_id = cid
                db.compactions = decode_compactions(bytes(self.bucket.objects[key][0]), rel)
            return
        if rel.startswith("gc/") and rel.endswith(".boundary"):
            value = int(bytes(self.bucket.objects[key][0]).decode("ascii"))
            before = db.boundary.get(rel, 0)
            if value < before:
                raise InvariantViolation("BOUNDARY-2", e, f"{key} moved back from {before} to {value}")
            db.boundary[rel] = value
            self.counts["boundary_writes"] += 1

    def _manifest_landed(self, e: Event, db: DbState, mid: int, key: str, rel: str) -> None:
        if key not in self.bucket.objects:
            return
        # Decoded under the engine's name for it (``rel``, relative to the database root): the
        # decode caches are keyed by bytes and name, so every decode of these bytes is one.
        m = decode_manifest_v2(bytes(self.bucket.objects[key][0]), rel)
        db.manifests[mid] = m
        self.counts["manifests"] += 1
        if mid < db.latest:
            return  # a stale create behind the head (RFC 004): never the latest
        prev = db.manifests.get(db.latest)
        db.latest = mid
        if prev is not None and "CLONE-4" not in self.skip:
            self._detach_ok(e, db, prev, m)
        # Double application of a writer's L0 flush (RFC 004 false negative, counted).
        views = [v.id for v in m.l0]
        dup = len(views) != len(set(views)) or len({s.id for s in m.ssts}) != len(m.ssts)
        back = [v for v in views if v in db.l0_gone]
        if dup or back:
            self.counts["double_apply"] += 1
            self.double_apply.append(f"{db.root}manifest {mid} at {e.time_s:.3f}s: "
                                     f"{'an SST listed twice' if dup else f'L0 {back[0]} back after it left'}")
        in_l0 = set(views)
        db.l0_gone |= db.l0_ever - in_l0  # what L0 held before and no longer does
        db.l0_ever |= in_l0
        # GC-4: the latest manifest's SSTs exist.
        objects = self.bucket.objects
        for key, root, sst in self._sst_keys(db, m) if not self._all_ssts_exist(db, m) else ():
            if key not in objects:
                raise InvariantViolation("GC-4", e, f"{db.root}manifest {mid} (the latest) references {root}"
                                                    f"compacted/{sst}.sst, which does not exist")
        # CKPT-2: every active checkpoint's manifest and its SSTs exist.
        for c, pid in self._active(db, e):
            if pid == mid:
                continue
            if not self._exists(f"{db.root}manifest/{pid:020d}.manifest"):
                raise InvariantViolation("CKPT-2", e, f"checkpoint {c.id} of {db.root}manifest {mid} pins "
                                                      f"manifest {pid}, which does not exist")
            pm = db.manifests.get(pid)
            for key, root, sst in self._sst_keys(db, pm) if pm is not None and not self._all_ssts_exist(db, pm) else ():
                if key not in objects:
                    raise InvariantViolation("CKPT-2", e, f"checkpoint {c.id} pins {db.root}manifest {pid}, whose "
                                                          f"SST {root}compacted/{sst}.sst does not exist")

    def _delete_landed(self, e: Event, key: str) -> None:
        db, rel = self._split(key)
        if db is None:
            return
        self.counts["deletes"] += 1
        if rel.startswith("gc/") and rel.endswith(".boundary"):
            raise InvariantViolation("BOUNDARY-2", e, f"{key} deleted")
        sst = _sst_of(rel)
        if sst is not None:
            latest = db.manifests.get(db.latest)
            if latest is not None and sst in manifest_sst_ids(latest):
                raise InvariantViolation("GC-4", e, f"{key} deleted while the latest manifest {db.latest} references it")
            pinned = self._pinned_ssts(db, e).get(sst)
            if pinned is not None:
                raise InvariantViolation("CKPT-1", e, f"{key} deleted while an active checkpoint pins manifest "
                                                      f"{pinned}, which references it")
            if db.root == "parent/":
                clone = self.dbs.get("clone/")
                cm = clone.manifests.get(clone.latest) if clone is not None else None
                if cm is not None and cm.initialized and any(sst in x.sst_ids for x in cm.external_dbs):
                    raise InvariantViolation("CLONE-2", e, f"{key} deleted while the initialized clone's manifest "
                                                          f"{clone.latest} references it")
            return
        mid = _seq_id(rel, "manifest/", ".manifest")
        if mid is not None:
            self._manifest_delete_ok(e, db, mid, "GC-2")
            return
        wal = _seq_id(rel, "wal/", ".sst")
        if wal is not None:
            for c, pid in self._active(db, e):
                pm = db.manifests.get(pid)
                if pm is not None and pm.replay_after_wal_id < wal <= pm.wal_id_last_seen:
                    raise InvariantViolation("READ-2", e, f"{key} deleted while checkpoint {c.id} pins manifest {pid} "
                                                          f"with WAL range ({pm.replay_after_wal_id}, "
                                                          f"{pm.wal_id_last_seen}]")

    def _detach_ok(self, e: Event, db: DbState, prev: ManifestV2, m: ManifestV2) -> None:
        """CLONE-4 at a new latest manifest: a parent checkpoint that is a clone entry's final
        checkpoint goes, or a clone entry goes, while a clone manifest still readable (the latest,
        or one an active clone checkpoint pins) lists SSTs of that entry."""
        clone = self.dbs.get("clone/")
        if clone is None:
            return
        if db.root == "parent/":
            # The checkpoints of prev that m does not hold (by id); those m shares as the same
            # objects are held (most landings: only the UUIDs of the others are hashed).
            in_m = {id(c) for c in m.checkpoints}
            rest = [c for c in prev.checkpoints if id(c) not in in_m]
            gone = {c.id for c in rest} - {c.id for c in m.checkpoints} if rest else set()
            cm = clone.manifests.get(clone.latest)
            for ext in cm.external_dbs if cm is not None and gone else ():
                if ext.final_checkpoint_id in gone:
                    self._clone_still_reads(e, clone, ext, f"parent/ drops the clone's final checkpoint "
                                                           f"{ext.final_checkpoint_id}")
        elif db is clone:
            kept = {(x.path, x.source_checkpoint_id) for x in m.external_dbs}
            for ext in prev.external_dbs:
                if (ext.path, ext.source_checkpoint_id) not in kept:
                    self._clone_still_reads(e, clone, ext, f"clone/ detaches {ext.path}")

    def _clone_still_reads(self, e: Event, clone: DbState, ext, what: str) -> None:
        readable = [(clone.latest, "the latest")] + [(pid, f"pinned by active checkpoint {c.id}")
                                                       for c, pid in self._active(clone, e)]
        for mid, why in readable:
            cm = clone.manifests.get(mid)
            for x in cm.external_dbs if cm is not None else ():
                if (x.path, x.source_checkpoint_id) == (ext.path, ext.source_checkpoint_id) and x.sst_ids:
                    raise InvariantViolation("CLONE-4", e, f"{what} while clone manifest {mid} ({why}) references "
                                                           f"{len(x.sst_ids)} of its SSTs")

    def _manifest_delete_ok(self, e: Event, db: DbState, mid: int, inv: str) -> None:
        if mid >= db.latest:
            raise InvariantViolation(inv, e, f"{db.root}manifest {mid} deleted; the latest is {db.latest}")
        for c, pid in self._active(db, e):
            if pid == mid:
                raise InvariantViolation(inv, e, f"{db.root}manifest {mid} deleted while active checkpoint {c.id} "
                                                 f"pins it")

    # -- engine events ------------------------------------------------------------------------

    def _gc_delete(self, e: Event) -> None:
        root = self.db_of(e.process)
        db = self.dbs.get(root)
        if db is None:
            return
        f = e.f
        what, path = f.get("what"), f["path"]
        self.counts[f"gc_delete.{what}"] += 1
        if what == "sst":
            sst = _sst_of(path)
            latest = db.manifests.get(db.latest)
            if latest is not None and sst in manifest_sst_ids(latest):
                raise InvariantViolation("GC-1", e, f"GC deletes {path}, referenced by the latest manifest {db.latest}")
            pinned = self._pinned_ssts(db, e).get(sst)
            if pinned is not None:
                raise InvariantViolation("GC-1", e, f"GC deletes {path}, referenced by manifest {pinned} that an "
                                                    f"active checkpoint of manifest {db.latest} pins")
            c = db.compactions
            for comp in c.recent_compactions if c is not None else ():
                if comp.status not in _IN_FLIGHT:
                    continue
                outputs = {o.id for o in comp.output_ssts}
                if comp.ctx is not None:
                    for sub in comp.ctx.subcompactions:
                        outputs |= {o.id for o in sub.output_ssts}
                inputs = set()
                if latest is not None:
                    views = set(comp.spec.l0_view_ids)
                    runs = set(comp.spec.sorted_runs)
                    inputs = {v.sst_id for v in latest.l0 if v.id in views}
                    inputs |= {v.sst_id for r in latest.compacted if r.id in runs for v in r.ssts}
                if sst in outputs or sst in inputs:
                    raise InvariantViolation("GC-3", e, f"GC deletes {path}, an {'output' if sst in outputs else 'input'}"
                                                        f" of compaction {comp.id} ({comp.status.name} in "
                                                        f".compactions {db.compactions_id})")
        elif what in ("manifest", "compactions"):
            file_id = f["id"]
            boundary = db.boundary.get(f"gc/{what}.boundary", 0)
            if file_id > boundary:
                raise InvariantViolation("BOUNDARY-1", e, f"GC deletes {path} while the durable boundary is {boundary}")
            if what == "manifest":
                self._manifest_delete_ok(e, db, file_id, "GC-2")

    def _reader_checkpoint(self, e: Event) -> None:
        root = self.db_of(e.process)
        f = e.f
        self.counts["reader_checkpoints"] += 1
        for wal in range(f["replay_after"] + 1, f["last_seen"] + 1):
            if not self._exists(f"{root}wal/{wal:020d}.sst"):
                raise InvariantViolation("READ-1", e, f"reader checkpoint on manifest {f['manifest_id']} pins WAL range "
                                                      f"({f['replay_after']}, {f['last_seen']}] but wal {wal} is gone")

    def _clone(self, e: Event) -> None:
        f = e.f
        step = f.get("clone_step")
        if step == "source_checkpoint":
            self.clone_sources[f["id"]] = f["manifest_id"]
        elif step == "final_checkpoint":
            clone = self.dbs["clone/"]
            first = clone.manifests.get(min(clone.manifests)) if clone.manifests else None
            for ext in first.external_dbs if first is not None else ():
                if str(ext.final_checkpoint_id) == f["id"]:
                    want = self.clone_sources.get(str(ext.source_checkpoint_id))
                    if want is not None and want != f["manifest_id"]:
                        raise InvariantViolation("CLONE-1", e, f"final checkpoint {f['id']} pins parent manifest "
                                                               f"{f['manifest_id']}, its source {want}")
        elif step == "copy_wal":
            clone = self.dbs["clone/"]
            m = clone.manifests.get(clone.latest)
            if m is not None and not (m.replay_after_wal_id < f["id"] <= m.wal_id_last_seen):
                raise InvariantViolation("CLONE-3", e, f"clone copies parent wal {f['id']}, outside "
                                                       f"({m.replay_after_wal_id}, {m.wal_id_last_seen}] of its manifest")
            self.counts["clone_wal_copied"] += 1
