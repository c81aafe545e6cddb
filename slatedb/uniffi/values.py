"""The official binding's enums, tagged unions and records, with its names, keyword-only
constructors and field names (``KeyRange(start=..., start_inclusive=..., ...)``,
``Ttl.EXPIRE_AFTER_MILLIS(ms)``, ``ReadOptions(durability_filter=..., dirty=..., cache_blocks=...)``)."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from slatedb.uniffi.errors import CloseReason  # noqa: F401 (re-exported)

_UNSET: Any = object()  # an official optional field left out


def _enum(name: str, members: list[str]) -> type[enum.Enum]:
    return enum.Enum(name, [(m, i) for i, m in enumerate(members)], module=__name__)  # type: ignore[return-value]


FlushType = _enum("FlushType", ["MEM_TABLE", "WAL"])
DurabilityLevel = _enum("DurabilityLevel", ["REMOTE", "MEMORY"])
IterationOrder = _enum("IterationOrder", ["ASCENDING", "DESCENDING"])
IsolationLevel = _enum("IsolationLevel", ["SNAPSHOT", "SERIALIZABLE_SNAPSHOT"])
RowEntryKind = _enum("RowEntryKind", ["VALUE", "TOMBSTONE", "MERGE"])
LogLevel = _enum("LogLevel", ["OFF", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"])
ObjectStoreType = _enum("ObjectStoreType", ["S3", "AZURE", "GCS", "LOCAL", "IN_MEMORY"])
SstBlockSize = _enum("SstBlockSize", ["BLOCK1_KIB", "BLOCK2_KIB", "BLOCK4_KIB", "BLOCK8_KIB", "BLOCK16_KIB",
                                      "BLOCK32_KIB", "BLOCK64_KIB"])
CompressionCodec = _enum("CompressionCodec", ["SNAPPY", "ZLIB", "LZ4", "ZSTD"])
SstType = _enum("SstType", ["COMPACTED", "WAL"])
FilterFormat = _enum("FilterFormat", ["LEGACY", "COMPOSITE"])
CompactionStatus = _enum("CompactionStatus", ["SUBMITTED", "SCHEDULED", "RUNNING", "COMPLETED", "FAILED",
                                              "COMPACTED"])


def _tagged(name: str, variants: dict[str, Any], doc: str) -> type:
    """A UniFFI tagged union: ``Name.VARIANT(...)`` instances of ``Name``, with ``is_VARIANT()`` /
    ``is_variant()`` and the official ``str``. A variant is given its arity (positional values,
    indexable: ``Ttl.EXPIRE_AFTER_MILLIS(ms)[0]``) or its field names (keyword or positional,
    read as attributes: ``CacheTarget.DATA(range=...).range``)."""
    base = type(name, (), {"__doc__": doc, "__module__": __name__})

    def make(variant: str, spec: Any) -> type:
        fields: tuple[str, ...] = spec if isinstance(spec, tuple) else ()
        arity = len(fields) if fields else spec

        def __init__(self: Any, *values: Any, **named: Any) -> None:
            if fields:
                if len(values) > len(fields) or set(named) - set(fields):
                    raise TypeError(f"{name}.{variant} takes {', '.join(fields)}")
                got = dict(zip(fields, values), **named)
                missing = [f for f in fields if f not in got]
                if missing:
                    raise TypeError(f"{name}.{variant} is missing {', '.join(missing)}")
                values = tuple(got[f] for f in fields)
                for f, value in zip(fields, values):
                    setattr(self, f, value)
            elif named or len(values) != arity:
                raise TypeError(f"Expected {arity} arguments, found {len(values) + len(named)}")
            self._values = values

        def __eq__(self: Any, other: Any) -> bool:
            if not isinstance(other, base):
                return NotImplemented
            return type(other) is type(self) and other._values == self._values

        def show(self: Any) -> str:
            if fields:
                return f"{name}.{variant}(" + ", ".join(f"{f}={v!r}" for f, v in zip(fields, self._values)) + ")"
            return f"{name}.{variant}{self._values!r}" if arity else f"{name}.{variant}()"

        cls = type(variant, (base,), {
            "__init__": __init__, "__eq__": __eq__, "__hash__": lambda self: hash((variant, self._values)),
            "__getitem__": lambda self, i: self._values[i], "__str__": show, "__repr__": show,
            "__module__": __name__,
        })
        cls.__qualname__ = f"{name}.{variant}"
        return cls

    for variant, spec in variants.items():
        setattr(base, variant, make(variant, spec))
    for variant in variants:
        for spelling in (variant, variant.lower()):
            setattr(base, f"is_{spelling}", lambda self, _v=variant: type(self) is getattr(base, _v))
    return base


Ttl = _tagged("Ttl", {"DEFAULT": 0, "NO_EXPIRY": 0, "EXPIRE_AFTER_MILLIS": 1, "EXPIRE_AT_MILLIS": 1},
              "Time-to-live policy applied to an inserted value or merge operand.")
ReaderMode = _tagged("ReaderMode", {"MANAGED_CHECKPOINT": 0, "CHECKPOINT": 1, "FOLLOW_LATEST": 0},
                     "How a reader chooses and refreshes database state.")
CacheTarget = _tagged("CacheTarget", {"FILTERS": 0, "INDEX": 0, "STATS": 0, "DATA": ("range",)}, "What warm_sst loads.")
MetricValue = _tagged("MetricValue", {"COUNTER": 1, "GAUGE": 1, "UP_DOWN_COUNTER": 1, "HISTOGRAM": 1},
                      "A metric's value.")
FilterContext = _tagged("FilterContext", {"BYTES": ("payload",)}, "Context handed to filter policies.")
PrefixTarget = _tagged("PrefixTarget", {"POINT": ("key",), "PREFIX": ("prefix",)}, "A filter probe target.")
SourceId = _tagged("SourceId", {"SORTED_RUN": 1, "SST_VIEW": 1}, "A compaction source.")
CompactionSpec = _tagged("CompactionSpec", {"TIERED": ("segment", "sources", "destination"),
                                            "DRAIN_SEGMENT": ("segment", "sources")}, "A compaction request.")


def _record(cls: type) -> type:
    """An official record: keyword-only constructor, mutable fields, equality by value."""
    return attrs.define(kw_only=True, eq=True, slots=False)(cls)


@_record
class KeyRange:
    start: bytes | None
    start_inclusive: bool
    end: bytes | None
    end_inclusive: bool


@_record
class KeyValue:
    key: bytes
    value: bytes
    seq: int
    create_ts: int
    expire_ts: int | None


@_record
class RowEntry:
    kind: Any
    key: bytes
    value: bytes | None
    seq: int
    create_ts: int | None
    expire_ts: int | None


@_record
class WalRows:
    rows: list
    last_consumed_wal_file_id: int


@_record
class DbStatus:
    durable_seq: int
    close_reason: Any
    segments: list


@_record
class SegmentPrefix:
    prefix: bytes


@_record
class TracingOptions:
    trace_id: str


@_record
class ReadOptions:
    durability_filter: Any
    dirty: bool
    cache_blocks: bool
    filter_context: Any = None
    tracing_options: Any = None


@_record
class ScanOptions:
    durability_filter: Any
    dirty: bool
    read_ahead_bytes: int
    cache_blocks: bool
    max_fetch_tasks: int
    order: Any = None
    filter_context: Any = None
    tracing_options: Any = None


@_record
class PutOptions:
    ttl: Any


@_record
class MergeOptions:
    ttl: Any


@_record
class WriteOptions:
    seqnum: int = 0


@_record
class FlushOptions:
    flush_type: Any


@_record
class CloseOptions:
    flush_type: Any


@_record
class ReaderOptions:
    manifest_poll_interval_ms: int
    checkpoint_lifetime_ms: int
    max_memtable_bytes: int
    skip_wal_replay: bool
    object_store_max_retries: int | None = None


@_record
class SlateDbWalReaderOptions:
    max_buffered_bytes: int = 134217728
    max_fetch_tasks: int = 128
    read_ahead_bytes: int = 4194304


@_record
class CheckpointOptions:
    lifetime_ms: int | None
    source: str | None
    name: str | None


@_record
class CheckpointCreateResult:
    id: str
    manifest_id: int


@_record
class Checkpoint:
    id: str
    manifest_id: int
    expire_time_secs: int | None
    create_time_secs: int
    name: str | None


@_record
class SsTableId:
    value: str


@_record
class BloomFilterOptions:
    bits_per_key: int
    whole_key_filtering: bool = True


@_record
class FoyerCacheOptions:
    max_capacity: int
    shards: int


@_record
class MokaCacheOptions:
    max_capacity: int
    time_to_live: int | None
    time_to_idle: int | None


@_record
class MetricLabel:
    key: str
    value: str


@_record
class Metric:
    name: str
    labels: list
    description: str
    value: Any


@_record
class HistogramMetricValue:
    count: int
    sum: float
    min: float
    max: float
    boundaries: list
    bucket_counts: list


@_record
class LogRecord:
    level: Any
    target: str
    message: str
    module_path: str | None
    file: str | None
    line: int | None


@_record
class SsTableInfo:
    first_entry: bytes | None
    last_entry: bytes | None
    index_offset: int
    index_len: int
    filter_offset: int
    filter_len: int
    compression_codec: Any
    sst_type: Any
    stats_offset: int
    stats_len: int
    filter_format: Any


@_record
class SsTableHandle:
    id: SsTableId
    info: SsTableInfo
    estimated_size_bytes: int


@_record
class SsTableView:
    id: str
    sst: SsTableHandle
    visible_range: KeyRange | None
    estimated_size_bytes: int


@_record
class SortedRun:
    id: int
    sst_views: list
    estimated_size_bytes: int


@_record
class Segment:
    prefix: bytes
    last_compacted_l0_sst_view_id: str | None
    l0: list
    compacted: list


@_record
class ExternalDb:
    path: str
    source_checkpoint_id: str
    final_checkpoint_id: str | None
    sst_ids: list


@_record
class VersionedManifest:
    id: int
    writer_epoch: int
    compactor_epoch: int
    external_dbs: list
    initialized: bool
    last_compacted_l0_sst_view_id: str | None
    last_compacted_l0_sst_id: str | None
    l0: list
    compacted: list
    segments: list
    next_wal_sst_id: int
    replay_after_wal_id: int
    last_l0_clock_tick: int
    last_l0_seq: int
    recent_snapshot_min_seq: int
    checkpoints: list
    wal_object_store_uri: str | None


@_record
class Compaction:
    id: str
    spec: Any
    bytes_processed: int
    status: Any
    output_ssts: list
    active: bool


@_record
class VersionedCompactions:
    id: int
    compactor_epoch: int
    recent_compactions: list


@_record
class CompactorStateView:
    compactions: VersionedCompactions | None
    manifest: VersionedManifest


# Garbage-collector options and object metadata: the official records, for programs that build
# them (``Admin.run_gc_once`` takes None here: the database's GC settings apply).


@_record
class GarbageCollectorDirectoryOptions:
    min_age_ms: int
    dry_run: bool
    interval_ms: int | None = None


@_record
class GarbageCollectorScheduleOptions:
    interval_ms: int | None = None


@_record
class GarbageCollectorOptions:
    manifest_options: GarbageCollectorDirectoryOptions | None = None
    wal_options: GarbageCollectorDirectoryOptions | None = None
    wal_fence_options: GarbageCollectorDirectoryOptions | None = None
    compacted_options: GarbageCollectorDirectoryOptions | None = None
    compactions_options: GarbageCollectorDirectoryOptions | None = None
    detach_options: GarbageCollectorScheduleOptions | None = None
    disable_boundary_files: bool = False
    object_store_max_retries: int | None = None


@_record
class ObjectMetadata:
    last_modified_seconds: int
    last_modified_nanos: int
    size: int
    location: str
    e_tag: str | None
    version: str | None


@_record
class IdentifiedObjectMetadata:
    id: int
    metadata: ObjectMetadata
