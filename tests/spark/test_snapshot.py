"""The checkpoint a Spark read is pinned to (slatedb/spark/snapshot.py), without Spark: made with
``wal_id_last_seen`` raised, so rows only in the WAL are part of the snapshot; refreshed only
when half its lifetime is gone; released; and one read split reads its range of it."""

from __future__ import annotations

import pytest

import slatedb
from slatedb.checkpoint import find_checkpoint
from slatedb.errors import CheckpointNotFoundError
from slatedb.manifest.store import ManifestStore
from slatedb.spark.io import run_io
from slatedb.spark.options import parse_options
from slatedb.spark.scan import read_split
from slatedb.spark.snapshot import establish, pinned, refresh_if_due, release


def test_wal_only_rows_of_a_live_writer_are_in_the_snapshot(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, settings={"flush_interval": "10ms"}) as db:
        db.put(b"a", b"l0")
        db.flush_memtable()
        db.put(b"b", b"wal-only", durable=True)  # durable, in no SST: only the WAL holds it
        cid, stored = run_io(url, None, lambda s, rt: establish(s, rt, 60))
        m = stored.manifest
        assert m.wal_id_last_seen > m.replay_after_wal_id
        db.put(b"c", b"after", durable=True)
        opts = parse_options({"url": url, "include_seq": "true"})
        batches = list(read_split(opts, str(cid), None, None, lease=False))
        rows = {k: v for b in batches for k, v in zip(b.column("key").to_pylist(), b.column("value").to_pylist())}
        assert rows == {b"a": b"l0", b"b": b"wal-only"}
        half = list(read_split(opts, str(cid), b"b", None, lease=False))
        assert [r for b in half for r in b.column("key").to_pylist()] == [b"b"]
        assert run_io(url, None, lambda s, rt: pinned(s, rt, cid)).id == stored.id


def test_refresh_only_past_half_the_lifetime_and_release(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url) as db:
        db.put(b"a", b"1")
    cid, _ = run_io(url, None, lambda s, rt: establish(s, rt, 3600))
    assert run_io(url, None, lambda s, rt: refresh_if_due(s, rt, cid, 3600)) is False
    assert run_io(url, None, lambda s, rt: refresh_if_due(s, rt, cid, 3 * 3600)) is True  # < half of 3 h left
    latest = run_io(url, None, lambda s, rt: ManifestStore(s, rt).read_latest())
    assert find_checkpoint(latest.manifest, cid).name == "spark-read"
    run_io(url, None, lambda s, rt: release(s, rt, cid))
    with pytest.raises(CheckpointNotFoundError):
        run_io(url, None, lambda s, rt: refresh_if_due(s, rt, cid, 60))
