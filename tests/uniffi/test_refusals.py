"""``slatedb.uniffi``: what this engine does not have is refused at the call with the official
``Error.Invalid`` naming it (never accepted and ignored); this engine's errors arrive as the
official variants; the module offers the official binding's public names."""

from __future__ import annotations

import asyncio

import pytest

import slatedb.uniffi as u
from slatedb import errors as ours
from slatedb.uniffi.errors import translate

#: The official 0.17 wheel's ``slatedb.uniffi.__all__`` minus its ``*Protocol`` and ``*Impl``
#: helper classes (generated plumbing, not API).
OFFICIAL_NAMES = """
Admin AdminBuilder BloomFilterOptions CacheTarget Checkpoint CheckpointCreateResult CheckpointOptions
CloneBuilder CloseOptions CloseReason CompactionSpec CompactionStatus CompressionCodec Counter Db DbBuilder
DbCache DbIterator DbReader DbReaderBuilder DbSnapshot DbStatus DbTransaction DefaultMetricsRecorder
DurabilityLevel Error FilterContext FilterFormat FilterPolicy FlushOptions FlushType FoyerCacheOptions Gauge
Histogram HistogramMetricValue InternalError IsolationLevel IterationOrder KeyRange KeyValue LogCallback LogLevel
LogRecord MergeOperator MergeOperatorCallbackError MergeOptions Metric MetricLabel MetricValue MetricsRecorder
MokaCacheOptions ObjectStore ObjectStoreBuilder ObjectStoreType PrefixExtractor PrefixTarget PutOptions
ReadOptions ReaderMode ReaderOptions RowEntry RowEntryKind ScanOptions SegmentPrefix Settings SlateDbWalIterator
SlateDbWalReader SlateDbWalReaderOptions SourceId SsTableId SstBlockSize SstType TracingOptions Ttl
UpDownCounter WalRows WriteBatch WriteHandle WriteOptions init_logging
CloneSourceSpec GarbageCollectorDirectoryOptions GarbageCollectorOptions GarbageCollectorScheduleOptions
ObjectMetadata IdentifiedObjectMetadata
""".split()


def test_the_official_public_names_are_offered():
    missing = [n for n in OFFICIAL_NAMES if not hasattr(u, n)]
    assert missing == []
    assert set(OFFICIAL_NAMES) <= set(u.__all__)


def test_error_variants_have_the_official_shape():
    e = u.Error.Closed(u.CloseReason.FENCED, "gone")
    assert isinstance(e, u.Error) and e.reason is u.CloseReason.FENCED and e.message == "gone"
    assert repr(e) == "Error.Closed(reason=<CloseReason.FENCED: 1>, message='gone')"
    for name in ("Transaction", "Unavailable", "Invalid", "Data", "Internal"):
        v = getattr(u.Error, name)("m")
        assert isinstance(v, u.Error) and v.message == "m" and repr(v) == f"Error.{name}(message='m')"
    assert isinstance(u.MergeOperatorCallbackError.Failed("x"), u.MergeOperatorCallbackError)


@pytest.mark.parametrize("error, variant", [
    (ours.TransactionConflictError("conflict"), "Transaction"),
    (ours.FencedError("fenced"), "Closed"),
    (ours.ClosedError("closed"), "Closed"),
    (ours.InvalidArgumentError("bad"), "Invalid"),
    (ours.CorruptionError("wal/01.sst", None, "bad crc"), "Data"),
    (ours.TransientObjectStoreError("k", "slow down"), "Unavailable"),
])
def test_our_errors_map_to_the_official_variants(error, variant):
    assert type(translate(error)) is getattr(u.Error, variant)
    assert translate(ours.FencedError("f")).reason is u.CloseReason.FENCED


def _store(tmp_path):
    return u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()


@pytest.mark.parametrize("call", [
    lambda b: b.with_segment_extractor(u.PrefixExtractor()),
    lambda b: b.with_db_cache(None, 1),
    lambda b: b.with_filter_policies([]),
    lambda b: b.with_wal_object_store(None),
    lambda b: b.with_seed(7),
    lambda b: b.with_metrics_recorder(u.MetricsRecorder()),
])
def test_builder_features_we_lack_are_refused_at_the_call(tmp_path, call):
    with pytest.raises(u.Error.Invalid, match="not supported by this engine"):
        call(u.DbBuilder("db", _store(tmp_path)))


@pytest.mark.parametrize("call", [
    lambda: u.DbCache.new_foyer_cache(u.FoyerCacheOptions(max_capacity=1 << 20, shards=1)),
    lambda: u.DbCache.new_moka_cache(u.MokaCacheOptions(max_capacity=1 << 20, time_to_live=None, time_to_idle=None)),
    lambda: u.FilterPolicy.bloom(10),
    lambda: u.ObjectStoreBuilder(u.ObjectStoreType.AZURE),
])
def test_caches_filters_and_other_stores_are_refused(call):
    with pytest.raises(u.Error.Invalid, match="not supported by this engine"):
        call()


def test_refused_options_name_the_option_and_write_nothing(tmp_path):
    async def main():
        db = await u.DbBuilder("db", _store(tmp_path)).build()
        try:
            with pytest.raises(u.Error.Invalid, match="seqnum"):
                await db.put_with_options(b"k", b"v", u.PutOptions(ttl=u.Ttl.DEFAULT()), u.WriteOptions(seqnum=5))
            wb = u.WriteBatch()
            with pytest.raises(u.Error.Invalid, match="EXPIRE_AT_MILLIS"):
                wb.put_with_options(b"k", b"v", u.PutOptions(ttl=u.Ttl.EXPIRE_AT_MILLIS(1)))
            with pytest.raises(u.Error.Invalid, match="filter_context"):
                await db.get_with_options(b"k", u.ReadOptions(durability_filter=u.DurabilityLevel.MEMORY, dirty=False,
                                                              cache_blocks=True, filter_context=u.FilterContext.BYTES(b"x")))
            assert await db.get(b"k") is None
        finally:
            await db.shutdown()

    asyncio.run(main())


def test_a_reader_in_follow_latest_mode_is_refused(tmp_path):
    async def main():
        db = await u.DbBuilder("db", _store(tmp_path)).build()
        await db.shutdown()
        b = u.DbReaderBuilder("db", _store(tmp_path))
        b.with_reader_mode(u.ReaderMode.FOLLOW_LATEST())
        with pytest.raises(u.Error.Invalid, match="FOLLOW_LATEST"):
            await b.build()

    asyncio.run(main())


def test_tagged_unions_take_the_official_arguments():
    assert u.Ttl.EXPIRE_AFTER_MILLIS(5)[0] == 5 and u.Ttl.EXPIRE_AFTER_MILLIS(5).is_expire_after_millis()
    assert isinstance(u.Ttl.DEFAULT(), u.Ttl) and u.Ttl.DEFAULT() == u.Ttl.DEFAULT() != u.Ttl.NO_EXPIRY()
    assert u.ReaderMode.CHECKPOINT("id")[0] == "id"
    assert u.CacheTarget.DATA(range=None).range is None and str(u.FilterContext.BYTES(b"x")) == "FilterContext.BYTES(payload=b'x')"
    spec = u.CompactionSpec.TIERED(b"", sources=[u.SourceId.SORTED_RUN(1)], destination=3)
    assert spec.destination == 3 and spec.is_tiered()
    with pytest.raises(TypeError):
        u.Ttl.EXPIRE_AFTER_MILLIS()
    with pytest.raises(TypeError):
        u.CompactionSpec.DRAIN_SEGMENT(b"")


def test_databases_live_at_their_path_under_the_store_root(tmp_path):
    assert u.ObjectStoreBuilder(u.ObjectStoreType.LOCAL).build().url_of("data/db") == "file:///data/db"
    assert u.ObjectStore.resolve("file:///").url_of("db") == "file:///db"
    assert u.ObjectStoreBuilder.from_url(f"file://{tmp_path}/").build().url_of("a/db") == f"file://{tmp_path}/a/db"
    one, two = u.ObjectStore.resolve("memory:///"), u.ObjectStore.resolve("memory:///")
    assert one.url_of("db") != two.url_of("db")  # each in-memory store is its own
    with pytest.raises(u.Error.Invalid, match="provide path to builder"):
        u.ObjectStore.resolve(f"file://{tmp_path}")


def test_a_readers_status_names_its_durable_seq_and_its_close_reason(tmp_path):
    """``DbReader.status()`` (official signature) reads the reader's core: the newest seq it
    holds, no close reason while open, CLEAN after shutdown."""
    async def main():
        db = await u.DbBuilder("db", _store(tmp_path)).build()
        await db.put(b"k", b"v")
        await db.shutdown()  # the put is durable (seq 1)
        r = await u.DbReaderBuilder("db", _store(tmp_path)).build()
        open_status = r.status()
        assert open_status.durable_seq == 1 and open_status.close_reason is None
        await r.shutdown()
        assert r.status().close_reason == u.CloseReason.CLEAN

    asyncio.run(main())


def test_max_unflushed_bytes_not_above_l0_sst_size_bytes_is_refused_at_build_as_the_official(tmp_path):
    """The official 0.17 builder, probed: ``Settings.set("max_unflushed_bytes", "1")`` is
    accepted and ``build()`` raises ``Error.Invalid`` "invalid configuration: max_unflushed_bytes
    (1) must be greater than l0_sst_size_bytes (67108864)" (equal values too). Ours did open,
    and the first put then waited for good."""
    async def main():
        s = u.Settings.default()
        s.set("max_unflushed_bytes", "1")
        b = u.DbBuilder("db", _store(tmp_path))
        b.with_settings(s)
        with pytest.raises(u.Error.Invalid, match=r"invalid configuration: max_unflushed_bytes \(1\) must be "
                                                 r"greater than l0_sst_size_bytes \(67108864\)"):
            await b.build()

    asyncio.run(main())


def test_a_write_batch_is_consumed_by_any_write_as_the_officials(tmp_path):
    """Probed on the official wheel: after ``db.write(batch)`` (one that failed too: empty, a
    merge without an operator, a closed database) the batch refuses another write and any
    put with ``Error.Invalid("write batch has already been consumed")``. Ours consumed it only
    when the write succeeded."""
    async def main():
        db = await u.DbBuilder("db", _store(tmp_path)).build()
        try:
            for fill in (lambda b: None, lambda b: b.merge(b"m", b"1")):
                wb = u.WriteBatch()
                fill(wb)
                with pytest.raises(u.Error.Invalid):
                    await db.write(wb)
                with pytest.raises(u.Error.Invalid, match="write batch has already been consumed"):
                    wb.put(b"k", b"v")
            wb = u.WriteBatch()
            wb.put(b"k", b"v")
            await db.write(wb)
            with pytest.raises(u.Error.Invalid, match="write batch has already been consumed"):
                await db.write(wb)
        finally:
            await db.shutdown()

    asyncio.run(main())
