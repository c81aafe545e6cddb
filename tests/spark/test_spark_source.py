"""The ``slatedb`` data source in a real Spark session (local[2,2], no UI, bound to 127.0.0.1;
one session for the package: conftest.py): reads equal a single-process scan at the same checkpoint while a
writer writes and GC runs at min_age 0; options; the pushdown leak; bulk loads (append,
overwrite, unsorted input, a failed job); S3 through SeaweedFS."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

import slatedb
from slatedb.checkpoint import list_checkpoints
from slatedb.manifest.store import ManifestStore
from slatedb.spark.io import run_io
from slatedb.spark.snapshot import CHECKPOINT_NAME
from tests import servers

pytestmark = pytest.mark.xdist_group("spark")

QUIET = slatedb.DbReaderOptions(manifest_poll_interval_s=3600, checkpoint_lifetime_s=7201)
AGGRESSIVE = {"interval": "10ms", "min_age": "0s", "dry_run": False}
LIVE = {
    "flush_interval": "10ms",
    "manifest_poll_interval": "50ms",
    "l0_sst_size_bytes": 4096,
    "compactor_options": {"poll_interval": "50ms", "scheduler_options": {
        "min_compaction_sources": "2", "max_compaction_sources": "4"}},
    "garbage_collector_options": {
        "manifest_options": AGGRESSIVE, "wal_options": AGGRESSIVE, "wal_fence_options": AGGRESSIVE,
        "compacted_options": AGGRESSIVE, "compactions_options": AGGRESSIVE},
}


def url_of(tmp_path: Path) -> str:
    return f"file://{tmp_path}/db"


def spark_read(spark, url: str, **options):
    return spark.read.format("slatedb").options(url=url, **{k: str(v) for k, v in options.items()}).load()


def as_dict(rows) -> dict[bytes, bytes]:
    return {bytes(r["key"]): bytes(r["value"]) for r in rows}


def single_scan(url: str, checkpoint=None, **store) -> dict[bytes, bytes]:
    with slatedb.DbReader.open(url, checkpoint, options=QUIET, store_options=store or None) as r:
        return dict(r.scan())


def spark_checkpoints(url: str, **store) -> list:
    return run_io(url, store or None, lambda s, rt: list_checkpoints(ManifestStore(s, rt), CHECKPOINT_NAME))


def test_rows_equal_a_single_process_scan_while_a_writer_writes_and_gc_runs(spark, tmp_path) -> None:
    url = url_of(tmp_path)
    db = slatedb.Db.open(url, settings=LIVE)
    for i in range(3000):
        db.put(b"k%05d" % i, b"v%d." % i + b"x" * 40)
    db.flush_memtable()
    stop, going = threading.Event(), threading.Event()
    written = [0]

    def writer() -> None:
        i = 0
        while not stop.is_set():
            db.put(b"k%05d" % (i * 7 % 4000), b"w%d" % i)
            if i % 50 == 0:
                db.delete(b"k%05d" % (i % 3000))
                db.flush()  # durable WAL objects the L0s do not cover yet
            i += 1
            if i % 20 == 0:
                stop.wait(0.002)  # a steady stream, not a flood holding the driver's GIL
            if i == 300:
                going.set()
        written[0] = i

    t = threading.Thread(target=writer)
    t.start()
    going.wait()
    try:
        with slatedb.spark.read(spark, url, include_seq="true", split_size_bytes=16384) as df:
            (cp,) = spark_checkpoints(url)
            rows = df.collect()
            parts = df.rdd.getNumPartitions()
            again = df.count()
            expected = single_scan(url, cp.id)
            pinned = run_io(url, None, lambda s, rt: ManifestStore(s, rt).read(cp.manifest_id)).manifest
    finally:
        stop.set()
        t.join()
        db.close()
    assert written[0] > 100
    assert parts > 1
    assert pinned.wal_id_last_seen > pinned.replay_after_wal_id  # rows only in the WAL are part of it
    got = as_dict(rows)
    assert len(rows) == len(got) == again  # every key once, the same snapshot for every action
    assert got == expected
    assert all(0 < r["seq"] <= max(pinned.last_l0_seq, 10**12) for r in rows)
    assert spark_checkpoints(url) == []  # deleted when the block ended


def test_the_read_checkpoint_is_deleted_when_the_block_fails(spark, tmp_path) -> None:
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"a", b"1")
    with pytest.raises(RuntimeError, match="boom"):
        with slatedb.spark.read(spark, url):
            assert len(spark_checkpoints(url)) == 1
            raise RuntimeError("boom")
    assert spark_checkpoints(url) == []


def test_options_bounds_given_checkpoint_and_a_lease_without_one(spark, tmp_path) -> None:
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        for i in range(1000):
            db.put(b"k%04d" % i, b"v%d" % i)
        db.flush_memtable()
        cp = db.create_checkpoint()
        db.put(b"k0000", b"after-checkpoint")
        db.put(b"wal-only", b"w", durable=True)
    df = spark_read(spark, url, split_size_bytes=4096)
    got = as_dict(df.collect())
    assert got == single_scan(url) and got[b"wal-only"] == b"w" and got[b"k0000"] == b"after-checkpoint"
    (lease,) = spark_checkpoints(url)  # made by the planner, lapses after its lifetime
    assert lease.checkpoint_expire_time_s > 0
    assert spark_read(spark, url, start="k0100", end="k0200").count() == 100
    assert spark_read(spark, url, start_hex=b"k0990".hex()).count() == 11  # up to k0999, then wal-only
    old = as_dict(spark_read(spark, url, checkpoint=cp.id).collect())
    assert old[b"k0000"] == b"v0" and b"wal-only" not in old and len(old) == 1000
    with pytest.raises(Exception, match="CheckpointNotFoundError|not in the latest manifest|checkpoint"):
        spark_read(spark, url, checkpoint=uuid.uuid4()).count()
    for bad, match in [({"nonsense": "1"}, "unknown slatedb read option"), ({"split_size_bytes": "0"}, "split_size_bytes"),
                       ({"checkpoint": "nope"}, "UUID"), ({"start": "k0200", "end": "k0100"}, "is after 'end'"),
                       # Found: 0 rows, where Db.scan refuses the empty range (InvalidArgumentError).
                       ({"start": "k0100", "end": "k0100"}, "range is empty"),
                       ({"start_hex": b"k01".hex(), "end": "k01"}, "range is empty")]:
        with pytest.raises(Exception, match=match):
            spark_read(spark, url, **bad)


class LeakyReader:
    """What a naive pushFilters does: keep the pushed key filter on the reader object."""


def test_an_unfiltered_count_after_a_filtered_one_is_whole(spark, tmp_path) -> None:
    """The 4.x pushdown path keeps pushed filters on the reader of the DataFrame object: a
    reader that honoured them statefully would answer the next, unfiltered count with the
    filtered one. Ours takes bounds as options only; the leaky source shows the trap is live."""
    from pyspark.sql import functions as F

    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        for i in range(300):
            db.put(b"k%04d" % i, b"v")
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        spark.dataSource.register(leaky_source())
        for fmt, whole in (("slatedb", 300), ("slatedb_leaky", 50)):
            df = spark.read.format(fmt).option("url", url).load()
            assert df.filter(F.col("key") < F.lit(b"k0050")).count() == 50
            assert df.count() == whole, fmt
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def leaky_source():
    from pyspark.sql.datasource import LessThan

    from slatedb.spark.source import SlateDbDataSource, SlateDbReader

    class LeakySlateDbReader(SlateDbReader):
        def pushFilters(self, filters):
            for f in filters:
                if isinstance(f, LessThan) and f.attribute == ("key",):
                    import attrs

                    self.opts = attrs.evolve(self.opts, end=bytes(f.value))
                else:
                    yield f

    class LeakySource(SlateDbDataSource):
        @classmethod
        def name(cls):
            return "slatedb_leaky"

        def reader(self, schema):
            from slatedb.spark.options import parse_options

            return LeakySlateDbReader(parse_options(self.options))

    return LeakySource


def test_bulk_load_append_overwrite_unsorted_input_and_shadowing(spark, tmp_path) -> None:
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"k00001", b"old")
        db.put(b"keep", b"old")
        db.flush_memtable()
    rows = [(b"k%05d" % i, b"load-%d" % i) for i in range(2000)]
    src = spark.createDataFrame(rows[::-1], "key binary, value binary").repartition(3)  # unsorted, overlapping
    spark.dataSource.register(flaky_source())  # partition 1's first attempt fails after staging its SSTs
    src.write.format("slatedb_flaky").mode("append").option("url", url).option("sst_size_bytes", 8192).save()
    expected = {**dict(rows), b"keep": b"old"}
    assert single_scan(url) == expected
    m = run_io(url, None, lambda s, rt: ManifestStore(s, rt).read_latest()).manifest
    on_disk = {p.stem for p in (tmp_path / "db" / "compacted").iterdir()}
    assert on_disk == {str(x.id) for x in m.ssts}  # the failed attempt's SSTs are gone, none referenced twice
    assert as_dict(spark_read(spark, url).collect()) == expected
    more = spark.createDataFrame([(b"z%03d" % i, b"z") for i in range(300)], "key binary, value binary")
    slatedb.spark.bulk_load(more, url, mode="overwrite", partitions=2)
    assert single_scan(url) == {b"z%03d" % i: b"z" for i in range(300)}
    with slatedb.Db.open(url) as db:
        db.put(b"z001", b"later")
        assert db.get(b"z001") == b"later" and db.get(b"keep") is None
    assert list(Path(str(tmp_path / "db" / "bulk-load")).rglob("*-*")) == []  # intents cleaned
    dup = spark.createDataFrame([(b"a", b"1"), (b"a", b"2")], "key binary, value binary")
    with pytest.raises(Exception, match="more than once"):
        dup.write.format("slatedb").mode("append").option("url", url).save()
    with pytest.raises(Exception, match="key and value"):
        spark.createDataFrame([(b"a", b"1", 1)], "key binary, value binary, x int").write.format(
            "slatedb").mode("append").option("url", url).save()


def flaky_source():
    """The slatedb source whose writer fails partition 1's first task attempt *after* the
    attempt staged its SSTs (or its shard): Spark retries the task (the session allows two
    attempts, local[2,2]) and the retry's files are the ones committed."""
    from slatedb.spark.source import SlateDbDataSource, SlateDbWriter

    class FlakyWriter(SlateDbWriter):
        def write(self, iterator):
            from pyspark import TaskContext

            message = super().write(iterator)
            ctx = TaskContext.get()
            if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
                raise RuntimeError("injected: the first attempt dies after staging")
            return message

    class FlakySource(SlateDbDataSource):
        @classmethod
        def name(cls):
            return "slatedb_flaky"

        def writer(self, schema, overwrite):
            w = super().writer(schema, overwrite)
            return FlakyWriter(w.opts, w.plan)

    return FlakySource


def test_a_failed_job_leaves_the_manifest_unchanged_and_deletes_what_it_staged(spark, tmp_path) -> None:
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"base", b"1")
        db.flush_memtable()
    manifest_before = run_io(url, None, lambda s, rt: ManifestStore(s, rt).read_latest())
    ssts_before = sorted(p.name for p in (tmp_path / "db" / "compacted").iterdir())

    def fail_in_partition_1(batches):
        from pyspark import TaskContext

        for b in batches:
            yield b
        if TaskContext.get().partitionId() == 1:
            raise RuntimeError("injected task failure")

    src = spark.createDataFrame([(b"k%05d" % i, b"v") for i in range(2000)], "key binary, value binary").repartitionByRange(
        2, "key").sortWithinPartitions("key")
    src = src.mapInArrow(fail_in_partition_1, src.schema)
    with pytest.raises(Exception, match="injected task failure"):
        src.write.format("slatedb").mode("append").option("url", url).option("sst_size_bytes", 4096).save()
    assert run_io(url, None, lambda s, rt: ManifestStore(s, rt).read_latest()) == manifest_before
    assert sorted(p.name for p in (tmp_path / "db" / "compacted").iterdir()) == ssts_before
    assert list(Path(str(tmp_path / "db" / "bulk-load")).rglob("*-*")) == []
    assert single_scan(url) == {b"base": b"1"}


@pytest.mark.parametrize("schema, words", [
    ("k binary, v binary", "takes columns key and value (binary), got ['k', 'v']"),
    ("key binary, value binary, n int", "got ['key', 'n', 'value']"),
    ("key string, value binary", "column 'key' must be binary, got string"),
])
def test_a_load_of_the_wrong_columns_raises_a_typed_error_at_the_call(spark, tmp_path, schema, words) -> None:
    """Found trying it: columns named ``k``/``v`` failed inside Spark's repartitionByRange with
    its AnalysisException (UNRESOLVED_COLUMN ``key``), and other wrong columns with an
    AnalysisException wrapping ours; ``bulk_load`` and ``load_sharded`` now check the columns
    first and raise ``InvalidArgumentError`` naming them. Nothing is written."""
    from slatedb.errors import InvalidArgumentError

    row = tuple(b"x" if "binary" in part else ("x" if "string" in part else 1) for part in schema.split(","))
    df = spark.createDataFrame([row], schema)
    url = url_of(tmp_path)
    with pytest.raises(InvalidArgumentError) as info:
        slatedb.spark.bulk_load(df, url)
    assert words in str(info.value)
    with pytest.raises(InvalidArgumentError) as info:
        slatedb.spark.load_sharded(df, url)
    assert words in str(info.value)
    assert not (tmp_path / "db").exists()


@pytest.fixture(scope="module")
def seaweedfs():
    gen = servers.seaweedfs()
    server = next(gen)
    servers.create_bucket(server, "spark")
    yield server
    gen.close()


def test_s3_read_and_load(spark, seaweedfs) -> None:
    url = f"s3://spark/db-{uuid.uuid4().hex[:8]}"
    store = seaweedfs.options()
    with slatedb.Db.open(url, store_options=store) as db:
        for i in range(500):
            db.put(b"s%04d" % i, b"db")
        db.flush_memtable()
        db.put(b"wal", b"only", durable=True)
    src = spark.createDataFrame([(b"s%04d" % i, b"load") for i in range(0, 1000, 2)], "key binary, value binary")
    src.write.format("slatedb").mode("append").options(url=url, **store).save()
    got = as_dict(spark.read.format("slatedb").options(url=url, split_size_bytes="8192", **store).load().collect())
    assert got == single_scan(url, **store)
    assert got[b"s0002"] == b"load" and got[b"s0001"] == b"db" and got[b"s0998"] == b"load" and got[b"wal"] == b"only"
    assert len(got) == 500 + 250 + 1


@pytest.fixture(scope="module")
def official():
    from tests.interop.official import Official, OfficialUnavailable, ensure_official_venv

    try:
        return Official(ensure_official_venv())
    except OfficialUnavailable as e:
        pytest.fail(str(e))


@pytest.mark.interop
def test_reads_a_database_written_by_the_official_wheel_and_a_clone_of_it(spark, official, tmp_path) -> None:
    import trio

    from slatedb import admin
    from tests.interop.test_db_interop import official_apply

    ops = [{"op": "put", "key": b"o%04d" % i, "value": b"official-%d" % i + b"." * 30} for i in range(600)]
    ops += [{"op": "flush_l0"}, {"op": "put", "key": b"o0001", "value": b"wal"}, {"op": "delete", "key": b"o0002"},
            {"op": "flush_wal"}]
    official_apply(official, tmp_path, ops, {"l0_sst_size_bytes": 4096, "flush_interval": "10ms"}, "crash", "ops")
    parent = f"file://{tmp_path}/db"
    clone = f"file://{tmp_path}/clone"
    trio.run(admin.create_clone, clone, parent)
    with slatedb.Db.open(clone) as db:
        db.put(b"o0003", b"clone-only")
    for url in (parent, clone):
        got = as_dict(spark_read(spark, url, split_size_bytes=8192).collect())
        assert got == single_scan(url) and len(got) == 599, url
        assert got[b"o0001"] == b"wal"
    assert got[b"o0003"] == b"clone-only"


OFFICIAL_PROJECTION = """
async def main(root):
    db = await open_db(root, "src", overrides={"wal_enabled": False, "l0_sst_size_bytes": 4096,
                                                "compactor_options": None})
    for i in range(400):
        await db.put(b"p%04d" % i, b"src-%d" % i)
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    await db.shutdown()
    admin = u.AdminBuilder("proj", store_at(root)).build()
    rng = u.KeyRange(start=b"p0100", start_inclusive=True, end=b"p0300", end_inclusive=False)
    builder = admin.create_clone_builder_from_source(u.CloneSourceSpec(path="src", checkpoint=None,
                                                                       projection_range=rng))
    await builder.build()
    emit({})
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.interop
def test_reads_a_projection_built_by_the_official_wheel(spark, official, tmp_path) -> None:
    official.run_json(OFFICIAL_PROJECTION, str(tmp_path))
    url = f"file://{tmp_path}/proj"
    got = as_dict(spark_read(spark, url, split_size_bytes=2048).collect())
    assert got == single_scan(url) == {b"p%04d" % i: b"src-%d" % i for i in range(100, 300)}


@pytest.mark.interop
def test_a_sharded_load_unites_range_databases_that_spark_our_db_and_the_official_wheel_read(
        spark, official, tmp_path) -> None:
    """The union route (docs/spark.md "Sharded loads"): each range partition becomes a database
    of its own under <url>/shards/ (no WAL), united into the new database at url. A retried
    attempt's shard is collected; Spark reads the union our code made (the shards' SSTs
    resolved on the executors), so do our Db and the official 0.17 writer and reader."""
    from tests.interop.test_db_interop import official_read

    url = url_of(tmp_path)
    rows = {b"s%05d" % i: b"v%d." % i + b"x" * 20 for i in range(3000)}
    src = spark.createDataFrame(list(rows.items())[::-1], "key binary, value binary")
    spark.dataSource.register(flaky_source())  # partition 1's first attempt dies after writing its shard
    src.repartitionByRange(3, "key").sortWithinPartitions("key").write.format("slatedb_flaky").mode("append").options(
        url=url, sharded="true", sst_size_bytes="8192").save()
    m = run_io(url, None, lambda s, rt: ManifestStore(s, rt).read_latest()).manifest
    assert m.initialized and len(m.external_dbs) == 3 and len(m.compacted) == 1 and m.l0 == ()
    shards = sorted(p.name for p in (tmp_path / "db" / "shards").glob("*/*") if any((p / "manifest").glob("*.manifest")))
    assert len(shards) == 3 and not any(name.startswith("000001-0-") for name in shards)  # the lost attempt's went
    df = spark_read(spark, url, split_size_bytes=8192)
    assert as_dict(df.collect()) == rows and df.rdd.getNumPartitions() > 1
    assert single_scan(url) == rows
    for who, (got, scanned) in official_read(official, tmp_path, {b"s00000", b"s02999", b"t"}, "both").items():
        assert dict(scanned) == rows, who
        assert got == {b"s00000": rows[b"s00000"], b"s02999": rows[b"s02999"], b"t": None}, who
    other = f"file://{tmp_path}/other"
    small = spark.createDataFrame([(b"k%03d" % i, b"v") for i in range(100)], "key binary, value binary")
    slatedb.spark.load_sharded(small, other, partitions=2)
    assert single_scan(other) == {b"k%03d" % i: b"v" for i in range(100)}
    with pytest.raises(Exception, match="a database exists"):
        slatedb.spark.load_sharded(small, other)


@pytest.mark.parametrize("schema", ["key string, value string", "key binary, value long", "value binary, key binary",
                                    "key binary", "key binary, value binary, seq long"])
def test_a_read_schema_other_than_the_sources_is_refused_naming_it(spark, tmp_path, schema) -> None:
    """Found trying it: ``spark.read.format("slatedb").schema("key string, value string")`` was
    taken, and every task then failed after reading its range with Spark's
    DATA_SOURCE_RETURN_SCHEMA_MISMATCH. The source's schema is fixed by its options; another one
    is refused when the query is planned, naming both, before any task runs."""
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"k", b"v")
    df = spark.read.format("slatedb").schema(schema).option("url", url).load()
    with pytest.raises(Exception) as info:
        df.collect()
    text = str(info.value)
    assert "InvalidArgumentError" in text and "'key binary, value binary'" in text, text[:2000]
    assert "DATA_SOURCE_RETURN_SCHEMA_MISMATCH" not in text
    seq = spark.read.format("slatedb").schema("key binary, value binary, seq long").options(url=url, include_seq="true")
    assert [(bytes(r.key), bytes(r.value)) for r in seq.load().collect()] == [(b"k", b"v")]  # its own schema: taken


@pytest.mark.parametrize("partitions, words", [
    (0, "partitions must be a whole number >= 1, got 0"),
    (-1, "partitions must be a whole number >= 1, got -1"),
    ("2", "partitions must be a whole number >= 1, got '2'"),
    (True, "partitions must be a whole number >= 1, got True"),
    (2.0, "partitions must be a whole number >= 1, got 2.0"),
])
def test_bulk_load_and_load_sharded_refuse_a_bad_partition_count_at_the_call(spark, tmp_path, partitions, words) -> None:
    """Found trying it: ``partitions=0`` was taken for the default and loaded, ``-1`` failed
    in Spark's repartitionByRange with its IllegalArgumentException, and ``"2"`` was taken for a
    column name (AnalysisException UNRESOLVED_COLUMN). Each is an ``InvalidArgumentError``
    naming the argument, before any Spark job; nothing is written."""
    from slatedb.errors import InvalidArgumentError

    df = spark.createDataFrame([(b"a", b"1")], "key binary, value binary")
    url = url_of(tmp_path)
    with pytest.raises(InvalidArgumentError, match=words.replace("(", r"\(").replace(")", r"\)")):
        slatedb.spark.bulk_load(df, url, partitions=partitions)
    with pytest.raises(InvalidArgumentError, match=words.replace("(", r"\(").replace(")", r"\)")):
        slatedb.spark.load_sharded(df, url, partitions=partitions)
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize("url, options, words", [
    ("DB", {"sst_size": 100}, "unknown slatedb write option(s) ['sst_size']"),
    ("DB", {"block_size_bytes": 100000}, "option 'block_size_bytes' must be in 1..65536"),
    ("nope://x", {}, "unsupported store URL scheme 'nope'"),
])
def test_bulk_load_and_load_sharded_check_their_options_and_url_at_the_call(spark, tmp_path, url, options, words) -> None:
    """Found trying it: ``bulk_load(df, url, sst_size=100)`` (a misspelt option) or a URL of no
    scheme failed only after Spark had sampled the DataFrame for its range partitioning, as an
    AnalysisException wrapping ours. They are now the ``InvalidArgumentError`` itself, before
    any Spark job."""
    from slatedb.errors import InvalidArgumentError

    df = spark.createDataFrame([(b"a", b"1")], "key binary, value binary")
    url = url_of(tmp_path) if url == "DB" else url
    for load in (slatedb.spark.bulk_load, slatedb.spark.load_sharded):
        with pytest.raises(InvalidArgumentError) as info:
            load(df, url, **options)
        assert words in str(info.value)
    assert not (tmp_path / "db").exists()
