"""Checkpoints across engines: the official admin API (``AdminBuilder(...).build()``) lists and
reads checkpoints made here -- by the admin API and by ``Db.create_checkpoint`` -- and refreshes
and deletes them; our admin API decodes checkpoints made by the official
``create_detached_checkpoint``, and creates one from an official source checkpoint.

Paths: the wheel's store is ``file://<root>`` with path ``"db"``; ours is ``file://<root>/db``.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb import CheckpointOptions, CheckpointScope, admin
from slatedb.objstore import resolve_store

from .test_db_interop import url_of

pytestmark = pytest.mark.interop

QUIET = {"compactor_options": None, "l0_sst_size_bytes": 4096}


def our_admin(root: Path, fn, *args, **kwargs):
    async def main():
        store = resolve_store(url_of(root))
        try:
            return await fn(store, *args, **kwargs)
        finally:
            await store.aclose()

    return trio.run(main)


OFFICIAL_READ = """
def cp_json(c):
    return {"id": c.id, "manifest_id": c.manifest_id, "expire": c.expire_time_secs,
            "create": c.create_time_secs, "name": c.name}

async def main(root, refresh_id, delete_id):
    a = u.AdminBuilder("db", store_at(root)).build()
    every = [cp_json(c) for c in await a.list_checkpoints(None)]
    named = [cp_json(c) for c in await a.list_checkpoints("ours")]
    latest = await a.read_manifest(None)
    pinned = {str(c["manifest_id"]): (await a.read_manifest(c["manifest_id"])) is not None for c in every}
    await a.refresh_checkpoint(refresh_id, 7200 * 1000)
    await a.delete_checkpoint(delete_id)
    emit({"every": every, "named": named, "latest_id": latest.id,
          "latest_checkpoints": [cp_json(c) for c in latest.checkpoints], "pinned": pinned,
          "after": [cp_json(c) for c in await a.list_checkpoints(None)]})
asyncio.run(main(*sys.argv[1:]))
"""


def test_the_official_admin_api_sees_our_checkpoints(official, tmp_path: Path) -> None:
    with slatedb.Db.open(url_of(tmp_path), settings=QUIET) as db:
        for i in range(100):
            db.put(b"k%03d" % i, b"v" * 30)
        from_db = db.create_checkpoint(CheckpointScope.ALL, CheckpointOptions(name="from-db"))
    before = int(time.time())
    ours = our_admin(tmp_path, admin.create_checkpoint, CheckpointOptions(lifetime_s=3600, name="ours"))
    copy = our_admin(tmp_path, admin.create_checkpoint, CheckpointOptions(source=ours.id, name="ours"))
    mine = {c.id: c for c in our_admin(tmp_path, admin.list_checkpoints)}
    latest = our_admin(tmp_path, admin.read_manifest)
    got = official.run_json(OFFICIAL_READ, str(tmp_path), str(ours.id), str(copy.id))
    every = {c["id"]: c for c in got["every"]}
    assert set(every) == {str(i) for i in mine}  # the writer's own checkpoint too
    assert every[str(ours.id)]["manifest_id"] == ours.manifest_id == every[str(copy.id)]["manifest_id"]
    assert before + 3600 <= every[str(ours.id)]["expire"] <= int(time.time()) + 3601
    assert every[str(copy.id)]["expire"] is None and every[str(from_db.id)]["expire"] is None
    assert every[str(from_db.id)]["manifest_id"] == from_db.manifest_id and every[str(from_db.id)]["name"] == "from-db"
    for c in mine.values():
        assert every[str(c.id)]["create"] == c.checkpoint_create_time_s and every[str(c.id)]["name"] == c.name
    assert sorted(c["id"] for c in got["named"]) == sorted([str(ours.id), str(copy.id)])
    assert got["latest_id"] == latest.id
    assert {c["id"] for c in got["latest_checkpoints"]} == set(every)
    assert all(got["pinned"].values())  # every pinned manifest reads in the wheel
    # The wheel refreshed one of ours and deleted another; we see both changes.
    after = {c.id: c for c in our_admin(tmp_path, admin.list_checkpoints)}
    assert copy.id not in after and after[ours.id].checkpoint_expire_time_s >= before + 7200
    assert {str(i) for i in after} == {c["id"] for c in got["after"]}
    assert our_admin(tmp_path, admin.read_manifest).id == latest.id + 2  # two official manifest writes


OFFICIAL_CREATE = """
async def main(root):
    a = u.AdminBuilder("db", store_at(root)).build()
    t = await a.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=600 * 1000, source=None, name="theirs"))
    f = await a.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=None, source=t.id, name=None))
    emit({"theirs": {"id": t.id, "manifest_id": t.manifest_id}, "forever": {"id": f.id, "manifest_id": f.manifest_id},
          "listed": {c.id: {"expire": c.expire_time_secs, "create": c.create_time_secs}
                     for c in await a.list_checkpoints(None)}})
asyncio.run(main(*sys.argv[1:]))
"""


def test_we_decode_checkpoints_the_official_admin_api_made(official, tmp_path: Path) -> None:
    with slatedb.Db.open(url_of(tmp_path), settings=QUIET) as db:
        db.put(b"a", b"1")
    before = int(time.time())
    got = official.run_json(OFFICIAL_CREATE, str(tmp_path))
    theirs, forever = uuid.UUID(got["theirs"]["id"]), uuid.UUID(got["forever"]["id"])
    mine = {c.id: c for c in our_admin(tmp_path, admin.list_checkpoints)}
    assert {str(i) for i in mine} == set(got["listed"])
    t, f = mine[theirs], mine[forever]
    assert (t.name, t.manifest_id, t.metadata) == ("theirs", got["theirs"]["manifest_id"], None)
    assert before + 600 <= t.checkpoint_expire_time_s <= int(time.time()) + 601
    assert t.checkpoint_expire_time_s == got["listed"][str(theirs)]["expire"]
    assert t.checkpoint_create_time_s == got["listed"][str(theirs)]["create"]
    assert (f.name, f.manifest_id, f.checkpoint_expire_time_s) == (None, t.manifest_id, 0)
    assert [c.id for c in our_admin(tmp_path, admin.list_checkpoints, "theirs")] == [theirs]
    # An official checkpoint is a valid source here, and what it pins reads here.
    ours = our_admin(tmp_path, admin.create_checkpoint, CheckpointOptions(source=theirs, name="from-theirs"))
    assert ours.manifest_id == t.manifest_id
    pinned = our_admin(tmp_path, admin.read_manifest, t.manifest_id)
    assert pinned.manifest.initialized and pinned.id == t.manifest_id
    our_admin(tmp_path, admin.delete_checkpoint, forever)
    assert forever not in {c.id for c in our_admin(tmp_path, admin.list_checkpoints)}
