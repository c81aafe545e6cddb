"""The bug catalogue: known bug classes, each re-introducible on purpose in the real code.

Every entry names a switch. Protocol code tests ``"<name>" in runtime.bugs`` at the one site
where the bug lives (``Runtime.bugs`` is an empty frozenset in production, so a switched-off
bug costs one lookup) and, when the switch is on, does the wrong thing the entry describes.
The simulator switches bugs on per run (``sim run --seed S --bug NAME``) and must catch each
one: ``sim hunt --bug NAME`` (:mod:`sim.campaign.hunt`) runs seeds until a run fails and reports
which invariant fired; ``tests/test_sim_bugs.py`` holds every entry to its seed budget. Adding
an entry is one :class:`Bug` in :data:`CATALOGUE` plus its switch at the site (a new scenario:
one line in :data:`sim.scenarios.registry.SCENARIOS`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

import attrs

from slatedb.runtime import switches

from sim.world import invariants

from sim.scenarios import registry as scenarios
from sim.scenarios.catalogue_unit import PLANNED, UNIT_CAUGHT  # noqa: F401 (re-exported)
@attrs.frozen
class Bug:
    """One catalogued bug.

    ``bug_class`` quotes the class of ``shared/reference/verification-anchors.md`` ("Known bug
    classes") it belongs to, ``source`` the RFC / protocol step whose rule it breaks, ``site``
    where its switch is. ``invariants`` are the ids (``spec/protocols/README.md``) expected to
    fire in ``workload``; ``budget`` is a number of seeds (0..budget-1) within which the workload
    must detect it (measured with ``sim hunt --all``, with a margin; see docs/simulation.md).
    ``also`` names other workloads that catch it too.
    """

    name: str
    description: str
    bug_class: str
    source: str
    site: str
    workload: str
    invariants: tuple[str, ...]
    budget: int
    also: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", self.name), self.name
        assert self.workload in WORKLOADS and all(w in WORKLOADS for w in self.also), self
        assert self.invariants and all(invariants.is_id(i) for i in self.invariants), self
        assert self.budget > 0, self


#: Any id a violation may name (:data:`sim.world.invariants.ID`: spec ids, the simulator's oracles).
INVARIANT_ID = invariants.ID

#: Scenario name -> ``module:function`` of the one scenario table (:mod:`sim.scenarios.registry`).
WORKLOADS: dict[str, str] = {s.name: s.runner for s in scenarios.SCENARIOS}

_WAL_CLASS = "Zombie writer: an old writer keeps acknowledging writes after a newer one fenced it (RFC 001)"
_REPLAY_CLASS = ("Crash during WAL replay, or the replay point advanced past data not yet in L0: "
                 "acknowledged writes lost")
_RESUME_CLASS = "Compaction resume re-emits or skips the entry at the last written key (RFC 002 ResumingIterator)"
_TWO_COMPACTORS_CLASS = "Two compactors both commit (compactor fencing on `.manifest` then `.compactions`, RFC 002)"
_INPUTS_CHANGED_CLASS = "Compaction finishes after its inputs changed (validation on resume, RFC 002)"
_ZOMBIE_WORKER_CLASS = ("Distributed compaction: a reclaimed worker's late writes, or ranges that overlap or are "
                        "committed unfinished (official coordinator/worker protocol, RFC 0025/0028)")
_GC_CLASS = "GC deletes SSTs still used by a reader, a checkpoint, or an in-flight compaction (RFC 000 / RFC 002)"
_PROJ_CLASS = "Clone/projection leaks rows outside the visible range, or union seqs collide (RFC 000)"
_TXN_CLASS = ("Transactions: a commit check that misses a concurrent write (lost update, write skew under "
              "serializable isolation, a non-serializable committed history)")
_LOAD_CLASS = "Bulk load: a commit that loses the live writer's WAL tail, or shows part of a load (RocksDB ingest)"
_SEQMETA_CLASS = ("Stalled writer vs GC over create-if-absent sequence files: a stale writer re-creates a "
                  "deleted N+1 and believes it committed (RFC 004)")

CATALOGUE: tuple[Bug, ...] = (
    Bug(switches.GROUP_ACK_EARLY, "group commit: a durable wait arriving while a WAL flush is in flight joins "
        "that group and returns when it lands, before the WAL object holding its own row exists",
        _REPLAY_CLASS, "RFC 001 Acknowledgements; writer.md step 8, DUR-3", "slatedb/db/write_path.py WritePath._want_durable",
        "db", ("DUR-3",), 10),
    Bug(switches.ZOMBIE_ACK, "a writer that halted while its WAL write was in flight still acknowledges it",
        _WAL_CLASS, "RFC 001 Acknowledgements; writer.md step 8", "slatedb/db/flushers.py Flushers._write_wal",
        "db", ("FENCE-3",), 30, also=("takeover",)),
    Bug(switches.FENCE_IGNORED, "a WAL write that finds its id taken skips to the next id without reading the "
        "manifest epoch: a zombie writes on above the newer writer's fence",
        _WAL_CLASS, "RFC 001 Writer Protocol; wal-fencing.md step 7", "slatedb/wal/writer.py WalWriter.write",
        "db", ("DUR-1", "FENCE-3"), 12, also=("takeover",)),
    Bug(switches.NO_EPOCH_RECHECK, "after its fence lands the writer does not re-read the manifest epoch, so an "
        "older writer that listed wal/ late fences above a newer one and acknowledges writes it never replays",
        _WAL_CLASS, "RFC 001 Writer Protocol; wal-fencing.md step 5 (model UNSAFE_NO_EPOCH_RECHECK)",
        "slatedb/wal/writer.py WalWriter.fence", "takeover", ("DUR-1",), 24, also=("db",)),
    Bug(switches.L0_COMMIT_UNFENCED, "a writer commits its L0 flush to the manifest without comparing the manifest's "
        "writer epoch with its own: a fenced zombie's L0 SST lands after a newer writer took over",
        _WAL_CLASS, "RFC 001 Manifest Updates (fencing of manifest writes); wal-fencing.md FENCE-5",
        "slatedb/db/flushers.py Flushers._flush_imm", "db", ("FENCE-5",), 40),
    Bug(switches.REPLAY_SKIP, "open does not replay the WAL above replay_after_wal_id",
        _REPLAY_CLASS, "RFC 001 Writer Protocol; writer.md step 4", "slatedb/db/core.py DbCore._open",
        "db", ("DUR-1", "LIN"), 8, also=("takeover",)),
    Bug(switches.REPLAY_POINT_AHEAD, "an L0 flush advances replay_after_wal_id to the writer's last WAL id instead "
        "of its memtable's cut, past rows still only in later memtables",
        _REPLAY_CLASS, "RFC 003; writer.md steps 7 and 9", "slatedb/db/flushers.py Flushers._flush_imm",
        "takeover", ("DUR-1", "LIN"), 30, also=("db",)),
    Bug(switches.REPLAY_PROGRESS_EARLY, "open records replay progress (replay_after_wal_id = fence - 1) in the "
        "manifest before the replayed rows reach L0; a crash or fence before that flush loses them",
        _REPLAY_CLASS, "RFC 001 Writer Protocol; writer.md step 4", "slatedb/db/core.py DbCore._open",
        "takeover", ("DUR-1", "LIN", "DUR-2"), 40, also=("db",)),
    Bug(switches.ROW_CLOCK_UNCLAMPED, "a writer stamps rows with its wall clock as it reads, not kept at or above "
        "the database's newest create time (last_l0_clock_tick and the replayed rows at open, each row after): a "
        "writer on a host whose clock is behind, or a clock stepped back, writes rows older than the tick, which the "
        "official engine refuses when it replays them (InvalidClockTick)", _REPLAY_CLASS,
        "upstream MonotonicClock; writer.md steps 4 and 7, DUR-5", "slatedb/db/core.py DbCore.__init__ "
        "(slatedb/db/state.py WriterState.append, stamp)", "takeover", ("DUR-5",), 8, also=("db",)),
    Bug(switches.L0_TICK_COMMIT_NOW, "an L0 flush records the commit's clock as last_l0_clock_tick, not its table's "
        "newest create time: rows written while the flush was in flight are older than the tick (the engine-switch "
        "loss fixed in b216176)", _REPLAY_CLASS, "upstream KVTable::last_tick; writer.md step 9, DUR-5",
        "slatedb/db/flushers.py Flushers._flush_imm", "db", ("DUR-5",), 8, also=("takeover",)),
    Bug(switches.NO_BOUNDARY_CHECK, "a .manifest (or .compactions) create that succeeded is reported committed without the post-create "
        "read of its gc/*.boundary file",
        _SEQMETA_CLASS, "RFC 004 Checking Boundaries After Writes; sequenced-metadata.md step 4",
        "slatedb/manifest/store.py ManifestStore.try_write", "seqmeta", ("SEQMETA-1", "SEQMETA-2"), 8,
        also=("db",)),
    Bug(switches.AMBIGUOUS_CREATE_TRUST, "after an ambiguous create-if-absent, \"already exists\" on a retry is taken "
        "as our own success without reading the object back",
        "Ambiguous outcomes (request applied, reply lost): a retried conditional create mistakes "
        "another writer's object for its own (RFC 001 / RFC 004 create-if-absent CAS)",
        "RFC 001 Manifest Updates; wal-fencing.md FENCE-4", "slatedb/objstore/retry.py create_if_absent",
        "seqmeta", ("SEQMETA-1", "SEQMETA-2"), 20, also=("db", "takeover", "store")),
    Bug(switches.RETRY_ONE_SHORT, "the production retry bound stops one attempt early: a call gives up with "
        "ObjectStoreRetriesExhaustedError after max_retries attempts instead of max_retries + 1",
        "Off-by-one in a retry bound: a configured object_store_max_retries honoured one attempt short "
        "(independent mutation testing, issue 27 item 5)",
        "spec/objstore.md RETRY-1", "slatedb/objstore/retry.py _Backoff.wait", "store-bounded", ("RETRY-1",), 4),
    Bug(switches.BOUNDARY_PUT_TRUSTED, "GC takes a boundary-file write that failed ambiguously (transient error or lost "
        "reply) as applied, without reading the boundary back, and deletes metadata files above the durable boundary",
        _SEQMETA_CLASS, "RFC 004 Advancing Boundaries; sequenced-metadata.md GC step 2 (model UNSAFE_GC_DELETE_FIRST)",
        "slatedb/manifest/store.py SequencedStore.advance_boundary", "seqmeta", ("BOUNDARY-1",), 10),
    # -- compaction (sim/scenarios/compactor.py; budgets from `sim hunt --rate --seeds 200`) --
    Bug(switches.RESUME_REEMIT, "a resumed compaction skips only the versions of the cursor key newer than the "
        "cursor (seq > last_seq), so it writes the last row of its last output SST again",
        _RESUME_CLASS, "RFC 002 Resuming Partial Compactions; compaction.md step 7 (model UNSAFE_RESUME_REEMIT)",
        "slatedb/compactor/executor.py Executor.run", "compactor", ("RESUME-2",), 8),
    Bug(switches.RESUME_SKIP_ENTRY, "a resumed compaction drops the first row after its cursor (the newest version "
        "of the next key) along with the rows already written",
        _RESUME_CLASS, "RFC 002 Resuming Partial Compactions; compaction.md step 7 (model UNSAFE_RESUME_SKIP_KEY)",
        "slatedb/compactor/executor.py Executor.run", "compactor", ("RESUME-1",), 25),
    Bug(switches.COMPACTOR_NO_SECOND_BUMP, "a starting compactor bumps the epoch in the manifest only, not in "
        ".compactions (and takes a lower epoch there as normal): a zombie goes on writing .compactions",
        _TWO_COMPACTORS_CLASS, "RFC 002 On startup; compaction.md step 2 (model UNSAFE_NO_SECOND_BUMP)",
        "slatedb/compactor/compactor.py Compactor.start", "compactor", ("CFENCE-2",), 32),
    Bug(switches.COMPACTOR_NO_COMMIT_FENCE, "a compactor commits a finished compaction without comparing the "
        "manifest's compactor epoch with its own: a zombie commits after a newer compactor started",
        _TWO_COMPACTORS_CLASS, "RFC 003 Compaction Executor epoch checks; compaction.md step 8",
        "slatedb/compactor/compactor.py Compactor._commit", "compactor", ("CFENCE-1",), 100),
    # (a rare window: the zombie must be frozen inside its commit while its replacement starts;
    # 5 of 200 seeds, first seed 81 since the purge mode took seed 26 (7 of 200, first 51, before
    # COMPACT-10/11): the budget covers the first detecting seed, not the 1/1000 rule)
    Bug(switches.COMPACTION_NO_REVALIDATE, "a resumed compaction is not validated against the current manifest "
        "(at restart nor at commit): one committed before a crash runs again over inputs that are gone",
        _INPUTS_CHANGED_CLASS, "RFC 002 On compaction job complete; compaction.md steps 5, 8 "
        "(model UNSAFE_NO_REVALIDATE_AT_COMMIT)", "slatedb/compactor/compactor.py Compactor._decide",
        "compactor", ("COMPACT-3", "ESCAPE-1"), 32),
    Bug(switches.COMPACTION_RECOMMIT_FAILS, "a Compacted job whose commit landed before a restart is validated "
        "before its outputs are looked for in the manifest: its sources are gone (replaced by its own run), so "
        "the next coordinator records it Failed (the order before COMPACT-10)",
        _INPUTS_CHANGED_CLASS, "RFC 002 On compaction job complete; compaction.md step 8 (model UNSAFE_RECOMMIT_VALIDATES_FIRST)",
        "slatedb/compactor/compactor.py Compactor._commit", "compactor", ("COMPACT-10",), 40),
    Bug(switches.EMPTY_RECOMMIT_FAILS, "a Compacted job with no output SST whose commit landed before a restart is never "
        "found landed (outputs only): its sources are gone, it is recorded Failed", _INPUTS_CHANGED_CLASS, "compaction.md "
        "step 8", "slatedb/compactor/compactor.py Compactor._commit", "compactor", ("COMPACT-10",), 40, also=("compactor-workers",)),
    Bug(switches.STRADDLE_LATER_SST_ONLY, "a point read of a key that starts an SST of a sorted run consults only that "
        "SST, not the one before it: the key's newer versions, which an output cut after any row left at that SST's "
        "end, are missed and an older version is read", "Reads miss the newest version of a key (RFC 000 Reads)",
        "reader.md READ-7 (a key spanning SSTs of a run; upstream #1490)", "slatedb/lsm/view.py SortedRunView.holding",
        "compactor", ("READ-7",), 16, also=("compactor-workers",)),
    Bug(switches.EXPIRY_OWN_CLOCK, "a compaction judges TTL expiry by its worker's own clock, not the manifest's "
        "last_l0_clock_tick: a compactor whose clock runs ahead of the writer's turns into tombstones (and at the bottom "
        "drops) rows the writer still reads", "Expiry judged by the wrong clock: data purged before its time "
        "(upstream compaction_clock_tick)", "compaction.md step 6, COMPACT-12", "slatedb/compactor/worker.py Worker._run",
        "compactor", ("COMPACT-12",), 16, also=("compactor-workers",)),
    # -- distributed compaction: coordinator and workers (the official 0.17 protocol) --
    Bug(switches.HEARTBEAT_NO_OWNER_CHECK, "a worker's heartbeat writes its progress into its job without checking "
        "it still owns it: a reclaimed (stalled) worker takes the job back from its new owner",
        _ZOMBIE_WORKER_CLASS, "official worker protocol (heartbeat re-checks the worker id); compaction.md W5",
        "slatedb/compactor/worker.py Worker._heartbeat", "compactor-workers", ("COMPACT-5", "RESUME-1"), 60),
    # (compactor-workers: 3 of 100 seeds, first seed 11 since the traces moved on 2026-11-27;
    # compactor: 3 of 400, first seed 354, since its idle writer's flusher stopped waking)
    Bug(switches.WORKER_FINISH_UNCHECKED, "a worker finishes its job (Compacted) without checking it still owns "
        "it: a reclaimed worker's late output replaces the new owner's and is committed",
        _ZOMBIE_WORKER_CLASS, "official worker protocol (finish re-checks the worker id); compaction.md W6",
        "slatedb/compactor/worker.py Worker._run", "compactor-workers", ("COMPACT-5", "COMPACT-1"), 40, also=("compactor",)),
    Bug(switches.SUBRANGES_OVERLAP, "each subcompaction runs to the end of the next range: ranges overlap and "
        "rows are written twice", _ZOMBIE_WORKER_CLASS, "official subcompactions; compaction.md W3/W4",
        "slatedb/compactor/worker.py Worker._run", "compactor", ("COMPACT-6", "RESUME-2", "RESUME-1"), 24, also=("compactor-workers",)),
    Bug(switches.COMMIT_UNFINISHED_RANGES, "a worker writes Compacted after its first range: the coordinator "
        "commits a job before every subrange finished, losing the other ranges' rows",
        _ZOMBIE_WORKER_CLASS, "official worker protocol (Compacted holds every range's outputs); compaction.md W6",
        "slatedb/compactor/worker.py Worker._run", "compactor", ("RESUME-1", "READ-7", "ESCAPE-1"), 24, also=("compactor-workers",)),
    Bug(switches.CLAIM_UNCHECKED, "a worker's claim does not re-check, on the file it writes over, that the job is "
        "still Scheduled and free: a worker that lost the claim race takes the job from the one that won it",
        _ZOMBIE_WORKER_CLASS, "official worker protocol (claim by CAS of a Scheduled job with no worker); "
        "compaction.md W1", "slatedb/compactor/worker.py Worker.step", "compactor-workers", ("COMPACT-5",), 6),
    Bug(switches.OUTPUTS_IN_ID_ORDER, "a worker's Compacted result lists its outputs by SST id (the order they were "
        "written) instead of in range order: with a job's ranges running at once the sorted run is out of key order",
        _ZOMBIE_WORKER_CLASS, "official worker protocol (outputs concatenated in range order); compaction.md W6",
        "slatedb/compactor/worker.py Worker._run", "compactor-workers", ("RESUME-2", "COMPACT-9", "COMPACT-4"), 6),
    Bug(switches.RESUME_REPLANS_RANGES, "a worker taking over a job with recorded ranges plans ranges of its own "
        "(its max_subcompactions) and keeps range i's recorded outputs as its new range i's progress",
        _ZOMBIE_WORKER_CLASS, "official worker protocol (a resumed job keeps its recorded ranges); compaction.md W3",
        "slatedb/compactor/worker.py Worker._run_claimed", "compactor-workers", ("COMPACT-6", "RESUME-1", "COMPACT-9"),
        60),
        # -- GC, checkpoints, readers, clones (sim/scenarios/gc.py; figures in docs/simulation.md) --
    Bug(switches.GC_IGNORES_CHECKPOINTS, "GC takes no checkpoint as active: it keeps only what the latest manifest "
        "references and deletes the manifests, SSTs and WAL objects that checkpoints pin",
        _GC_CLASS, "RFC 000 Garbage Collector (set M); checkpoints-gc.md steps 6-8 (model UNSAFE_GC_IGNORES_CHECKPOINTS)",
        "slatedb/gc/collector.py GarbageCollector.snapshot", "gc", ("GC-1", "GC-2", "CKPT-1", "CKPT-2", "READ-2"), 8),
    Bug(switches.GC_NO_MIN_AGE, "GC deletes unreferenced SSTs whatever their age (no min_age, no ULID cutoff): an L0 "
        "SST or a compaction output uploaded but not yet committed or recorded goes",
        _GC_CLASS, "RFC 000 Garbage Collector (older than min_age); checkpoints-gc.md step 8 (model "
        "UNSAFE_GC_IGNORES_MIN_AGE)", "slatedb/gc/collector.py GarbageCollector._collect_ssts", "gc", ("GC-4", "GC-3", "GC-1", "READ-4"), 8),
    Bug(switches.GC_IGNORES_INFLIGHT_COMPACTION, "GC ignores what compactions are in flight (their recorded outputs and "
        "inputs, and the compactions watermark of the ULID cutoff): only min_age protects an uncommitted output",
        _GC_CLASS, "RFC 002 Garbage Collection Integration (issue #604); checkpoints-gc.md GC-3",
        "slatedb/gc/collector.py GarbageCollector._collect_ssts", "gc", ("GC-3", "GC-4", "GC-1", "READ-4"), 16),
    Bug(switches.GC_DELETE_BEFORE_BOUNDARY, "GC deletes .manifest / .compactions files up to the boundary it wants without "
        "first making that boundary durable",
        _SEQMETA_CLASS, "RFC 004 Boundary Files; sequenced-metadata.md GC step 2 (model UNSAFE_GC_DELETE_FIRST)",
        "slatedb/gc/sequenced.py settle_boundary", "gc", ("BOUNDARY-1",), 8),
    Bug(switches.EXPIRED_CHECKPOINT_FATAL, "a managed DbReader whose checkpoint expired or was collected (it froze past its "
        "lifetime) fails for good instead of establishing a new one",
        "An expired checkpoint breaks a reader that still uses it (RFC 000 Readers)",
        "RFC 000 Checkpoint Maintenance; issue 6 (a reader re-establishes after expiry)",
        "slatedb/reader/core.py ReaderCore.maintain", "gc", ("READ-4",), 45),
    Bug(switches.READER_IGNORES_NEW_SSTS, "a managed DbReader does not re-establish its checkpoint when the SST set of the "
        "latest manifest changes (an L0 flush, a compaction): it stays a valid prefix but stops catching up",
        "A reader that stops following the database serves an ever older state (RFC 000 Readers)",
        "RFC 000 Readers (poll the manifest, re-establish on change); reader.md READ-5",
        "slatedb/reader/core.py ReaderCore.maintain", "gc", ("READ-5",), 12),
    Bug(switches.SNAPSHOT_UNCAPPED, "a Db.snapshot()'s reads are not capped at its sequence number: writes made after it "
        "show through the memtable it pinned (the live one, still taking writes), so a snapshot held across "
        "flushes, compactions and GC reads differently later",
        "Snapshot isolation: a read through a snapshot, a checkpoint or a reader sees state newer than its sequence "
        "(RFC 001 snapshots; RFC 000 checkpoints)",
        "reader.md READ-6 (a read through a snapshot returns exactly the state at its sequence)",
        "slatedb/db/common.py SnapshotLifecycle._state", "gc", ("READ-6",), 6),
    Bug(switches.WRITER_CHECKPOINT_ORPHANED, "a writer that opens keeps the previous writer's checkpoint with its "
        "WriterCheckpoint metadata stripped instead of replacing it (what an engine rewriting a manifest it does not "
        "understand did, issue 25), and writers mint plain checkpoint ids (the id rule of issue 25 off, which would "
        "recognise the orphan by its id): a checkpoint that never expires pins its manifest, SSTs and WAL range for ever "
        "and blocks a hard destroy; no trace oracle watches it, slatedb check at the end of the run names it",
        "Checkpoint leak: a checkpoint nobody owns outlives its holder and pins data for ever (RFC 000 writers)",
        "RFC 000 Writers (Establishing Initial Checkpoint: the new writer deletes the old one); checkpoints-gc.md CKPT-3",
        "slatedb/db/core.py DbCore._open", "takeover", ("CKPT-3",), 2),
    Bug(switches.WRITER_CHECKPOINT_RELEASED_AT_FLUSH, "every L0 flush drops the writer checkpoint, as only a close's "
        "last flush may (writer.md step 12): a running writer pins nothing, so once a compactor replaced its L0 SSTs "
        "GC may collect what the writer still reads before it adopts the new manifest (protected meanwhile only by "
        "the compactor's pin and GC's min_age, which is why no read fails in the worlds run)",
        "Checkpoint loss: a holder's checkpoint released while it still reads through it (RFC 000 writers)",
        "RFC 000 Writers (Refreshing the Checkpoint); writer.md steps 9 and 12, CKPT-4",
        "slatedb/db/flushers.py Flushers._flush_imm", "db", ("CKPT-4",), 4, also=("gc", "takeover")),
    Bug(switches.COMPACTOR_PIN_KEPT_AT_CLOSE, "a writer's close drops its writer checkpoint but leaves its in-process "
        "compactor's startup pin: harmless to reads, yet a hard destroy of the closed database is refused until the "
        "pin expires (checkpoint_lifetime, 15 minutes by default)",
        "Checkpoint leak: a pin nobody needs outlives its holder and blocks deletion (RFC 000 hard delete)",
        "RFC 000 Deleting a Database (hard: no active checkpoints); writer.md step 12, CKPT-5",
        "slatedb/db/services.py Services._close_pins", "db", ("CKPT-5",), 4, also=("takeover",)),
    Bug(switches.TRACKER_FORGETS, "an L0 flush records its (seq, time) pair on an empty sequence tracker instead of "
        "the manifest's: every earlier pair is dropped, so Admin.get_sequence_for_timestamp and its inverse answer "
        "from one pair (a realistic slip: building the new tracker from a default)",
        "Metadata loss: a manifest field rewritten from scratch instead of carried forward",
        "RFC 0012 sequence tracker (appended only); writer.md step 9, TRACK-2",
        "slatedb/db/flushers.py Flushers._flush_imm", "db", ("TRACK-2",), 12),
    Bug(switches.CLONE_COPIES_ALL_WAL, "a clone copies every parent WAL object above the source manifest's replay point, "
        "not only those up to its wal_id_last_seen: parent writes made after the checkpoint leak into the clone",
        "Clone/projection leaks rows outside the visible range (RFC 000 Clones)",
        "RFC 000 Clones (copy the WAL range); clone.md step 6 (model UNSAFE_CLONE_COPY_ALL_WAL)",
        "slatedb/clone/ops.py _copy_wal", "gc", ("CLONE-3", "READ-2"), 20),
    Bug(switches.GC_DETACH_LATEST_ONLY, "GC detaches a clone from its parent when the clone's latest manifest "
        "references none of the parent's SSTs, ignoring the manifests the clone's active checkpoints pin: the parent "
        "releases the clone's final checkpoint and collects SSTs that a reader of an older clone checkpoint still reads",
        _GC_CLASS, "RFC 000 Garbage Collector (Detach the clone if possible: no SST referenced by the latest manifest "
        "or any checkpointed manifest); clone.md CLONE-4", "slatedb/gc/collector.py GarbageCollector._detach_clones",
        "gc", ("CLONE-4",), 8),
    Bug(switches.STAGE_IGNORES_LOAD_END, "a load's task attempts never check its open marker while they stage: an "
        "attempt still running when the load ended (a losing speculative attempt, after the commit or the abort) "
        "leaves its staged SSTs or its shard database behind, named by nothing the clean-up will read again",
        _LOAD_CLASS, "bulk-load.md steps 2 and S2 (the marker checked after every write); LOAD-10",
        "slatedb/spark/load.py stage_sorted", "load", ("LOAD-10",), 16),
    # -- projection and union (sim/scenarios/rescale.py) --
    Bug(switches.PROJECTION_WIDENS_VIEW, "a projection sets each view's visible range to the projection range (bounded by "
        "the next run SST's start) without intersecting it with what the view showed: a view can widen past its "
        "SST's keys or past an earlier projection's range",
        _PROJ_CLASS, "RFC 000 Projection (visible ranges only narrow); projection-union.md step P3 "
        "(model UNSAFE_PROJECT_NO_NARROW)", "slatedb/projection/ops.py _narrow", "rescale", ("PROJ-2",), 4),
    Bug(switches.UNION_SEQ_NOT_MAX, "a union takes last_l0_seq from the first source (in key order), not the maximum: "
        "new writes can get seqs below carried-over rows and be shadowed by them",
        _PROJ_CLASS, "RFC 000 Union (last_l0_seq is the maximum); projection-union.md step U4 "
        "(model UNSAFE_UNION_SEQ_FIRST)", "slatedb/projection/ops.py union", "rescale", ("PROJ-3",), 8),
    Bug(switches.UNION_EXTERNAL_DBS_NOT_MERGED, "a union copies every source's external_dbs entries without merging "
        "those with one (path, source_checkpoint_id): entries multiply with every split/merge cycle",
        _PROJ_CLASS, "RFC 000 Union (external_dbs deduplicated); projection-union.md step U2",
        "slatedb/projection/ops.py _merge_external", "rescale", ("PROJ-5",), 4),
    Bug(switches.UNION_RELEASES_SOURCE_CHECKPOINT_EARLY, "the creator of a union deletes its ephemeral source checkpoints "
        "as soon as the new manifest is written, before the final checkpoints exist: the final checkpoints "
        "cannot be made from them and the new database never initializes",
        _PROJ_CLASS, "RFC 000 Clones (final checkpoint from the source checkpoint); projection-union.md steps C6-C7",
        "slatedb/projection/create.py _Job.run", "rescale", ("CLONE-1",), 4),
    Bug(switches.CLONE_SHARES_FINAL_CHECKPOINT, "a clone gives every external entry one final checkpoint id "
        "(upstream's rule), also to an entry whose database an earlier entry already names (a union of shards taken "
        "at different checkpoints of one database): the one checkpoint pins the first entry's manifest, and the "
        "other entry's SSTs are pinned by nothing of the clone's once its parent detaches",
        _GC_CLASS, "RFC 000 Clones (final checkpoint from the entry's source checkpoint); clone.md step 4, CLONE-1",
        "slatedb/clone/ops.py _clone_manifest", "rescale", ("CLONE-1",), 24),
    Bug(switches.SOFT_DESTROY_NO_FENCE, "a soft destroy bumps the writer epoch but does not fence the WAL: a live "
        "writer goes on creating WAL objects after the destroy's mark until it polls the manifest",
        _WAL_CLASS, "RFC 000 Deleting a Database (soft, step 1: fence any active writer); destroy.md step 1",
        "slatedb/destroy.py _soft", "destroy", ("DESTROY-2",), 20),
    Bug(switches.GC_KEEPS_CREATE_AFTER_DESTROY, "GC keeps a boundary file or manifest it created on a manifest read "
        "before a hard destroy that finished before the create landed: an object (or a manifest pointing at deleted "
        "SSTs) outlives the destroyed database", _GC_CLASS,
        "RFC 000 Deleting a Database (hard) against a running GC; destroy.md DESTROY-7",
        "slatedb/gc/collector.py GarbageCollector._take_back", "destroy", ("DESTROY-7", "DESTROY-4"), 100),
    Bug(switches.GC_TAKE_BACK_UNSHIELDED, "a GC stopped between its create landing on a removed database and "
        "the take-back's end leaves the create there (create, look and take-back not shielded)", _GC_CLASS,
        "RFC 000 Deleting a Database (hard) against a running GC; destroy.md DESTROY-7 (before its pass ends)",
        "slatedb/gc/collector.py GarbageCollector._commit / _collect_sequenced", "destroy",
        ("DESTROY-7", "DESTROY-4"), 200),
    Bug(switches.DESTROY_DELETES_FOREIGN, "a destroy deletes every object its listing holds, as before DESTROY-8: a "
        "hard destroy (which lists the whole root) deletes a database nested below the root and a user's file there, "
        "GC's removal (which lists SlateDB's directories) a database nested inside one of them", _GC_CLASS,
        "RFC 000 Deleting a Database (the database's data, not its path's); destroy.md H4/S5, DESTROY-8",
        "slatedb/gc/destroyed.py delete_latest_last", "destroy", ("DESTROY-8",), 3),
    # -- bulk load (sim/scenarios/load.py) --
    Bug(switches.LOAD_WAL_TAIL_SHORT, "a load's commit reads the WAL below its fence one object short: that "
        "object's rows are in no L0 SST and below the new replay point", _LOAD_CLASS,
        "bulk-load.md step 5 (WAL rows below the fence to L0 in the one update)",
        "slatedb/spark/load.py commit_load", "load", ("LOAD-7",), 16),
    Bug(switches.LOAD_DELETES_AFTER_AMBIGUOUS_COMMIT, "a load's commit deletes the SSTs it wrote (the WAL-tail "
        "SST with the fenced writer's acknowledged rows, re-minted copies) on any error, also one raised after its "
        "manifest update was sent and landed (a reply lost, no retry left): the landed manifest names deleted SSTs",
        _LOAD_CLASS, "bulk-load.md step 6 (a refused commit deletes what it wrote; an unsure one keeps it), DUR-1",
        "slatedb/spark/load.py commit_load", "load", ("LOAD-6",), 150),
    Bug(switches.ENDED_SHARDS_IGNORE_PINS, "the clean-up of ended sharded loads (collect_loads, a sharded load's "
        "begin) deletes every ended load's shard databases, as before: the shards a destroy of the union kept "
        "for a clone go, and the clone's rows with them", _LOAD_CLASS,
        "bulk-load.md step 8; destroy.md \"Shards another database still reads\", LOAD-9",
        "slatedb/spark/sharded.py collect_ended_shards", "load", ("LOAD-9",), 40),
    # The load scenario's epilogue (sim/scenarios/load_compacted.py: a load's commit under a
    # compactor, GC and a reader's checkpoint, 35% of the plain seeds): first detecting seeds 21
    # (19 of seeds 0..199) and 49 (7 of 0..199).
    Bug(switches.CLEANUP_LATEST_ONLY, "a load's clean-up deletes every staged SST the latest manifest does not "
        "name, as before: after a full compaction rewrote the committed SSTs, those an older manifest a reader's "
        "checkpoint pins still names go, and the reader at the checkpoint meets ObjectNotFoundError",
        _LOAD_CLASS, "bulk-load.md step 7 (an older manifest's SSTs are GC's), LOAD-6",
        "slatedb/spark/load.py cleanup_load", "load", ("LOAD-6",), 40),
    Bug(switches.LOAD_LANDED_BY_SSTS, "a load's commit retried after its create was reported behind GC's boundary "
        "recognises its landed update by its SST ids in ssts, as before: a compaction rewrote them meanwhile, so "
        "it applies the load again, LOAD-5 refuses, and the committed load is reported failed",
        _LOAD_CLASS, "bulk-load.md step 6 (landed by replay point and seq under the guard), LOAD-12",
        "slatedb/spark/load.py commit_load", "load", ("LOAD-12",), 80),
    # Two sharded loads in turn (sim/scenarios/load_sharded.py: the second begins while the first
    # one's union is being made); first detecting seed 1, 8 of seeds 0..199 (`sim hunt --rate`).
    Bug(switches.SHARDED_BEGIN_TAKES_LIVE_UNION, "a sharded load's begin takes any uninitialized union of "
        "sharded-load shards for a dead driver's leftover, as before: it destroys the union a live driver is "
        "making, with its shards", _LOAD_CLASS, "bulk-load.md S1, LOAD-13",
        "slatedb/spark/sharded.py begin_sharded", "load", ("LOAD-13",), 16),
    # -- transactions (sim/scenarios/txn.py; budgets from `sim hunt --rate --seeds 200`) --
    Bug(switches.TXN_READS_UNCHECKED, "a commit checks only the keys the transaction wrote, not its read set (SSI "
        "reads, mark_read keys): a serializable transaction commits over a write to a key it read (write skew)",
        _TXN_CLASS, "official SSI (read-write conflict refused at commit); transactions.md step C1",
        "slatedb/api/txn.py TxnState.checked_keys", "txn", ("TXN-4",), 8),
    Bug(switches.TXN_WINDOW_IGNORES_FLUSH, "a commit's check under the write lock looks at the memtables only, even when "
        "a flush moved the SST view since its first check: a row written meanwhile and already flushed to L0 is "
        "missed (lost update, write skew)",
        _TXN_CLASS, "transactions.md step C3 (re-check when the view moved)", "slatedb/api/txn.py TxnState.under_lock",
        "txn", ("TXN-3", "TXN-4"), 80),
    Bug(switches.TXN_SNAPSHOT_WRITES_UNCHECKED, "a SNAPSHOT commit does not check the keys it writes: first committer "
        "does not win, two read-modify-writes of one counter both commit (lost update)",
        _TXN_CLASS, "official SNAPSHOT (write-write conflict refused, a plain put counts); transactions.md step C1",
        "slatedb/api/txn.py TxnState.checked_keys", "txn", ("TXN-3",), 8),
    Bug(switches.TXN_RANGES_UNCHECKED, "an SSI commit checks the rows its scans returned, not the ranges they covered: "
        "a key inserted there meanwhile (a phantom) goes unseen, two slot takers both insert (phantom write skew)",
        _TXN_CLASS, "official SSI (a phantom refused at commit); transactions.md steps T1, C2, C3",
        "slatedb/api/txn.py TxnState.checked_ranges", "txn", ("TXN-5",), 8),
)

BY_NAME: dict[str, Bug] = {b.name: b for b in CATALOGUE}
assert len(BY_NAME) == len(CATALOGUE), "duplicate bug names"

assert not set(UNIT_CAUGHT) & set(BY_NAME)
assert set(BY_NAME) | set(UNIT_CAUGHT) == switches.ALL, \
    "every switch name (slatedb/runtime/switches.py) has one entry (or a unit test in UNIT_CAUGHT)"



def runner(workload: str) -> Callable[..., Any]:
    """The ``run(seed, bugs=..., choices=...)`` function of a scenario."""
    return scenarios.BY_NAME[workload].function()


def run(workload: str, seed: int, bugs: Iterable[str] = (), choices: Any = None) -> Any:
    """Run one seed of ``workload`` with ``bugs`` switched on (``choices``: a replayed choice
    sequence, :mod:`sim.world.choices`); unknown names are refused."""
    bugs = frozenset(bugs)
    unknown = bugs - BY_NAME.keys()
    if unknown:
        raise ValueError(f"unknown bug(s) {sorted(unknown)}; see `sim bugs`")
    return scenarios.BY_NAME[workload].run(seed, bugs=bugs, choices=choices)


def fired(result: Any) -> str:
    """What a failed run reports: the invariant of its first violation that names one,
    ``liveness`` for a stuck run, else the exception type of the first violation (``-`` for a
    passing run). Read from the :class:`sim.world.invariants.Violation` fields."""
    if result.ok:
        return "-"
    return invariants.first_invariant(result.violations)


def replay_command(workload: str, seed: int, bugs: Iterable[str], skip: Iterable[str] = ()) -> str:
    """The command that replays one seed with these switches on (and these checks left out)."""
    flags = "".join(f" --bug {b}" for b in sorted(bugs)) + "".join(f" --skip-check {i}" for i in sorted(skip))
    return f"./just sim run --seed {seed} --workload {workload}{flags}"
