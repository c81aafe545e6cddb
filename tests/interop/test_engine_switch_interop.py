"""Switching engines back and forth leaves no checkpoint that never expires (issue 25 item 1).

What each engine does with the other's checkpoints is written down in spec/protocols/writer.md,
"Checkpoints across engines": the official 0.17 engine keeps every checkpoint it finds when it
rewrites a manifest but drops the ``WriterCheckpoint`` metadata, so our writer checkpoint used to
become an anonymous never-expiring checkpoint after each switch, pinning manifests and SSTs
against GC and refusing ``destroy``. Here one database goes through several switches both ways
-- clean closes, crashes of either writer, official readers -- with two user checkpoints (one per
engine, no lifetime) that must survive all of it; then our GC and a hard destroy.

Paths: the wheel's store is ``file://<root>`` with path ``"db"``; ours is ``file://<root>/db``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb import CheckpointOptions, admin
from slatedb.errors import InvalidDeletionError
from slatedb.manifest.checkpoints import is_writer_checkpoint
from slatedb.objstore import resolve_store

from .test_db_interop import url_of

pytestmark = pytest.mark.interop

QUIET = {"compactor_options": None, "l0_sst_size_bytes": 4096, "l0_max_ssts": 256, "flush_interval": "10ms"}
GC_NOW = {"garbage_collector_options": {
    d: {"interval": "1s", "min_age": "0s"} for d in ("manifest_options", "wal_options", "compacted_options")}}

OFFICIAL_WRITER = """
import os
async def main(root, key, end):
    db = await open_db(root, overrides={"compactor_options": None, "l0_sst_size_bytes": 4096, "l0_max_ssts": 256})
    for i in range(40):
        await db.put(("%s-%03d" % (key, i)).encode(), b"o" * 64)
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    await db.put(key.encode(), b"official")
    await db.flush()
    if end == "crash":
        os._exit(0)
    await db.shutdown()
asyncio.run(main(*sys.argv[1:]))
"""

OFFICIAL_READER = """
async def main(root, key):
    r = await u.DbReaderBuilder("db", store_at(root)).build()
    emit({"value": b64(await r.get(key.encode()))})
    await r.shutdown()
asyncio.run(main(*sys.argv[1:]))
"""

OFFICIAL_USER_CHECKPOINT = """
async def main(root):
    a = u.AdminBuilder("db", store_at(root)).build()
    cp = await a.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=None, source=None, name="official-user"))
    emit({"id": str(cp.id)})
asyncio.run(main(*sys.argv[1:]))
"""

OFFICIAL_CHECKPOINTS = """
async def main(root):
    a = u.AdminBuilder("db", store_at(root)).build()
    emit([{"id": c.id, "expire": c.expire_time_secs, "name": c.name} for c in await a.list_checkpoints(None)])
asyncio.run(main(*sys.argv[1:]))
"""

OURS_WRITER = textwrap.dedent("""
    import sys, slatedb
    url, key, end = sys.argv[1:]
    db = slatedb.Db.open(url, settings={"compactor_options": None, "l0_sst_size_bytes": 4096, "l0_max_ssts": 256})
    for i in range(40):
        db.put(("%s-%03d" % (key, i)).encode(), b"u" * 64)
    db.flush(wal=False)
    db.put(key.encode(), b"ours", durable=True)
    if end == "crash":
        db.abort()
    else:
        db.close()
""")


def ours_writer(root: Path, key: str, end: str) -> None:
    """Our writer in a child process: writes, then closes cleanly or crashes (``abort``)."""
    subprocess.run([sys.executable, "-c", OURS_WRITER, url_of(root), key, end], check=True, timeout=120)


def run(root: Path, fn, *args, **kwargs):
    async def main():
        store = resolve_store(url_of(root))
        try:
            return await fn(store, *args, **kwargs)
        finally:
            await store.aclose()

    return trio.run(main)


def data_files(root: Path) -> list[Path]:
    return [p for p in (root / "db").rglob("*") if p.suffix in (".sst", ".manifest", ".compactions", ".boundary")]


def never_expiring(root: Path) -> list:
    return [c for c in run(root, admin.list_checkpoints) if c.checkpoint_expire_time_s == 0]


def test_switching_engines_leaves_no_checkpoint_that_never_expires(official, tmp_path: Path) -> None:
    ours_writer(tmp_path, "k0", "close")
    user_ours = run(tmp_path, admin.create_checkpoint, CheckpointOptions(name="ours-user"))
    user_official = official.run_json(OFFICIAL_USER_CHECKPOINT, str(tmp_path))["id"]
    users = {str(user_ours.id), user_official}
    ours_crashed = False

    steps = [("official", "k1", "close"), ("ours", "k2", "close"), ("official", "k3", "crash"),
             ("ours", "k4", "crash"), ("official", "k5", "close"), ("ours", "k6", "crash"),
             ("official", "k7", "close"), ("ours", "k8", "close")]
    for engine, key, end in steps:
        if engine == "ours":
            ours_writer(tmp_path, key, end)
        else:
            official.run(OFFICIAL_WRITER, str(tmp_path), key, end)
        assert official.run_json(OFFICIAL_READER, str(tmp_path), key)["value"] is not None
        if engine == "ours":
            ours_crashed = end == "crash"
        left = [c for c in never_expiring(tmp_path) if str(c.id) not in users]
        if ours_crashed:  # the writer checkpoint of our crashed writer, recognisable as one
            assert len(left) == 1 and is_writer_checkpoint(left[0]), (engine, key, end, left)
        else:  # a clean close of ours, and whatever the official engine did since: none at all
            assert left == [], (engine, key, end, left)

    # Both engines list exactly the two user checkpoints, neither touched.
    seen = official.run_json(OFFICIAL_CHECKPOINTS, str(tmp_path))
    assert {c["id"] for c in seen if c["expire"] is None} == users

    with slatedb.Db.open(url_of(tmp_path), settings=QUIET) as db:
        for i in range(9):
            assert db.get(b"k%d" % i) in (b"ours", b"official"), i

    # GC: with only the user checkpoints left, it deletes every manifest they and the latest do
    # not need, and every SST none of those manifests reference.
    settings = slatedb.Settings.from_dict(GC_NOW)
    run(tmp_path, admin.run_gc, settings, True)
    latest = run(tmp_path, admin.read_manifest)
    pinned = {latest.id} | {c.manifest_id for c in run(tmp_path, admin.list_checkpoints)}
    manifests = {int(p.stem) for p in (tmp_path / "db" / "manifest").iterdir() if p.suffix == ".manifest"}
    assert manifests <= pinned | {latest.id - 1}, (manifests, pinned)

    # Hard destroy: refused while the user checkpoints exist (naming two), then done.
    with pytest.raises(InvalidDeletionError, match="2 active checkpoint"):
        run(tmp_path, admin.destroy, False)
    for cid in users:
        run(tmp_path, admin.delete_checkpoint, cid)
    run(tmp_path, admin.destroy, False)
    assert data_files(tmp_path) == []


def test_our_gc_removes_what_a_crashed_writer_of_ours_left_under_the_official_engine(official, tmp_path: Path) -> None:
    """Ours crashes (its writer checkpoint stays), then only the official engine runs: the
    checkpoint, metadata dropped, is stale (its epoch is below the manifest's writer epoch); our
    GC removes it, and a hard destroy never counts it."""
    ours_writer(tmp_path, "a", "crash")
    official.run(OFFICIAL_WRITER, str(tmp_path), "b", "close")
    orphans = never_expiring(tmp_path)
    assert len(orphans) == 1 and orphans[0].metadata is None and is_writer_checkpoint(orphans[0])
    run(tmp_path, admin.destroy, False)  # not blocked by it
    assert data_files(tmp_path) == []


def test_gc_collects_the_stale_writer_checkpoint(official, tmp_path: Path) -> None:
    ours_writer(tmp_path, "a", "crash")
    official.run(OFFICIAL_WRITER, str(tmp_path), "b", "close")
    assert len(never_expiring(tmp_path)) == 1
    settings = slatedb.Settings.from_dict(GC_NOW)
    run(tmp_path, admin.run_gc, settings, True)
    assert never_expiring(tmp_path) == []
    assert official.run_json(OFFICIAL_CHECKPOINTS, str(tmp_path)) == []
