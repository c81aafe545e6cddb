"""Coverage probes: the rare protocol branches a simulation campaign must reach.

In the spirit of FoundationDB's ``CODE_PROBE``: protocol code calls ``runtime.probe(NAME)`` (one
line, a constant of this module) where a rare branch is taken. The call goes through the one
runtime seam: the production runtime ignores it (a method that returns), the simulator's runtime
counts hits per probe name beside the trace (never in it: trace digests do not change). Every
campaign prints how often each probe was hit (``sim dst``, ``sim sweep``), and
``tests/test_sim_probes.py`` fails when the main job's seeds leave one unhit: a branch the
harness no longer reaches is a branch it no longer tests.

Every name is declared here once, with what reaching it means and the spec step or invariant
it exercises; ``sim/world/probes.py`` says which scenario (and which of its seeds) reaches each one.
A test checks both directions: every ``probe(...)`` call in ``slatedb/`` names a constant of this
module, and every probe declared here is called somewhere.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Probe:
    name: str
    meaning: str
    #: The spec step or invariant whose rare case it marks (spec/protocols/...).
    spec: str


PROBES: dict[str, Probe] = {}


def _probe(name: str, meaning: str, spec: str) -> str:
    assert name not in PROBES, name
    PROBES[name] = Probe(name, meaning, spec)
    return name


# -- WAL fencing and the writer (spec/protocols/wal-fencing.md, writer.md) -----------------------

WAL_FENCE_SLOT_TAKEN = _probe(
    "wal.fence-slot-taken",
    "a writer's fence lost its WAL slot to a racing writer (create-if-absent found the id taken)",
    "wal-fencing.md step 3/4, FENCE-4")
WAL_WRITE_SLOT_OLDER_FENCE = _probe(
    "wal.write-slot-older-fence",
    "a WAL write found its slot taken by an older writer's fence while the manifest epoch is still "
    "ours: skipped to the next id",
    "wal-fencing.md step 7, FENCE-2")
WAL_WRITE_FENCED = _probe(
    "wal.write-fenced",
    "a WAL write found its slot taken and the manifest carries a newer epoch: the writer halts "
    "during its flush",
    "wal-fencing.md step 7, FENCE-3")
WAL_REPLAY_FENCE = _probe(
    "wal.replay-fence",
    "a WAL replay (writer open or reader) read another writer's 0-byte fence inside its range",
    "writer.md step 4, DUR-1")

DURABLE_WAIT_JOINS_NEXT_GROUP = _probe(
    "writer.durable-wait-joins-next-group",
    "a durable wait arrived while a WAL flush was in flight without its row: it kicks the next "
    "flush and waits for that one (group commit)",
    "writer.md step 8, DUR-3")

# -- Create-if-absent with ambiguous outcomes (spec/objstore.md, slatedb/objstore/retry.py) -------

CREATE_AMBIGUOUS_LANDED_MANIFEST = _probe(
    "create.ambiguous-landed.manifest",
    "an ambiguous .manifest create (reply lost, retried, found existing) read back as our own: landed",
    "sequenced-metadata.md step 3, SEQMETA-2")
CREATE_AMBIGUOUS_LOST_MANIFEST = _probe(
    "create.ambiguous-lost.manifest",
    "an ambiguous .manifest create read back as another process's: not landed, lost the race",
    "sequenced-metadata.md step 3, SEQMETA-2")
CREATE_AMBIGUOUS_LANDED_COMPACTIONS = _probe(
    "create.ambiguous-landed.compactions",
    "an ambiguous .compactions create read back as our own: landed",
    "compaction.md, SEQMETA-2")
CREATE_AMBIGUOUS_LOST_COMPACTIONS = _probe(
    "create.ambiguous-lost.compactions",
    "an ambiguous .compactions create read back as another process's (a racing compactor or an "
    "admin submission): not landed",
    "compaction.md, SEQMETA-2")
CREATE_AMBIGUOUS_LANDED_WAL = _probe(
    "create.ambiguous-landed.wal",
    "an ambiguous WAL object create read back as our own: landed",
    "wal-fencing.md step 7, FENCE-1")
CREATE_AMBIGUOUS_LOST_WAL = _probe(
    "create.ambiguous-lost.wal",
    "an ambiguous WAL object create read back as another writer's: not landed",
    "wal-fencing.md step 7, FENCE-4")
CREATE_GONE_TAKEN = _probe(
    "create.gone-taken",
    "an ambiguous create of a sequenced id (.manifest, .compactions) found it taken, then gone when "
    "read back (a GC freed it, or a destroyer deleted the database): not created again (behind the boundary: "
    "maybe landed, the boundary check's refusal; else a conflict)",
    "sequenced-metadata.md step 3, SEQMETA-2, DESTROY-3")

RETRY_EXHAUSTED_ATTEMPTS = _probe(
    "objstore.retries-exhausted",
    "a bounded (production) retry policy gave up after max_retries retries and raised "
    "ObjectStoreRetriesExhaustedError",
    "objstore.md, RETRY-1")
RETRY_EXHAUSTED_DEADLINE = _probe(
    "objstore.retry-deadline",
    "a bounded (production) retry policy gave up at its deadline, before max_retries retries, and "
    "raised ObjectStoreRetriesExhaustedError",
    "objstore.md, RETRY-1")

# -- Sequenced metadata and boundary files (spec/protocols/sequenced-metadata.md, RFC 004) -------

BOUNDARY_PUT_AMBIGUOUS = _probe(
    "boundary.put-ambiguous",
    "GC's boundary-file write ended ambiguously (transient error): the next read tells",
    "sequenced-metadata.md GC steps, BOUNDARY-2")
BOUNDARY_PUT_RACED = _probe(
    "boundary.put-raced",
    "GC's boundary-file write lost its create-if-absent / update-if-match to another GC (or to its "
    "own ambiguous earlier write): read again",
    "sequenced-metadata.md GC steps, BOUNDARY-2")
SEQMETA_BEHIND_BOUNDARY = _probe(
    "seqmeta.behind-boundary",
    "a .manifest / .compactions create landed at or behind GC's boundary: reported not committed "
    "(RFC 004's stale writer, or its false negative)",
    "sequenced-metadata.md step 4, BOUNDARY-3")
MANIFEST_LANDED_REPORTED_FAILED = _probe(
    "manifest.landed-reported-failed",
    "a manifest update reported not committed by the boundary check found itself already applied "
    "on the retry (RFC 004 landed-but-reported-failed; the edit's already-applied detection)",
    "sequenced-metadata.md Edits step 2, SEQMETA-1")
MANIFEST_CONFLICT = _probe(
    "manifest.conflict",
    "a manifest update lost the create-if-absent race to another process and re-applied its edit to "
    "a fresh read",
    "sequenced-metadata.md step 3")
MANIFEST_EDIT_GUARD_FENCED = _probe(
    "manifest.edit-fenced",
    "a manifest edit's fence (writer or compactor epoch) refused it: a newer epoch is durable",
    "sequenced-metadata.md Edits step 1, FENCE-5 / CFENCE-1")

# -- Writer (spec/protocols/writer.md) -----------------------------------------------------------

WRITER_FENCED_AT_L0_COMMIT = _probe(
    "writer.fenced-at-l0-commit",
    "a writer's L0 flush found a newer writer epoch in the manifest and halted",
    "writer.md step 9, FENCE-5")
WRITER_HALTED_BY_POLL = _probe(
    "writer.halted-by-poll",
    "a writer learned from the manifest it polls that a newer writer fenced it, and halted",
    "writer.md, FENCE-3")

# -- Compaction (spec/protocols/compaction.md) ---------------------------------------------------

COMPACTOR_RESUMED = _probe(
    "compactor.resumed",
    "a compaction interrupted with outputs written was resumed after its last output's last key",
    "compaction.md resume, RESUME-1/2")
COMPACTOR_RESUMED_MID_KEY = _probe(
    "compactor.resumed-mid-key",
    "a resumed compaction's first row is an older version of its cursor's key: the last output was "
    "cut inside the key's versions (an output cut after any row)",
    "compaction.md step 7, RESUME-1/2")
COMPACTOR_TTL_KEPT_BY_DB_CLOCK = _probe(
    "compactor.ttl-kept-by-db-clock",
    "a compaction wrote a row with a TTL as a live value (or operand) although its process's own clock "
    "had passed the row's expiry: the database's clock (the manifest's last_l0_clock_tick) had not",
    "compaction.md step 6, COMPACT-12")
COMPACTOR_FENCED = _probe(
    "compactor.fenced",
    "a compactor learned that a newer compactor took over (.manifest or .compactions), and stopped",
    "compaction.md fencing, CFENCE-1/2")
COMPACTOR_INVALID = _probe(
    "compactor.invalid",
    "a compaction was found invalid against the current manifest (its inputs changed) and failed",
    "compaction.md validation, COMPACT-3")
COMPACTOR_RECOMMIT_COMPLETED = _probe(
    "compactor.recommit-completed",
    "a Compacted job's commit found its outputs already in the manifest (its commit landed before a "
    "restart or takeover, .compactions not yet updated): recorded Completed, nothing written",
    "compaction.md step 8, COMPACT-10")
COMPACTOR_RECOMMIT_EMPTY = _probe(
    "compactor.recommit-empty",
    "a Compacted job with no output SST (every row it read dropped) found its commit already in the "
    "manifest (its sources gone, its destination no run, the L0 high-water mark at its newest L0 "
    "view): recorded Completed, nothing written",
    "compaction.md step 8, COMPACT-10")
COMPACTOR_EXTERNAL_ADOPTED = _probe(
    "compactor.external-adopted",
    "a compactor adopted a compaction submitted by another process (admin submission)",
    "compaction.md external submission, COMPACT-1")

COMPACTOR_RECLAIMED = _probe(
    "compactor.reclaimed",
    "the coordinator reclaimed a Running job whose worker's heartbeat was older than the timeout",
    "compaction.md coordinator reclaim, COMPACT-5")
COMPACTOR_RESUMED_RANGES = _probe(
    "compactor.resumed-ranges",
    "a worker took over a job with recorded subcompaction ranges and progress",
    "compaction.md subcompactions, RESUME-1/2")
COMPACTOR_RESULT_DROPPED = _probe(
    "compactor.result-dropped",
    "a worker's result was dropped because its job was reclaimed or gone (a zombie worker)",
    "compaction.md worker finish, COMPACT-5")
COMPACTOR_CLAIM_LOST = _probe(
    "compactor.claim-lost",
    "a worker's claim found its job no longer Scheduled and free (another worker claimed it first): "
    "the claim is dropped, the job is not taken over",
    "compaction.md W1, COMPACT-5")
COMPACTOR_JOB_LOST = _probe(
    "compactor.job-lost",
    "a worker's heartbeat found its job reclaimed or owned by another worker (it stalled past the "
    "heartbeat timeout): the job is stopped mid-run",
    "compaction.md W5, COMPACT-5")

# -- GC (spec/protocols/checkpoints-gc.md) ------------------------------------------------------

GC_SST_KEPT_IN_FLIGHT = _probe(
    "gc.sst-kept-in-flight",
    "GC kept an unreferenced SST because an in-flight compaction recorded it as an output",
    "checkpoints-gc.md step 8, GC-3/GC-4")
GC_SST_KEPT_ULID_CUTOFF = _probe(
    "gc.sst-kept-ulid-cutoff",
    "GC kept an unreferenced SST old enough to delete because its ULID is above the cutoff of an "
    "in-flight compaction",
    "checkpoints-gc.md step 8, GC-4")
GC_MANIFEST_KEPT_CHECKPOINT = _probe(
    "gc.manifest-kept-checkpoint",
    "GC kept a manifest old enough and behind the boundary because a checkpoint pins it",
    "checkpoints-gc.md step 6, GC-2")
GC_WAL_KEPT_CHECKPOINT = _probe(
    "gc.wal-kept-checkpoint",
    "GC kept a WAL object below the latest replay point because a checkpointed manifest still needs it",
    "checkpoints-gc.md step 7, READ-2")
GC_CHECKPOINT_EXPIRED = _probe(
    "gc.checkpoint-expired",
    "GC removed an expired checkpoint from the manifest",
    "checkpoints-gc.md step 3, CKPT-1")
GC_CLONE_DETACHED = _probe(
    "gc.clone-detached",
    "GC detached an external database none of whose SSTs is referenced any more (released its "
    "final checkpoint on the parent)",
    "checkpoints-gc.md step 9, CLONE-2")
GC_DETACH_KEPT_CHECKPOINT = _probe(
    "gc.detach-kept-checkpoint",
    "GC kept an external database attached although the latest manifest references none of its "
    "SSTs, because a manifest an active checkpoint pins still does (a reader may read through it)",
    "checkpoints-gc.md step 9, CLONE-4")

# -- Destroy (spec/protocols/destroy.md) -----------------------------------------------------------

DESTROY_LATE_OBJECTS = _probe(
    "destroy.late-objects",
    "a hard destroy (or GC removing a soft-destroyed database), listing again before deleting the "
    "latest manifest, found objects that landed after its previous listing (a GC's boundary file "
    "written meanwhile) and deleted them first",
    "destroy.md H4/S5, DESTROY-4")
DESTROY_FOREIGN_KEPT = _probe(
    "destroy.foreign-kept",
    "a destroy's listing held objects under the root that are not the database's own (another "
    "database nested below it, a user's file) and left them",
    "destroy.md H4/S5, DESTROY-8")
DESTROY_KEPT_SHARD_REMOVED = _probe(
    "destroy.kept-shard-removed",
    "a hard destroy of a path with no manifest found only shard databases of ended sharded loads "
    "there (kept for a clone by an earlier destroy) and deleted those no clone pins any more",
    "destroy.md H1 and \"Shards another database still reads\", DESTROY-4")
GC_CREATE_OUTLIVED_DESTROY = _probe(
    "gc.create-outlived-destroy",
    "a GC pass's boundary create or manifest commit, decided on a manifest read before a destroy, "
    "landed after the destroy marked or removed the database: GC took it back",
    "destroy.md \"Concurrent writers of metadata\", DESTROY-7")
WRITER_OPEN_OUTLIVED_DESTROY = _probe(
    "writer.open-outlived-destroy",
    "a writer's (or a bulk load's) epoch bump, decided on a manifest read before a destroy, landed "
    "after the destroy removed the database (the base manifest gone with no boundary at or above "
    "it): it took its manifest and WAL fence back and refused the open (the load's commit)",
    "destroy.md \"Concurrent writers of metadata\", DESTROY-7")
MANIFEST_CREATE_OUTLIVED_DESTROY = _probe(
    "manifest.create-outlived-destroy",
    "a manifest commit, decided on a manifest read before a destroy, landed after the destroy "
    "removed the database (its boundary file gone, its base gone, no other manifest listed): the "
    "committer deleted its lone manifest again and raised InvalidDbStateError",
    "destroy.md \"Concurrent writers of metadata\", DESTROY-7")

# -- Readers, clones, projection and union --------------------------------------------------------

CHECKPOINT_REFRESH_EXPIRED = _probe(
    "checkpoint.refresh-expired",
    "a refresh found its checkpoint expired but not yet collected (a call sent before the expiry, "
    "landing after it) and refused to revive it",
    "checkpoints-gc.md step 3, GC-2")
READER_CHECKPOINT_EXPIRED = _probe(
    "reader.checkpoint-expired",
    "a managed reader found its checkpoint expired and established a new one",
    "reader.md re-establish, READ-4")
READER_CHECKPOINT_GONE = _probe(
    "reader.checkpoint-gone",
    "a managed reader found its checkpoint removed (GC expired it) and established a new one",
    "reader.md re-establish, READ-4")
CLONE_REPEATED_DATABASE = _probe(
    "clone.repeated-database",
    "a clone copied an external entry whose database an earlier entry already names (a union of "
    "shards taken at different checkpoints of one database) and gave it its own final checkpoint",
    "clone.md step 4, CLONE-1")
UNION_RESUMED = _probe(
    "union.resumed",
    "a projection or union found half done (its manifest written, not initialized) was resumed",
    "projection-union.md C2, PROJ-4")

# -- Bulk load (spec/protocols/bulk-load.md) -------------------------------------------------------

LOAD_STAGE_ENDED = _probe(
    "load.stage-ended",
    "a task attempt still staging found its load's open marker gone (the load was committed, aborted "
    "or collected meanwhile) and deleted what it had written",
    "bulk-load.md steps 2 and S2, LOAD-10")

LOAD_COMMIT_UNSURE_KEPT = _probe(
    "load.commit-unsure-kept",
    "a load's commit failed after its manifest update was sent (a reply lost, the retries gone, or a "
    "cancellation): the SSTs it wrote (the WAL-tail SST, re-minted copies) were kept, as the update "
    "may have landed naming them",
    "bulk-load.md step 6, DUR-1, LOAD-1")
LOAD_CLEANUP_KEPT_PINNED = _probe(
    "load.cleanup-kept-pinned",
    "a load's clean-up found staged SSTs its commit made the database's that the latest manifest no "
    "longer names (a compaction rewrote them) but an older manifest still does (a checkpoint may pin "
    "it), and left them to GC",
    "bulk-load.md step 7, LOAD-6")
LOAD_COMMIT_LANDED_FOUND = _probe(
    "load.commit-landed-found",
    "a load's commit, its manifest create reported behind GC's boundary (RFC 004: a compaction or a writer "
    "wrote newer manifests and GC moved the boundary while the commit stalled), retried and found its own "
    "landed update by its replay point and seq (its SSTs perhaps compacted away since): committed",
    "bulk-load.md step 6, LOAD-12")
LOAD_UNION_LIVE_REFUSED = _probe(
    "load.union-live-refused",
    "a sharded load's begin found an uninitialized union at the URL whose load's open marker is fresh (its "
    "driver may be uniting it right now) and refused, leaving the union alone",
    "bulk-load.md S1, LOAD-13")
LOAD_UNION_FINISHED_REFUSED = _probe(
    "load.union-finished-refused",
    "a sharded load's begin judged an uninitialized union a dead driver's leftover (its load's marker gone), "
    "but a newer manifest was there when it read again: its load finished the union meanwhile; refused, "
    "nothing destroyed",
    "bulk-load.md S1, LOAD-13")
LOAD_ENDED_SHARD_KEPT = _probe(
    "load.ended-shard-kept",
    "the clean-up of ended sharded loads (step 8: collect_loads, every sharded load's begin), on a "
    "path with no database, found a shard database a clone still pins (a destroy of the union kept it) "
    "and left it",
    "bulk-load.md step 8, destroy.md \"Shards another database still reads\", LOAD-9")

# -- Transactions (spec/protocols/transactions.md) ---------------------------------------------------

TXN_VIEW_MOVED = _probe(
    "txn.view-moved",
    "a transaction's commit found, under the write lock, that a flush (or a manifest refresh) had "
    "changed the SST view since its first conflict check: rows written meanwhile may have left the "
    "memtables, so the check ran again",
    "transactions.md step C3, TXN-3/TXN-4")
TXN_CONFLICT_AFTER_VIEW_MOVED = _probe(
    "txn.conflict-after-view-moved",
    "a commit that checked again because a flush moved the SST view found a conflict then: a row "
    "written during its first check, which the memtables alone no longer showed",
    "transactions.md step C3, TXN-3/TXN-4")
TXN_PHANTOM_IN_SST = _probe(
    "txn.phantom-in-sst",
    "an SSI commit found a row inserted, overwritten or deleted in a range it scanned in an SST made "
    "since its snapshot (an L0 flush or a compaction output), not in the memtables",
    "transactions.md step C2, TXN-5")

READ_VIEW_COLLECTED = _probe(
    "read.view-collected",
    "a point read met an SST of its view deleted before its block was read, and the SST had left "
    "the current view (compacted away, then collected once its pin expired while the read was "
    "stalled): the read started again on the current state",
    "reader.md READ-7 (a view outlived)")
READ_RUN_STRADDLE = _probe(
    "read.run-straddle",
    "a point read of a key that starts an SST of a sorted run also consulted the SST before it, which "
    "ends with that key (an output cut after any row, inside the key's versions)",
    "reader.md READ-7 (a key spanning SSTs of a run)")

# Rare branches with no probe yet because no scenario reaches them (a probe there would be unhit
# by every campaign; add it with the scenario that reaches it): GC keeping an SST only for its
# min_age (the ULID cutoff keeps it first in every measured seed), a clone resumed after a crash
# (the gc scenario's clone never crashes), a re-run projection or union finding its creation
# already finished.


def ambiguous_create(key: str, mine: bool) -> str:
    """The probe of an ambiguous create-if-absent of ``key`` resolved by reading it back
    (``mine``: the bytes were ours, it landed), by the key's namespace: ``.manifest``,
    ``.compactions``, else a WAL object (the only objects created with create-if-absent)."""
    if key.endswith(".manifest"):
        return CREATE_AMBIGUOUS_LANDED_MANIFEST if mine else CREATE_AMBIGUOUS_LOST_MANIFEST
    if key.endswith(".compactions"):
        return CREATE_AMBIGUOUS_LANDED_COMPACTIONS if mine else CREATE_AMBIGUOUS_LOST_COMPACTIONS
    return CREATE_AMBIGUOUS_LANDED_WAL if mine else CREATE_AMBIGUOUS_LOST_WAL
