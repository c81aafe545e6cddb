"""A database the official 0.17 engine wrote with a segment extractor (RFC 0024: per-segment L0s
and sorted runs in the manifest's ``segments``, the extractor's name in
``segment_extractor_name``) is refused here, with a typed error, before anything is written.

This engine has no segments: before, ``Db.open`` and ``DbReader.open`` took such a database
for an empty one (0 rows where the wheel reads 301), ``Db.open`` wrote a new writer epoch into
it, and a writer's puts went to the root tree, where the wheel (which routes every key through
its extractor) never looks. The wheel itself refuses to open it without the extractor
("segment extractor configuration mismatch").

Paths: the wheel's store is ``file://<root>`` with path ``"db"``; ours is ``file://<root>/db``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.errors import InvalidDbStateError
from slatedb.objstore import resolve_store

pytestmark = pytest.mark.interop

SEGMENTED = """
class ByTwoBytes(u.PrefixExtractor):
    def name(self):
        return "two-bytes"
    def prefix_len(self, target):
        key = target.key if target.is_POINT() else target.prefix
        return 2 if len(key) >= 2 else None

async def main(root, mode):
    b = u.DbBuilder("db", store_at(root))
    b.with_segment_extractor(ByTwoBytes())
    b.with_settings(settings({"flush_interval": "10ms", "compactor_options": None}))
    db = await b.build()
    if mode == "write":
        for prefix in (b"aa", b"bb", b"cc"):
            for i in range(100):
                await db.put(prefix + b"%03d" % i, b"v")
            await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
        await db.put(b"dd-wal-only", b"w")
        await db.flush()
    rows = await scan_all(db)
    await db.shutdown()
    emit({"rows": len(rows)})
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def segmented(official, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("segmented")
    (root / "db").mkdir()
    assert official.run_json(SEGMENTED, str(root), "write") == {"rows": 301}
    return root


@pytest.fixture
def db(segmented, tmp_path) -> tuple[Path, str]:
    shutil.copytree(segmented / "db", tmp_path / "db")
    return tmp_path, f"file://{tmp_path}/db"


def manifests(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "db" / "manifest").iterdir())


def test_our_writer_refuses_a_segmented_database_and_writes_nothing(official, db) -> None:
    root, url = db
    before = manifests(root)
    with pytest.raises(InvalidDbStateError, match="segment.*two-bytes"):
        slatedb.Db.open(url)
    assert manifests(root) == before  # no writer epoch, no fence
    assert official.run_json(SEGMENTED, str(root), "read") == {"rows": 301}


@pytest.mark.parametrize("mode", ["managed", "checkpoint"])
def test_our_reader_refuses_a_segmented_database(db, mode) -> None:
    root, url = db
    cid = None
    if mode == "checkpoint":
        async def make():
            store = resolve_store(url)
            try:
                return (await admin.create_checkpoint(store)).id
            finally:
                await store.aclose()
        cid = trio.run(make)
    with pytest.raises(InvalidDbStateError, match="segment.*two-bytes"):
        slatedb.DbReader.open(url, cid)


def test_our_compactor_refuses_a_segmented_database(db) -> None:
    root, url = db
    before = manifests(root)

    async def compact():
        store = resolve_store(url)
        try:
            await admin.run_compactor(store, None, once=True)
        finally:
            await store.aclose()

    with pytest.raises(InvalidDbStateError, match="segment.*two-bytes"):
        trio.run(compact)
    assert manifests(root) == before  # no compactor epoch claimed


def test_our_clone_refuses_a_segmented_parent(db) -> None:
    """Before, the clone copied the parent's segments but listed none of their SSTs under
    ``external_dbs``: four dangling SST references (GC-4 in ``slatedb check``)."""
    from slatedb.clone import create_clone_url

    root, url = db
    with pytest.raises(InvalidDbStateError, match="segment.*two-bytes"):
        trio.run(create_clone_url, f"file://{root}/clone", url)
    assert not (root / "clone" / "manifest").exists()


def test_spark_reads_and_bulk_loads_refuse_a_segmented_database(db) -> None:
    """The Spark planner's checkpoint and a bulk load's begin (the driver's steps, without a
    session): before, a read planned over the root tree alone (no rows) and a load would have
    put its rows where the official engine never looks."""
    from slatedb.runtime.production import ProductionRuntime
    from slatedb.spark.load import begin_load
    from slatedb.spark.snapshot import establish

    root, url = db
    before = manifests(root)

    async def go(step):
        store = resolve_store(url)
        try:
            await step(store, ProductionRuntime("spark-test"))
        finally:
            await store.aclose()

    with pytest.raises(InvalidDbStateError, match="segment.*two-bytes"):
        trio.run(go, lambda s, rt: establish(s, rt, 600))
    with pytest.raises(InvalidDbStateError, match="segment.*two-bytes"):
        trio.run(go, lambda s, rt: begin_load(s, rt, overwrite=False))
    assert manifests(root) == before and not (root / "db" / "bulk-load").exists()


def test_read_manifest_shows_the_segments(db) -> None:
    """``slatedb read-manifest`` showed such a database as empty (``L0 (0)``, no sorted run)."""
    import json
    import subprocess
    import sys

    root, url = db
    cli = [sys.executable, "-m", "slatedb.cli", "--path", url, "read-manifest"]
    text = subprocess.run(cli, capture_output=True, text=True, check=True).stdout
    assert "segments (4, extractor two-bytes; this engine does not open them)" in text
    assert "prefix b'aa': L0 (1)" in text
    view = json.loads(subprocess.run(cli + ["--json"], capture_output=True, text=True, check=True).stdout)
    assert view["segment_extractor_name"] == "two-bytes"
    assert [bytes.fromhex(s["prefix_hex"]) for s in view["segments"]] == [b"aa", b"bb", b"cc", b"dd"]
    assert all(len(s["l0"]) == 1 for s in view["segments"])


def test_the_uniffi_binding_refuses_it_with_error_invalid_as_the_official_engine_does(db) -> None:
    """The official engine opened without the extractor answers ``Error.Invalid`` ("segment
    extractor configuration mismatch"); the drop-in binding answered ``Error.Data``."""
    import asyncio

    import slatedb.uniffi as u

    root, url = db

    async def open_it():
        await u.DbBuilder("db", u.ObjectStoreBuilder.from_url(f"file://{root}").build()).build()

    with pytest.raises(u.Error.Invalid, match="segment"):
        asyncio.run(open_it())
