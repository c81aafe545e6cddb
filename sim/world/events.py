"""The trace vocabulary: every event kind a simulated world records, by name.

Protocol code records events through ``runtime.event(KIND, **fields)`` (a no-op in production)
and the simulator through ``Trace.record(process, KIND, **fields)``; checkers subscribe to kinds
(``sim/checks/writer.py``, ``sim/checks/*.py``), the shrinker's readable trace and the timeline read
them. A kind is a short string (``Event.kind`` stays readable and the trace digest unchanged);
this module names each one once. ``tests/test_trace_vocabulary.py`` holds the code to it: every
kind recorded in ``slatedb/`` and ``sim/`` and every kind a checker compares against is listed
here, every kind listed is recorded somewhere, and every event of the protocol pages' "Trace
vocabulary" (``spec/protocols/README.md``) maps to one (:data:`SPEC_VOCABULARY`).
"""

from __future__ import annotations

# -- protocol events (recorded by slatedb/ through the runtime) --------------------------------
# manifest and sequenced metadata (spec/protocols/sequenced-metadata.md)
CREATE = "create"  # a create-if-absent of a metadata or WAL object: outcome ok | exists
CREATE_RESOLVED = "create.resolved"  # an ambiguous create settled by reading the object back
BOUNDARY_READ = "boundary_read"  # the post-create read of gc/<ns>.boundary (RFC 004)
BOUNDARY_ADVANCE = "boundary_advance"
BOUNDARY_VANISHED = "boundary_vanished"
BOUNDARY_CORRUPT = "boundary_corrupt"  # a boundary at or above every file: corruption (sequenced-metadata.md)
#: a manifest commit found the boundary file it saw gone and its own create the only manifest left
#: (landed on a root a destroy removed): it deleted the create again (DESTROY-7, destroy.md)
MANIFEST_CREATE_OUTLIVED_DESTROY = "manifest_create_outlived_destroy"
COMMIT = "commit"  # success of a metadata update returned to the caller: ns, id
RETRY = "retry"
RETRY_EXHAUSTED = "retry_exhausted"  # a bounded retry policy gave up (production's; the simulator's is unbounded)
# WAL fencing and the writer (wal-fencing.md, writer.md)
WRITER_EPOCH = "writer_epoch"
#: the writer's open found its epoch bump landed on a removed database and took it back (DESTROY-7)
WRITER_OPEN_OUTLIVED_DESTROY = "writer_open_outlived_destroy"
FENCE_WRITTEN = "fence_written"
REPLAY = "replay"
ACK = "ack"  # a WAL object acknowledged durable to the writer's clients
HALT = "halt"  # the writer learned it was fenced
CLOSING = "closing"  # a writer's clean close begins (CKPT-5 judges pins its compactor had by then)
CLOSED = "closed"
# compaction (compaction.md)
COMPACTOR_STARTED = "compactor_started"
COMPACTOR_FENCED = "compactor_fenced"
COMPACTOR_PIN_RELEASED = "compactor_pin_released"  # a standalone compactor's clean stop dropped its startup pin
COMPACTOR_ERROR = "compactor_error"
#: a run-compactor --once run compacted what L0 held at its start and schedules nothing more (4cb9b6c)
COMPACTOR_LEFT_NEW_L0 = "compactor_left_new_l0"
COMPACTION_SUBMITTED = "compaction_submitted"
COMPACTION_STATE = "compaction_state"
COMPACTION_OUTPUT = "compaction_output"
COMPACTION_RESUME = "compaction_resume"
COMPACTION_INVALID = "compaction_invalid"
COMPACTION_COMMIT = "compaction_commit"
# the coordinator/worker protocol (compaction.md W1-W6, reclaim)
COMPACTION_RECLAIMED = "compaction_reclaimed"
COMPACTION_CLAIMED = "compaction_claimed"
COMPACTION_RELEASED = "compaction_released"
COMPACTION_LOST = "compaction_lost"
COMPACTION_RESULT_DROPPED = "compaction_result_dropped"
COMPACTION_WORKER_FAILED = "compaction_worker_failed"
COMPACTION_WORKER_FAILED_AGAIN = "compaction_worker_failed_again"  # the same job failing the same way, after a backoff
PANIC = "panic"
# checkpoints, readers, GC, clones, destroy (checkpoints-gc.md, reader.md, clone.md, destroy.md)
CHECKPOINT_CREATE = "checkpoint_create"
CHECKPOINT_REFRESH = "checkpoint_refresh"
CHECKPOINT_REFRESH_REFUSED = "checkpoint_refresh_refused"  # an expired checkpoint is not revived (GC-2)
CHECKPOINT_DELETE = "checkpoint_delete"
CHECKPOINT_EXPIRED = "checkpoint_expired"
CHECKPOINT_FLUSH_BLOCKED = "checkpoint_flush_blocked"
READER_CHECKPOINT = "reader_checkpoint"
READER_CHECKPOINT_LOST = "reader_checkpoint_lost"
READER_CHECKPOINT_STALE = "reader_checkpoint_stale"
READER_VIEW = "reader_view"
READER_WAL = "reader_wal"
READER_ERROR = "reader_error"
READER_STOPPED = "reader_stopped"
READER_CLOSED = "reader_closed"
GC_PASS = "gc_pass"
GC_DELETE = "gc_delete"
GC_SKIP = "gc_skip"
GC_ERROR = "gc_error"
GC_NO_DATABASE = "gc_no_database"
GC_WOULD_DELETE = "gc_would_delete"
GC_WOULD_DESTROY = "gc_would_destroy"
GC_RELEASE_PARENT_CHECKPOINT = "gc_release_parent_checkpoint"
CLONE = "clone"
CLONE_DETACHED = "clone_detached"
UNION = "union"  # a step of a projection/union creation (union_step=read|resume|manifest_written|..., C1-C7)
# bulk load and Spark reads (bulk-load.md)
LOAD_BEGIN = "load_begin"
LOAD_STAGE = "load_stage"
LOAD_FENCED = "load_fenced"
LOAD_COMMIT = "load_commit"
LOAD_CLEANUP = "load_cleanup"
LOAD_STAGE_ENDED = "load_stage_ended"  # an attempt found its load ended and deleted what it staged (LOAD-10)
LOAD_CLEANUP_KEPT = "load_cleanup_kept"  # a clean-up left committed SSTs an older manifest names to GC (LOAD-6)
LOAD_GAVE_UP = "load_gave_up"  # a driver under the bounded retry policy gave up on a store error (the load scenario's bounded seeds)
LOAD_ABANDONED = "load_abandoned"  # collect_loads took a load whose plan is too old for abandoned (LOAD-10)
# sharded loads, the union route (bulk-load.md S1-S4)
SHARD_BEGIN = "shard_begin"
SHARD_LEFTOVER_REMOVED = "shard_leftover_removed"
SHARD_STAGED = "shard_staged"
SHARD_COMMIT = "shard_commit"
SHARD_ABORT = "shard_abort"
SHARD_COLLECTED = "shard_collected"
SHARD_LEFTOVER_COLLECTED = "shard_leftover_collected"  # an ended load's shards, no database at the URL (LOAD-10)
SHARD_LEFTOVER_KEPT = "shard_leftover_kept"  # an ended load's shards a clone pins, kept by its clean-up (LOAD-9)
KEPT_SHARDS = "kept_shards"  # the load epilogue's steps: a shard pinned, the union destroyed, released (sim/scenarios/load_kept_shards.py)
# the load epilogue under a compactor, GC and a checkpoint (sim/scenarios/load_compacted.py)
LOAD_COMPACTED = "load_compacted"  # its draws and outcome: who overtook the commit, the stall, landed, clean-up
LOAD_DRIVER_DIED = "load_driver_died"  # its driver died after the commit: an operator's collect_loads cleans up
COMPACTION_SKIPPED = "compaction_skipped"  # its full compaction was refused (nothing to compact, say)
# a point read started again on the current state: an SST of its view was collected meanwhile
# (reader.md READ-7, "a view outlived"; slatedb/lsm/read_path.py)
READ_VIEW_COLLECTED = "read_view_collected"
SPARK_CHECKPOINT = "spark_checkpoint"
DESTROY = "destroy"
DB_DESTROYED = "db_destroyed"
DESTROY_LATE_OBJECTS = "destroy_late_objects"  # a destroy's re-listing found objects that landed meanwhile (destroy.md H4/S5)
DESTROY_FOREIGN_KEPT = "destroy_foreign_kept"  # a destroy left listed objects that are not the database's (destroy.md DESTROY-8)
DESTROY_SHARD_KEPT = "destroy_shard_kept"  # a destroy left a shard database another one pins (destroy.md, LOAD-9)

# -- the simulator's own events ----------------------------------------------------------------
SPAWN = "spawn"  # a task spawned through the runtime (every spawn is traced)
STORE_OPS = ("get", "head", "put", "list", "delete", "copy")
STORE_GET, STORE_HEAD, STORE_PUT, STORE_LIST, STORE_DELETE, STORE_COPY = (f"store.{op}" for op in STORE_OPS)
STORE_RESULT = "store.result"
STORE_REPLY_LOST = "store.reply-lost"  # an ambiguous outcome: applied, reply lost
FAULT_STALL = "fault.stall"
FAULT_PAUSE = "fault.pause"
FAULT_BITFLIP = "fault.bitflip"
CRASH = "crash"
PAUSE = "pause"  # a process froze
HEAL = "heal"  # faults stop: the liveness phase
HOLD = "hold"  # the world holds a process's request on the wire (destroy's "create held" mode)
CLOCK_SKEW = "clock.skew"
CLOCK_JUMP = "clock.jump"
CORRUPTION = "corruption"  # a process met a CorruptionError and stopped
SETTINGS = "settings"  # a world's drawn settings
CONFIG = "config"  # a world's drawn fault and timing knobs
COMPACTOR_PINS = "compactor-pins"  # a gc world's drawn pin lifetime of replaced manifests (lifetime_s)
TWO_CHECKPOINTS = "two-checkpoints"  # a rescale world whose shards come from two checkpoints of src/
FAULTS = "faults"
CLIENT_DONE = "client.done"
RETRY_POLICY = "retry.policy"  # a store-bounded client's production retry policy (max_retries, deadline_s)
CALL = "call"  # a store-bounded client starts one logical store call (op, key): RETRY-1 counts its attempts
CALL_END = "call.end"  # ... and ends it: outcome ok | exhausted | the permanent error's type, attempts
DELETE = "delete"  # the seqmeta scenario's GC deleted a manifest below the boundary; a writer's take-back
WAKE = "wake"  # the tasks scenario of the determinism tests
CANCEL = "cancel"
CANCELLED = "cancelled"

#: Every kind, by value.
KINDS: frozenset[str] = frozenset(v for k, v in dict(globals()).items()
                                  if k.isupper() and isinstance(v, str) and k != "KINDS")

#: The protocol pages' trace vocabulary (spec/protocols/README.md, "Trace vocabulary"): each
#: event named there, and the kind that records it (an object-store request is ``store.<op>``).
SPEC_VOCABULARY: dict[str, str] = {
    "create": CREATE, "put": STORE_PUT, "get": STORE_GET, "list": STORE_LIST, "delete": STORE_DELETE,
    "boundary_read": BOUNDARY_READ, "commit": COMMIT, "fence_written": FENCE_WRITTEN, "ack": ACK, "halt": HALT,
    "compactor_started": COMPACTOR_STARTED, "panic": PANIC,
}

#: Kinds that are faults the simulator injected (counted in results and sweeps).
FAULT_KINDS = frozenset({STORE_REPLY_LOST, FAULT_STALL, FAULT_PAUSE, FAULT_BITFLIP, CRASH, PAUSE, CLOCK_SKEW,
                         CLOCK_JUMP})
