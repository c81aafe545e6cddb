"""A drop-in for programs written against the official SlateDB 0.17 Python binding
(``slatedb.uniffi``): the same classes, signatures, enums and error variants, every database
call a coroutine under asyncio, as a thin layer over this engine (:mod:`slatedb.aio`).

    import slatedb.uniffi as u
    store = u.ObjectStoreBuilder.from_url("file:///data").build()
    db = await u.DbBuilder("db", store).build()
    await db.put(b"k", b"v")

What this engine does not have (segments, the foyer/moka caches, filter policies, a separate
WAL store, custom metrics recorders, ...) is refused at the call with ``Error.Invalid`` naming
it; docs/api.md lists every difference."""

from slatedb.uniffi.admin import Admin, AdminBuilder
from slatedb.uniffi.db import (
    Db, DbBuilder, DbIterator, DbSnapshot, DbTransaction, MergeOperator, WriteBatch, WriteHandle,
)
from slatedb.uniffi.errors import CloseReason, Error, InternalError, MergeOperatorCallbackError
from slatedb.uniffi.observe import (
    Counter, DefaultMetricsRecorder, Gauge, Histogram, LogCallback, MetricsRecorder, UpDownCounter, init_logging,
)
from slatedb.uniffi.reader import DbReader, DbReaderBuilder, SlateDbWalIterator, SlateDbWalReader
from slatedb.uniffi.clone import CloneBuilder, CloneSourceSpec
from slatedb.uniffi.store import ObjectStore, ObjectStoreBuilder, Settings
from slatedb.uniffi.unsupported import DbCache, FilterPolicy, PrefixExtractor
from slatedb.uniffi.values import (
    BloomFilterOptions, CacheTarget, Checkpoint, CheckpointCreateResult, CheckpointOptions, CloseOptions,
    CompactionSpec, CompactionStatus, CompressionCodec, DbStatus, DurabilityLevel, FilterContext, FilterFormat,
    FlushOptions, FlushType, FoyerCacheOptions, HistogramMetricValue, IsolationLevel, IterationOrder, KeyRange,
    KeyValue, LogLevel, LogRecord, MergeOptions, Metric, MetricLabel, MetricValue, MokaCacheOptions,
    ObjectStoreType, PrefixTarget, PutOptions, ReaderMode, ReaderOptions, ReadOptions, RowEntry, RowEntryKind,
    ScanOptions, SegmentPrefix, SlateDbWalReaderOptions, SourceId, SsTableId, SstBlockSize, SstType,
    TracingOptions, Ttl, WalRows, WriteOptions, SsTableInfo, SsTableHandle, SsTableView, SortedRun, Segment,
    ExternalDb, VersionedManifest, Compaction, VersionedCompactions, CompactorStateView,
    GarbageCollectorDirectoryOptions, GarbageCollectorOptions, GarbageCollectorScheduleOptions, ObjectMetadata,
    IdentifiedObjectMetadata,
)

__all__ = [
    "Admin", "AdminBuilder", "BloomFilterOptions", "CacheTarget", "Checkpoint", "CheckpointCreateResult",
    "CheckpointOptions", "CloneBuilder", "CloneSourceSpec", "CloseOptions", "CloseReason", "CompactionSpec",
    "CompactionStatus", "GarbageCollectorDirectoryOptions", "GarbageCollectorOptions", "GarbageCollectorScheduleOptions",
    "ObjectMetadata", "IdentifiedObjectMetadata",
    "CompressionCodec", "Counter", "Db", "DbBuilder", "DbCache", "DbIterator", "DbReader", "DbReaderBuilder",
    "DbSnapshot", "DbStatus", "DbTransaction", "DefaultMetricsRecorder", "DurabilityLevel", "Error",
    "FilterContext", "FilterFormat", "FilterPolicy", "FlushOptions", "FlushType", "FoyerCacheOptions", "Gauge",
    "Histogram", "HistogramMetricValue", "InternalError", "IsolationLevel", "IterationOrder", "KeyRange",
    "KeyValue", "LogCallback", "LogLevel", "LogRecord", "MergeOperator", "MergeOperatorCallbackError",
    "MergeOptions", "Metric", "MetricLabel", "MetricValue", "MetricsRecorder", "MokaCacheOptions", "ObjectStore",
    "ObjectStoreBuilder", "ObjectStoreType", "PrefixExtractor", "PrefixTarget", "PutOptions", "ReadOptions",
    "ReaderMode", "ReaderOptions", "RowEntry", "RowEntryKind", "ScanOptions", "SegmentPrefix", "Settings",
    "SlateDbWalIterator", "SlateDbWalReader", "SlateDbWalReaderOptions", "SourceId", "SsTableId", "SstBlockSize",
    "SstType", "TracingOptions", "Ttl", "UpDownCounter", "WalRows", "WriteBatch", "WriteHandle", "WriteOptions",
    "init_logging", "SsTableInfo", "SsTableHandle", "SsTableView", "SortedRun", "Segment", "ExternalDb",
    "VersionedManifest", "Compaction", "VersionedCompactions", "CompactorStateView",
]
