"""Bulk loads and the official 0.17 wheel: a database the wheel wrote (L0 rows and rows left
only in its WAL by a crash) takes an append load; the wheel's writer and reader then read the
loaded rows over the older ones and the WAL rows too (LOAD-7: they went to L0 in the commit,
since the wheel's replay skips WAL rows at or below ``last_l0_seq``), and the wheel's later
writes shadow loaded rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatedb.format.sst import SstOptions
from slatedb.spark.io import run_io
from slatedb.spark.load import begin_load, cleanup_load, commit_load, stage_sorted
from tests.interop.official import Official, OfficialUnavailable, ensure_official_venv
from tests.interop.test_db_interop import official_apply, official_read

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def official() -> Official:
    try:
        return Official(ensure_official_venv())
    except OfficialUnavailable as e:
        pytest.fail(str(e))


def load(url: str, rows: dict[bytes, bytes], overwrite: bool = False) -> None:
    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=overwrite)
        keys = sorted(rows)
        res = await stage_sorted(store, rt, plan, 0, 0, keys, [rows[k] for k in keys],
                                 sst_options=SstOptions(), sst_size_bytes=4096)
        try:
            return await commit_load(store, rt, plan, [res])
        finally:
            await cleanup_load(store, rt, plan.load_id)

    run_io(url, None, go)


def test_official_database_takes_a_load_and_the_wheel_reads_it(official, tmp_path: Path) -> None:
    root = tmp_path
    first = [{"op": "put", "key": b"k%03d" % i, "value": b"official-%d" % i} for i in range(100)]
    first.append({"op": "flush_l0"})
    tail = [{"op": "put", "key": b"k%03d" % i, "value": b"wal-%d" % i} for i in range(90, 110)]
    tail += [{"op": "delete", "key": b"k005"}, {"op": "flush_wal"}]
    official_apply(official, root, first, {"flush_interval": "10ms"}, "close", "first")
    official_apply(official, root, tail, {"flush_interval": "10ms"}, "crash", "tail")
    loaded = {b"k%03d" % i: b"loaded-%d" % i for i in range(0, 200, 3)}
    load("file://" + str(root / "db"), loaded)
    expected = {b"k%03d" % i: b"official-%d" % i for i in range(90)}
    expected.update({b"k%03d" % i: b"wal-%d" % i for i in range(90, 110)})
    del expected[b"k005"]
    expected.update(loaded)
    seen = official_read(official, root, set(expected), "both")
    for who, (got, scanned) in seen.items():
        assert dict(scanned) == expected, who
    later = [{"op": "put", "key": b"k000", "value": b"official-after"}, {"op": "flush_wal"}]
    official_apply(official, root, later, {}, "close", "later")
    (got, scanned), = official_read(official, root, {b"k000"}, "writer").values()
    assert got[b"k000"] == b"official-after"


def test_a_load_into_a_new_url_makes_a_database_the_wheel_reads_and_writes(official, tmp_path: Path) -> None:
    """LOAD-11: a load into a URL without a database writes its first manifest at the commit
    (manifest 1 holds the load); the official 0.17 writer and reader open it, and the wheel's
    later writes shadow the loaded rows."""
    from slatedb.manifest.store import ManifestStore

    url = "file://" + str(tmp_path / "db")
    loaded = {b"n%03d" % i: b"loaded-%d" % i for i in range(150)}
    load(url, loaded)
    first = run_io(url, None, lambda s, rt: ManifestStore(s, rt).read_latest())
    assert first.id == 1 and first.manifest.initialized and len(first.manifest.l0) >= 1
    for who, (got, scanned) in official_read(official, tmp_path, set(loaded), "both").items():
        assert dict(scanned) == loaded, who
    later = [{"op": "put", "key": b"n000", "value": b"official-after"}, {"op": "flush_wal"}]
    official_apply(official, tmp_path, later, {}, "close", "later")
    (got, scanned), = official_read(official, tmp_path, {b"n000", b"n001"}, "writer").values()
    assert got == {b"n000": b"official-after", b"n001": b"loaded-1"}
