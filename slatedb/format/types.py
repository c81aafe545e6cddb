"""Frozen value types mirroring every table of ``spec/format/slatedb.fbs``.

Why a separate layer: the generated FlatBuffers accessors read lazily from a buffer and cannot
be compared, hashed or built by hand. These values are what the rest of slatedb passes around;
:mod:`slatedb.format.fbcodec`, :mod:`slatedb.format.manifest` and
:mod:`slatedb.format.compactions` convert between them and bytes.

Conventions (chosen so that decode -> encode round-trips the meaning of official files):

* Field names and order follow the schema exactly (the schema order is the vtable order).
  Units: every ``*_offset`` / ``*_len`` / ``*_size`` is in bytes, ``*_s`` in seconds,
  ``*_ms`` in milliseconds.
* ``[ubyte]`` fields are ``bytes``; an *optional* one that may be absent is ``bytes | None``
  (absent and empty differ on the wire, e.g. a WAL SST has no ``last_entry``).
* Other optional vectors are tuples; an absent vector decodes as ``()``. Which empty vectors
  are written back follows what the official writer does (see the encoders).
* Optional sub-tables are ``None`` when absent; optional scalars declared ``= null`` are
  ``int | None``; ordinary scalars carry their schema default.
* ``Ulid`` tables are :class:`ulid.ULID`, ``Uuid`` tables :class:`uuid.UUID`.
"""

from __future__ import annotations

import enum
import uuid

import attrs
from ulid import ULID

# ---------------------------------------------------------------------------------------------
# Enums (all stored as one signed byte; union discriminants are handled by the codecs)
# ---------------------------------------------------------------------------------------------


class BoundType(enum.IntEnum):
    UNKNOWN = 0
    UNBOUNDED = 1
    INCLUDED = 2
    EXCLUDED = 3


class CompressionFormat(enum.IntEnum):
    NONE = 0
    SNAPPY = 1
    ZLIB = 2
    LZ4 = 3
    ZSTD = 4


class SstType(enum.IntEnum):
    COMPACTED = 0
    WAL = 1


class FilterFormat(enum.IntEnum):
    """``LEGACY`` = a bare bloom filter; ``COMPOSITE`` = named filters (what 0.17 writes)."""

    LEGACY = 0
    COMPOSITE = 1


class CompactionStatus(enum.IntEnum):
    SUBMITTED = 0
    RUNNING = 1
    COMPLETED = 2
    FAILED = 3
    COMPACTED = 4
    SCHEDULED = 5


# ---------------------------------------------------------------------------------------------
# Small shared tables
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class BytesBound:
    """One end of a key range; ``key`` is ``None`` when absent (e.g. for ``UNBOUNDED``)."""

    key: bytes | None = None
    bound_type: BoundType = BoundType.UNKNOWN


@attrs.frozen
class BytesRange:
    start_bound: BytesBound
    end_bound: BytesBound


# ---------------------------------------------------------------------------------------------
# SST metadata
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class SsTableInfo:
    """Where an SST's index, filter and stats blocks are, and how its blocks are compressed.

    Offsets and lengths are in bytes from the start of the SST object. ``first_entry`` and
    ``last_entry`` are full keys for compacted SSTs; for WAL SSTs ``first_entry`` is the first
    seq as 8 big-endian bytes and ``last_entry`` is absent.
    """

    first_entry: bytes | None = None
    index_offset: int = 0
    index_len: int = 0
    filter_offset: int = 0
    filter_len: int = 0
    compression_format: CompressionFormat = CompressionFormat.NONE
    sst_type: SstType = SstType.COMPACTED
    last_entry: bytes | None = None
    stats_offset: int = 0
    stats_len: int = 0
    filter_format: FilterFormat = FilterFormat.LEGACY


@attrs.frozen
class BlockStats:
    num_puts: int = 0
    num_deletes: int = 0
    num_merges: int = 0


@attrs.frozen
class SstStats:
    """Row counts of an SST; ``raw_key_size``/``raw_val_size`` are uncompressed bytes."""

    num_puts: int = 0
    num_deletes: int = 0
    num_merges: int = 0
    raw_key_size: int = 0
    raw_val_size: int = 0
    block_stats: tuple[BlockStats, ...] = ()


@attrs.frozen
class BlockMeta:
    """Index entry: ``offset`` (bytes) of a data block and a separator key (see format.md)."""

    offset: int
    first_key: bytes


# ---------------------------------------------------------------------------------------------
# Manifest
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class CompactedSsTable:
    """ManifestV1 SST entry, also the compactions file's output entry.

    ``format_version`` ``None`` means absent on the wire, which readers treat as 1.
    """

    id: ULID
    info: SsTableInfo
    visible_range: BytesRange | None = None
    format_version: int | None = None


@attrs.frozen
class CompactedSsTableV2:
    id: ULID
    info: SsTableInfo
    format_version: int | None = None


@attrs.frozen
class CompactedSsTableView:
    """A view (own ``id``) of the physical SST ``sst_id``, optionally narrowed to a range."""

    id: ULID
    sst_id: ULID
    visible_range: BytesRange | None = None


@attrs.frozen
class SortedRun:
    id: int
    ssts: tuple[CompactedSsTable, ...] = ()


@attrs.frozen
class SortedRunV2:
    id: int
    ssts: tuple[CompactedSsTableView, ...] = ()


@attrs.frozen
class ExternalDb:
    path: str
    source_checkpoint_id: uuid.UUID
    final_checkpoint_id: uuid.UUID | None = None
    sst_ids: tuple[ULID, ...] = ()


@attrs.frozen
class WriterCheckpoint:
    epoch: int = 0


@attrs.frozen
class Checkpoint:
    """``checkpoint_expire_time_s`` 0 means the checkpoint never expires.

    ``metadata`` is the ``CheckpointMetadata`` union: ``None`` (NONE) or a WriterCheckpoint.
    """

    id: uuid.UUID
    manifest_id: int = 0
    checkpoint_expire_time_s: int = 0
    checkpoint_create_time_s: int = 0
    metadata: WriterCheckpoint | None = None
    name: str | None = None


#: ``last_l0_clock_tick`` of a fresh manifest (i64::MIN in the official engine).
CLOCK_TICK_MIN = -(2**63)


@attrs.frozen
class ManifestV1:
    """Legacy manifest (file version 1): read-only for us, the official engine writes V2."""

    manifest_id: int = 0
    external_dbs: tuple[ExternalDb, ...] = ()
    initialized: bool = False
    writer_epoch: int = 0
    compactor_epoch: int = 0
    replay_after_wal_id: int = 0
    wal_id_last_seen: int = 0
    l0_last_compacted: ULID | None = None
    l0: tuple[CompactedSsTable, ...] = ()
    compacted: tuple[SortedRun, ...] = ()
    last_l0_clock_tick: int = 0
    checkpoints: tuple[Checkpoint, ...] = ()
    last_l0_seq: int = 0
    wal_object_store_uri: str | None = None
    recent_snapshot_min_seq: int = 0
    sequence_tracker: bytes | None = None


@attrs.frozen
class Segment:
    prefix: bytes
    last_compacted_l0_sst_view_id: ULID | None = None
    l0: tuple[CompactedSsTableView, ...] = ()
    compacted: tuple[SortedRunV2, ...] = ()


@attrs.frozen
class ManifestV2:
    """The whole database state (file version 2, what 0.17 writes).

    ``ssts`` holds every physical SST once; ``l0`` (newest first) and ``compacted`` hold views
    referring to them. ``sequence_tracker``, ``segments`` and ``segment_extractor_name`` are
    carried through unchanged by code that does not interpret them.
    """

    manifest_id: int = 0
    external_dbs: tuple[ExternalDb, ...] = ()
    initialized: bool = False
    writer_epoch: int = 0
    compactor_epoch: int = 0
    replay_after_wal_id: int = 0
    wal_id_last_seen: int = 0
    last_compacted_l0_sst_view_id: ULID | None = None
    ssts: tuple[CompactedSsTableV2, ...] = ()
    l0: tuple[CompactedSsTableView, ...] = ()
    compacted: tuple[SortedRunV2, ...] = ()
    last_l0_clock_tick: int = CLOCK_TICK_MIN
    checkpoints: tuple[Checkpoint, ...] = ()
    last_l0_seq: int = 0
    recent_snapshot_min_seq: int = 0
    sequence_tracker: bytes | None = None
    segments: tuple[Segment, ...] = ()
    segment_extractor_name: str | None = None
    #: Our extension (spec/format/slatedb.fbs): soft destroy time, 0 = not destroyed.
    destroyed_at_s: int = 0


# ---------------------------------------------------------------------------------------------
# Compactions file
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class TieredCompactionSpec:
    """Sources of a tiered compaction; ``destination`` is the output sorted run id.

    The deprecated ``ssts`` slot is never read or written. ``segment`` is ``None`` when absent.
    """

    sorted_runs: tuple[int, ...] = ()
    l0_view_ids: tuple[ULID, ...] = ()
    segment: bytes | None = None
    destination: int = 0


@attrs.frozen
class DrainSegmentSpec:
    segment: bytes
    l0_view_ids: tuple[ULID, ...] = ()
    sorted_runs: tuple[int, ...] = ()


@attrs.frozen
class WorkerSpec:
    worker_id: str | None = None
    last_heartbeat_ms: int = 0


@attrs.frozen
class Subcompaction:
    range: BytesRange
    output_ssts: tuple[CompactedSsTable, ...] = ()


@attrs.frozen
class TieredCompactionContext:
    subcompactions: tuple[Subcompaction, ...] = ()
    retention_min_seq: int = 0


@attrs.frozen
class Compaction:
    """One compaction job. ``spec`` is the CompactionSpec union (required); ``ctx`` the
    optional CompactionContext union."""

    id: ULID
    spec: TieredCompactionSpec | DrainSegmentSpec
    status: CompactionStatus = CompactionStatus.SUBMITTED
    output_ssts: tuple[CompactedSsTable, ...] = ()
    worker: WorkerSpec | None = None
    ctx: TieredCompactionContext | None = None


@attrs.frozen
class CompactionsV1:
    compactor_epoch: int = 0
    recent_compactions: tuple[Compaction, ...] = ()
