"""Names of the catalogued bug switches (``sim/scenarios/catalogue.py`` describes each; ``sim bugs`` lists them).

Protocol code tests ``switches.<NAME> in runtime.bugs`` (or the name's string) at the one site
where the bug lives; ``Runtime.bugs`` is empty in production. ``tests/test_sim_bugs.py`` checks
that every name here has a catalogue entry and a site, and every site's name is here.
"""

from __future__ import annotations

# zombie writers (RFC 001)
ZOMBIE_ACK = "zombie-ack"
GROUP_ACK_EARLY = "group-ack-early"
FENCE_IGNORED = "fence-ignored"
NO_EPOCH_RECHECK = "no-epoch-recheck"
L0_COMMIT_UNFENCED = "l0-commit-unfenced"
# the replay point and WAL replay (RFC 001 / RFC 003)
REPLAY_SKIP = "replay-skip"
REPLAY_POINT_AHEAD = "replay-point-ahead"
REPLAY_PROGRESS_EARLY = "replay-progress-early"
# create times and the L0 clock tick (writer.md steps 7 and 9, DUR-5)
ROW_CLOCK_UNCLAMPED = "row-clock-unclamped"
L0_TICK_COMMIT_NOW = "l0-tick-commit-now"
# sequenced metadata and conditional creates (RFC 004)
NO_BOUNDARY_CHECK = "no-boundary-check"
AMBIGUOUS_CREATE_TRUST = "ambiguous-create-trust"
RETRY_ONE_SHORT = "retry-one-short"
BOUNDARY_PUT_TRUSTED = "boundary-put-trusted"
SEQUENCED_GONE_RECREATED = "sequenced-gone-recreated"
# compaction (RFC 002 / RFC 003)
RESUME_REEMIT = "resume-reemit"
RESUME_SKIP_ENTRY = "resume-skip-entry"
COMPACTOR_NO_SECOND_BUMP = "compactor-no-second-bump"
COMPACTOR_NO_COMMIT_FENCE = "compactor-no-commit-fence"
COMPACTION_NO_REVALIDATE = "compaction-no-revalidate"
COMPACTION_RECOMMIT_FAILS = "compaction-recommit-fails"
EMPTY_RECOMMIT_FAILS = "empty-recommit-fails"
STRADDLE_LATER_SST_ONLY = "straddle-later-sst-only"
EXPIRY_OWN_CLOCK = "expiry-own-clock"
# GC, checkpoints, readers, clones (RFC 000 / RFC 004)
GC_IGNORES_CHECKPOINTS = "gc-ignores-checkpoints"
GC_NO_MIN_AGE = "gc-no-min-age"
GC_IGNORES_INFLIGHT_COMPACTION = "gc-ignores-inflight-compaction"
GC_DELETE_BEFORE_BOUNDARY = "gc-delete-before-boundary"
EXPIRED_CHECKPOINT_FATAL = "expired-checkpoint-fatal"
SNAPSHOT_UNCAPPED = "snapshot-uncapped"
WRITER_CHECKPOINT_ORPHANED = "writer-checkpoint-orphaned"
WRITER_CHECKPOINT_RELEASED_AT_FLUSH = "writer-checkpoint-released-at-flush"
COMPACTOR_PIN_KEPT_AT_CLOSE = "compactor-pin-kept-at-close"
TRACKER_FORGETS = "tracker-forgets"
READER_IGNORES_NEW_SSTS = "reader-ignores-new-ssts"
GC_DETACH_LATEST_ONLY = "gc-detach-latest-only"
GC_JUDGES_EXPIRY_NOW = "gc-judges-expiry-now"
CLONE_COPIES_ALL_WAL = "clone-copies-all-wal"
CLONE_SHARES_FINAL_CHECKPOINT = "clone-shares-final-checkpoint"
# projection and union (RFC 000)
PROJECTION_WIDENS_VIEW = "projection-widens-view"
UNION_SEQ_NOT_MAX = "union-seq-not-max"
UNION_EXTERNAL_DBS_NOT_MERGED = "union-external-dbs-not-merged"
UNION_RELEASES_SOURCE_CHECKPOINT_EARLY = "union-releases-source-checkpoint-early"
# destroy (RFC 000 "Deleting a Database")
SOFT_DESTROY_NO_FENCE = "soft-destroy-no-fence"
GC_KEEPS_CREATE_AFTER_DESTROY = "gc-keeps-create-after-destroy"
GC_TAKE_BACK_UNSHIELDED = "gc-take-back-unshielded"
WRITER_KEEPS_OPEN_AFTER_DESTROY = "writer-keeps-open-after-destroy"
MANIFEST_KEPT_AFTER_DESTROY = "manifest-kept-after-destroy"
DESTROY_DELETES_FOREIGN = "destroy-deletes-foreign"
# transactions (spec/protocols/transactions.md)
TXN_READS_UNCHECKED = "txn-reads-unchecked"
TXN_WINDOW_IGNORES_FLUSH = "txn-window-ignores-flush"
TXN_RANGES_UNCHECKED = "txn-ranges-unchecked"
KICK_SKIPS_IDLE_FLUSHER = "kick-skips-idle-flusher"
TXN_SNAPSHOT_WRITES_UNCHECKED = "txn-snapshot-writes-unchecked"
# bulk load (spec/protocols/bulk-load.md)
LOAD_WAL_TAIL_SHORT = "load-wal-tail-short"
ENDED_SHARDS_IGNORE_PINS = "ended-shards-ignore-pins"
CLEANUP_LATEST_ONLY = "cleanup-latest-only"
LOAD_DELETES_AFTER_AMBIGUOUS_COMMIT = "load-deletes-after-ambiguous-commit"
LOAD_LANDED_BY_SSTS = "load-landed-by-ssts"
SHARDED_BEGIN_TAKES_LIVE_UNION = "sharded-begin-takes-live-union"
STAGE_IGNORES_LOAD_END = "stage-ignores-load-end"

# distributed compaction: coordinator and workers (official 0.17 protocol)
HEARTBEAT_NO_OWNER_CHECK = "heartbeat-no-owner-check"
WORKER_FINISH_UNCHECKED = "worker-finish-unchecked"
SUBRANGES_OVERLAP = "subranges-overlap"
COMMIT_UNFINISHED_RANGES = "commit-unfinished-ranges"
CLAIM_UNCHECKED = "claim-unchecked"
OUTPUTS_IN_ID_ORDER = "outputs-in-id-order"
RESUME_REPLANS_RANGES = "resume-replans-ranges"

#: Every switch name (every upper-case string constant above).
ALL: frozenset[str] = frozenset(v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str))
