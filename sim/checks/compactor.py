"""Trace checks of the compaction protocol (``spec/protocols/compaction.md``).

:class:`CompactorChecks` watches the event trace of a simulated world and, through a fault-free
view of the shared bucket, the metadata files themselves. It looks at the moment a file *lands*
(the simulated store's ``store.result`` of a create of ``manifest/*`` or ``compactions/*``), not
at the ``create`` event the writing process reports when it sees the reply: a create whose reply
was lost, or whose process crashed meanwhile, counts too. Files are create-if-absent at
latest+1 and nothing deletes them in this world, so reading an object at its landing gives
exactly what was written, and landings come in id order.

Who created a file is the process that sent the request. A manifest is attributed to a
compactor by its content: compactor startup changes ``compactor_epoch``, a compactor commit
removes L0 views or changes the sorted runs; a writer only adds L0 views, bumps its own epoch
and moves its checkpoint. The creator's epoch is the one its process announced with
``compactor_started`` (a process runs at most one compactor; restarts get new names).

Checked as each file lands:

* **CFENCE-1** after ``compactor_started(E)``, no compactor commit lands in ``manifest/`` from
  a compactor whose epoch is below E (the manifest event carries no epoch: the creating
  process's epoch is used; a compactor's startup manifest carries its own epoch in the file);
* **CFENCE-2** after ``compactor_started(E)``, no ``.compactions`` file written by a compactor
  (any process but the admin, which keeps the file's epoch) carries an epoch below E;
* **CFENCE-3** ``compactor_started`` epochs are distinct; no ``panic``; no compactor stops with
  ``CompactorEpochError``; the ``compactor_epoch`` of both file chains never decreases;
* **COMPACT-1** along the ``.compactions`` chain each compaction id follows the official
  lifecycle (``slatedb.compactor.lifecycle.LEGAL``: Submitted -> Scheduled -> Running ->
  Compacted -> Completed, Failed from validation, Running -> Scheduled on release or reclaim;
  terminal is final; an active compaction is never dropped). The in-memory ``compaction_state`` events are not used: a zombie
  announces states it can no longer persist;
* **COMPACT-2** at the first ``.compactions`` showing c ``Completed``, the latest manifest
  already lists every output SST of c;
* **COMPACT-3** an output SST joins the sorted runs at most once; each compaction id is
  committed at most once (``compaction_commit`` events and identified commits), over a manifest
  holding all its inputs; and c is recorded ``Scheduled`` (validated) only while the
  latest manifest holds all its inputs (a resumed compaction whose inputs are gone must fail).

* **COMPACT-10** no job is recorded ``Failed`` while the latest manifest holds all its (one or
  more) outputs in its sorted runs, nor a job with no output after a manifest that committed it
  landed (the landing that removed exactly its sources, identified as for COMPACT-3): a job
  whose commit landed before a restart is ``Completed``;

* **COMPACT-5** a Running job changes worker id only through Scheduled (release, reclaim),
  and the run a manifest commits for a job is its owner's Compacted result;
* **COMPACT-6** ``ctx.subcompactions`` tile the key space, each output inside its range;
* **COMPACT-7** ULID rules on job and output ids.

Checked at the end by :meth:`CompactorChecks.verify_outputs` (it reads the SSTs):

* **RESUME-2** across the output SSTs of every committed compaction, ``(key asc, seq desc)``
  strictly increases (no row written twice);
* **RESUME-1** those outputs are exactly the rows of an uninterrupted run: an independent merge
  of the inputs (as listed in the manifest the commit replaced) with the retention rules of
  ``slatedb/compactor/executor.py`` (the compaction's persisted ``retention_min_seq``, bottom run
  tombstones dropped) must give the same ``(key, seq, kind, value)`` rows;
* **COMPACT-9** they are exactly the rows of a single-process compaction of the same spec by
  the production merge (:mod:`sim.checks.compaction_oracle`).
"""

from __future__ import annotations

from collections import defaultdict

from ulid import ULID

from slatedb.compactor.compactor import FAILED_REASONS_DIR
from slatedb.compactor.executor import expiry_clock_ms
from slatedb.compactor.lifecycle import ACTIVE, LEGAL, check_subcompactions, outputs_in_order
from slatedb.errors import CorruptionError
from slatedb.lsm.view import sst_key
from slatedb.format.compactions import decode_compactions
from slatedb.format.manifest import decode_manifest_v2
from slatedb.format.sst_reader import SstReader
from slatedb.format.types import CompactionsV1, CompactionStatus, ManifestV2, TieredCompactionSpec
from slatedb.objstore.memory import MemoryStore
from slatedb.row import Row, RowKind

from sim.checks import compaction_oracle as oracle
from sim.world.invariants import InvariantViolation
from sim.world.trace import Event, listens

S = CompactionStatus
_LEGAL = LEGAL  # the official lifecycle (slatedb/compactor/lifecycle.py)
_ACTIVE = tuple(ACTIVE)


def _id_of(key: str, prefix: str, suffix: str) -> int | None:
    if not (key.startswith(prefix) and key.endswith(suffix)):
        return None
    digits = key[len(prefix):-len(suffix)]
    return int(digits) if len(digits) == 20 and digits.isdigit() else None


def _run_sst_ids(m: ManifestV2) -> set[ULID]:
    return {v.sst_id for r in m.compacted for v in r.ssts}


def _inputs_missing(spec: TieredCompactionSpec, m: ManifestV2) -> list[str]:
    l0 = {v.id for v in m.l0}
    runs = {r.id for r in m.compacted}
    return ([f"L0:{v}" for v in spec.l0_view_ids if v not in l0]
            + [f"SR:{r}" for r in spec.sorted_runs if r not in runs])


class CompactorChecks:
    """CFENCE-1/2/3 and COMPACT-1/2/3/5/6/7/10 on the trace; RESUME-1/2 at the end (see the module)."""

    def __init__(self, store: MemoryStore, *, non_compactors: frozenset[str] = frozenset({"admin"})) -> None:
        self.store = store
        self.non_compactors = non_compactors
        self.pending: dict[tuple[str, int], str] = {}
        self.manifests: dict[int, ManifestV2] = {}
        self.latest_manifest = 0
        self.latest_compactions = 0
        self.compactions_epoch = 0
        self.status: dict[ULID, CompactionStatus] = {}
        self.gone: set[ULID] = set()
        self.failed_reasons: set[ULID] = set()
        self.specs: dict[ULID, TieredCompactionSpec] = {}
        self.retention: dict[ULID, int] = {}
        self.outputs_seen: dict[tuple[ULID, ...], ULID] = {}
        self.started: dict[int, str] = {}
        self.max_started = 0
        self.proc_epoch: dict[str, int] = {}
        self.committed: dict[ULID, int] = {}  # compaction id -> manifest id of its commit
        self.commit_manifests: dict[int, ULID | None] = {}  # compactor-commit manifest -> id (if known)
        self.run_ssts_ever: set[ULID] = set()
        self.owner: dict[ULID, str | None] = {}  # Running job -> the worker id that claimed it
        self.compacted_outputs: dict[ULID, tuple[ULID, ...]] = {}  # the owner's Compacted result
        self.newest_job_ms = 0
        self.counts: dict[str, int] = defaultdict(int)

    def attach(self, trace) -> "CompactorChecks":
        trace.listeners.append(self.on_event)
        return self

    # -- events ------------------------------------------------------------------------------

    @listens("store.put", "store.result", "compactor_started", "panic", "compactor_error", "compaction_commit",
             "compaction_resume")
    def on_event(self, e: Event) -> None:
        kind = e.kind
        if kind == "store.put":
            f = e.f
            key = f["key"]
            if key.startswith(("manifest/", "compactions/")):
                self.pending[(e.process, f["n"])] = key
        elif kind == "store.result":
            f = e.f
            key = self.pending.pop((e.process, f["n"]), None)
            if key is not None and str(f["outcome"]).startswith("ok"):
                mid = _id_of(key, "manifest/", ".manifest")
                if mid is not None:
                    self._manifest_landed(e, mid, key)
                cid = _id_of(key, "compactions/", ".compactions")
                if cid is not None:
                    self._compactions_landed(e, cid, key)
                if key.startswith(FAILED_REASONS_DIR) and key.endswith(".json"):
                    self.failed_reasons.add(ULID.from_str(key[len(FAILED_REASONS_DIR):-len(".json")]))
        elif kind == "compactor_started":
            epoch = e.f["epoch"]
            self.counts["compactor_started"] += 1
            if epoch in self.started:
                raise InvariantViolation("CFENCE-3", e, f"epoch {epoch} already started by {self.started[epoch]}")
            self.started[epoch] = e.process
            self.proc_epoch[e.process] = epoch
            self.max_started = max(self.max_started, epoch)
        elif kind == "panic":
            raise InvariantViolation("CFENCE-3", e, "a compactor met an epoch that went backwards")
        elif kind == "compactor_error":
            error = str(e.f.get("error", ""))
            ident = "CFENCE-3" if error.startswith("CompactorEpochError") else "compactor"
            raise InvariantViolation(ident, e, f"compactor stopped: {error}")
        elif kind == "compaction_commit":
            f = e.f
            self._committed(e, ULID.from_str(f["id"]), f["manifest"])
        elif kind == "compaction_resume":
            self.counts["resumes"] += 1

    # -- manifests ---------------------------------------------------------------------------

    def _manifest_landed(self, e: Event, mid: int, key: str) -> None:
        m = decode_manifest_v2(bytes(self.store.get_now(key).data), key)
        self.counts["manifests"] += 1
        if mid in self.manifests:
            raise InvariantViolation("SEQMETA-2", e, f"{key} created twice")
        self.manifests[mid] = m
        self.latest_manifest = max(self.latest_manifest, mid)
        prev = self.manifests.get(mid - 1)
        if prev is None:
            if mid != 1:
                raise InvariantViolation("SEQMETA-2", e, f"{key} landed before manifest {mid - 1}")
            return
        if m.compactor_epoch < prev.compactor_epoch:
            raise InvariantViolation("CFENCE-3", e, f"manifest {mid} has compactor epoch {m.compactor_epoch} "
                                                    f"below {prev.compactor_epoch} of manifest {mid - 1}")
        if m.compactor_epoch != prev.compactor_epoch:  # a compactor's startup (step 1)
            if m.compactor_epoch < self.max_started:
                raise InvariantViolation("CFENCE-1", e, f"startup manifest {mid} with epoch {m.compactor_epoch} "
                                                        f"after compactor {self.max_started} started")
            return
        removed_l0 = {v.id for v in prev.l0} - {v.id for v in m.l0}
        if not removed_l0 and prev.compacted == m.compacted:
            return  # the writer's
        # A compactor commit (step 8).
        self.counts["commit_landings"] += 1
        epoch = self.proc_epoch.get(e.process)
        if epoch is None:
            raise InvariantViolation("CFENCE-1", e, f"manifest {mid} commits a compaction from {e.process}, "
                                                    "which has no started compactor")
        if epoch < self.max_started:
            raise InvariantViolation("CFENCE-1", e, f"compactor epoch {epoch} ({e.process}) commits manifest {mid} "
                                                    f"after compactor {self.max_started} started")
        old_runs = set(prev.compacted)
        new_runs = [r for r in m.compacted if r not in old_runs]
        outputs: tuple[ULID, ...] = ()
        if new_runs:
            if len(new_runs) > 1:
                raise InvariantViolation("COMPACT-3", e, f"manifest {mid} adds {len(new_runs)} sorted runs at once")
            outputs = tuple(v.sst_id for v in new_runs[0].ssts)
            again = [str(s) for s in outputs if s in self.run_ssts_ever]
            if again:
                raise InvariantViolation("COMPACT-3", e, f"manifest {mid} commits output SSTs {again} a second time")
        self.run_ssts_ever |= _run_sst_ids(m)
        if outputs:
            cid = self.outputs_seen.get(outputs)
        else:  # nothing written (every row dropped): the Running compaction with exactly these inputs
            removed_runs = {r.id for r in prev.compacted} - {r.id for r in m.compacted}
            cands = [i for i, st in self.status.items() if st in (S.RUNNING, S.COMPACTED) and i in self.specs
                     and set(self.specs[i].l0_view_ids) == removed_l0 and set(self.specs[i].sorted_runs) >= removed_runs]
            cid = cands[0] if len(cands) == 1 else None
        self.commit_manifests[mid] = cid
        self.check_owners_result(e, mid, cid, outputs)
        if cid is None:
            self.counts["commits_unidentified"] += 1
        else:
            if not outputs:
                self.counts["commits_empty"] += 1  # a job with no output SST (every row dropped)
            self._committed(e, cid, mid)

    def check_owners_result(self, e: Event, mid: int, cid: ULID | None, outputs: tuple[ULID, ...]) -> None:
        """COMPACT-5: the run manifest ``mid`` commits for ``cid`` is its owner's Compacted result."""
        result = self.compacted_outputs.get(cid) if cid is not None else None
        if outputs and result is not None and outputs != result:
            raise InvariantViolation("COMPACT-5", e, f"manifest {mid} commits compaction {cid} with outputs "
                                                    f"{[str(o) for o in outputs]}, not its owner's Compacted result "
                                                    f"{[str(o) for o in result]}")

    def _committed(self, e: Event, cid: ULID, mid: int) -> None:
        """COMPACT-3: ``cid`` committed as manifest ``mid`` (from a landing or an event)."""
        before = self.committed.get(cid)
        if before is not None and before != mid:
            raise InvariantViolation("COMPACT-3", e, f"compaction {cid} committed twice (manifests {before} and {mid})")
        self.committed[cid] = mid
        if before is None:
            self.counts["commits"] += 1
        self.commit_manifests.setdefault(mid, cid)
        if self.commit_manifests[mid] is None:
            self.commit_manifests[mid] = cid
        spec = self.specs.get(cid)
        base = self.manifests.get(mid - 1)
        if spec is not None and base is not None:
            missing = _inputs_missing(spec, base)
            if missing:
                raise InvariantViolation("COMPACT-3", e, f"compaction {cid} committed as manifest {mid} over manifest "
                                                        f"{mid - 1}, which lacks its inputs {missing}")

    # -- .compactions ------------------------------------------------------------------------

    def _compactions_landed(self, e: Event, cid: int, key: str) -> None:
        c: CompactionsV1 = decode_compactions(bytes(self.store.get_now(key).data), key)
        self.counts["compactions_files"] += 1
        if cid != self.latest_compactions + 1:
            raise InvariantViolation("SEQMETA-2", e, f"{key} landed after .compactions {self.latest_compactions}")
        self.latest_compactions = cid
        if c.compactor_epoch < self.compactions_epoch:
            raise InvariantViolation("CFENCE-3", e, f".compactions {cid} has epoch {c.compactor_epoch} below "
                                                    f"{self.compactions_epoch} of its predecessor")
        self.compactions_epoch = c.compactor_epoch
        if e.process not in self.non_compactors and c.compactor_epoch < self.max_started:
            raise InvariantViolation("CFENCE-2", e, f".compactions {cid} written by {e.process} with epoch "
                                                    f"{c.compactor_epoch} after compactor {self.max_started} started")
        latest = self.manifests.get(self.latest_manifest)
        present = set()
        for comp in c.recent_compactions:
            present.add(comp.id)
            prev = self.status.get(comp.id)
            new = comp.status
            if comp.id in self.gone:
                raise InvariantViolation("COMPACT-1", e, f"compaction {comp.id} trimmed unfinished, back as "
                                                        f"{new.name} in .compactions {cid}")
            if (prev, new) not in _LEGAL:
                raise InvariantViolation("COMPACT-1", e, f"compaction {comp.id}: {prev.name if prev else 'absent'} "
                                                        f"-> {new.name} in .compactions {cid}")
            self._worker_checks(e, cid, key, comp, prev)
            self.status[comp.id] = new
            if isinstance(comp.spec, TieredCompactionSpec):
                self.specs.setdefault(comp.id, comp.spec)
            if comp.ctx is not None:
                self.retention.setdefault(comp.id, comp.ctx.retention_min_seq)
            if comp.output_ssts:
                self.outputs_seen.setdefault(tuple(o.id for o in comp.output_ssts), comp.id)
            if new is S.SCHEDULED and prev is S.SUBMITTED and isinstance(comp.spec, TieredCompactionSpec):
                missing = _inputs_missing(comp.spec, latest) if latest is not None else ["(no manifest)"]
                if missing:
                    raise InvariantViolation("COMPACT-3", e, f"compaction {comp.id} recorded Scheduled in .compactions "
                                                            f"{cid} but manifest {self.latest_manifest} lacks its "
                                                            f"inputs {missing}")
            if new is S.FAILED and prev is not S.FAILED and latest is not None:
                outs = [o.id for o in outputs_in_order(comp)]
                if outs and set(outs) <= _run_sst_ids(latest):
                    raise InvariantViolation("COMPACT-10", e, f"compaction {comp.id} recorded Failed in .compactions "
                                                             f"{cid} although manifest {self.latest_manifest} holds its "
                                                             f"outputs as a sorted run (committed before a restart: "
                                                             f"Completed)")
                if not outs and comp.id in self.committed:  # an empty job: its commit removed its sources
                    raise InvariantViolation("COMPACT-10", e, f"compaction {comp.id} (no output) recorded Failed in "
                                                             f".compactions {cid} although manifest "
                                                             f"{self.committed[comp.id]} committed it (before a "
                                                             f"restart: Completed)")
            if new is S.COMPLETED and prev is not S.COMPLETED:
                self.counts["completed"] += 1
                listed = _run_sst_ids(latest) if latest is not None else set()
                missing_out = [str(o.id) for o in comp.output_ssts if o.id not in listed]
                if missing_out:
                    raise InvariantViolation("COMPACT-2", e, f"compaction {comp.id} Completed in .compactions {cid} "
                                                            f"but manifest {self.latest_manifest} lacks outputs "
                                                            f"{missing_out}")
        self.newest_job_ms = max((comp.id.milliseconds for comp in c.recent_compactions), default=self.newest_job_ms)
        # Trimming keeps the active compactions and one finished compaction: a compaction that
        # finishes may be trimmed in the very write that ends it (its Completed or Failed is then
        # never written). Allowed only if it did finish: committed to the manifest, or its
        # failure reason (``compactions/failed/<id>.json``) was stored first.
        for ident, st in list(self.status.items()):
            if st in _ACTIVE and ident not in present:
                if ident not in self.committed and ident not in self.failed_reasons:
                    raise InvariantViolation("COMPACT-1", e, f"compaction {ident} ({st.name}) dropped from "
                                                            f".compactions {cid} unfinished")
                del self.status[ident]  # finished and trimmed at once: it may never come back
                self.gone.add(ident)
                self.counts["trimmed_unseen"] += 1

    def _worker_checks(self, e: Event, cid: int, key: str, comp, prev) -> None:
        """COMPACT-5 (owner), COMPACT-6 (ranges), COMPACT-7 (ULID rules) of one entry."""
        try:
            check_subcompactions(comp, key)
        except CorruptionError as err:
            raise InvariantViolation("COMPACT-6", e, str(err)) from None
        if prev is None:
            if comp.id.milliseconds < self.newest_job_ms:
                raise InvariantViolation("COMPACT-7", e, f"new compaction {comp.id} in .compactions {cid} is older "
                                                        f"than the newest job of the file before ({self.newest_job_ms} ms)")
        old_outs = [o.id for o in comp.output_ssts if o.id.milliseconds < comp.id.milliseconds]
        if old_outs:
            raise InvariantViolation("COMPACT-7", e, f"compaction {comp.id}: output {old_outs[0]} is older than its job")
        wid = comp.worker.worker_id if comp.worker is not None else None
        if comp.status is S.RUNNING and prev is not S.RUNNING:
            self.owner[comp.id] = wid
        elif prev is S.RUNNING and comp.status in (S.RUNNING, S.COMPACTED) and wid != self.owner.get(comp.id):
            raise InvariantViolation("COMPACT-5", e, f"compaction {comp.id} owned by worker {self.owner.get(comp.id)} "
                                                    f"is {comp.status.name} under worker {wid} in .compactions {cid}")
        if comp.status is S.COMPACTED and prev is not S.COMPACTED:
            self.compacted_outputs[comp.id] = tuple(o.id for o in comp.output_ssts)

    # -- the end: RESUME-1 and RESUME-2 ------------------------------------------------------

    async def verify_outputs(self, store) -> int:
        """Read the outputs of every identified committed compaction and check RESUME-2 and
        RESUME-1 against an independent merge of its inputs. Returns how many were checked.
        Raises :class:`AssertionError` naming the invariant."""
        checked = 0
        read: dict[ULID, list[Row]] = {}  # SSTs are never rewritten: each read once (an output is a later input)
        # The database's clock: the latest writer time any manifest recorded (COMPACT-12).
        clock_ms = max((m.last_l0_clock_tick for m in self.manifests.values()), default=0)
        for mid, cid in sorted(self.commit_manifests.items()):
            if cid is None:
                continue
            spec, m, base = self.specs.get(cid), self.manifests[mid], self.manifests[mid - 1]
            if spec is None or cid not in self.retention:
                continue
            out_run = [r for r in m.compacted if r.id == spec.destination]
            assert len(out_run) <= 1
            outputs = [v.sst_id for v in out_run[0].ssts] if out_run else []
            got: list[Row] = []
            for sst_id in outputs:
                got.extend(await _rows(store, sst_id, read))
            for a, b in zip(got, got[1:]):
                if (a.key, -a.seq) >= (b.key, -b.seq):
                    raise AssertionError(f"RESUME-2: compaction {cid} (manifest {mid}) outputs {a.key!r}@{a.seq} "
                                         f"then {b.key!r}@{b.seq}")
            single = await oracle.single_process_rows(store, spec, base, self.retention[cid],
                                                      now_ms=expiry_clock_ms(base))
            got_rows = [oracle.as_tuple(r) for r in got]
            early = oracle.purged_early(got_rows, single, clock_ms)  # COMPACT-12: exactly a later clock's run
            if early and got_rows == await oracle.single_process_rows(store, spec, base, self.retention[cid],
                                                                      now_ms=max(r[4] for r in early)):
                raise AssertionError(oracle.expiry_message(cid, mid, early[0], clock_ms))
            expected = await _expected_rows(store, spec, base, self.retention[cid], read, clock_ms)
            got_t = [(r.key, r.seq, int(r.kind), r.value) for r in got]
            if expected is not None and got_t != expected:
                missing = sorted(set(expected) - set(got_t))[:3]
                extra = sorted(set(got_t) - set(expected))[:3]
                raise AssertionError(f"RESUME-1: compaction {cid} (manifest {mid}) outputs {len(got_t)} rows, an "
                                     f"uninterrupted run {len(expected)}; missing {missing}, extra {extra}")
            oracle.compare(cid, mid, got_rows, single)  # COMPACT-9
            checked += 1
        return checked


async def _rows(store, sst_id: ULID, read: dict[ULID, list[Row]]) -> list[Row]:
    """The rows of an SST (``read``: those read before, by id; do not change the list)."""
    out = read.get(sst_id)
    if out is not None:
        return out
    reader = await SstReader.open(store, sst_key(sst_id))
    out = []
    async for rows in reader.scan_blocks():
        out.extend(rows)
    read[sst_id] = out
    return out


async def _expected_rows(store, spec: TieredCompactionSpec, base: ManifestV2, retention_min_seq: int,
                         read: dict[ULID, list[Row]], clock_ms: int) -> list[tuple] | None:
    """What an uninterrupted compaction of ``spec`` over ``base`` writes (None: not checkable: a
    merge operand, or a row with an expiry the database's clock ``clock_ms`` reached)."""
    l0 = {v.id: v for v in base.l0}
    runs = {r.id: r for r in base.compacted}
    views = [[l0[v]] for v in spec.l0_view_ids] + [list(runs[r].ssts) for r in spec.sorted_runs]
    tagged: list[tuple[bytes, int, int, Row]] = []
    for order, source in enumerate(views):
        for view in source:
            if view.visible_range is not None:
                return None
            for row in await _rows(store, view.sst_id, read):
                if (row.expire_ts_ms is not None and row.expire_ts_ms <= clock_ms) or row.kind is RowKind.MERGE_OPERAND:
                    return None
                tagged.append((row.key, -row.seq, order, row))
    tagged.sort(key=lambda t: t[:3])
    bottom = not any(r.id < spec.destination for r in base.compacted)
    out: list[tuple] = []
    key = None
    seen_at_or_below = False
    last_seq = None
    for k, _nseq, _order, row in tagged:
        if k != key:
            key, seen_at_or_below, last_seq = k, False, None
        elif row.seq == last_seq:
            continue  # the same version in two sources: the newer source's copy counts
        last_seq = row.seq
        if row.seq <= retention_min_seq:
            if seen_at_or_below:
                continue
            seen_at_or_below = True
            if bottom and row.kind is RowKind.TOMBSTONE:
                continue
        out.append((row.key, row.seq, int(row.kind), row.value))
    return out
