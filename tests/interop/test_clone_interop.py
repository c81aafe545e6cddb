"""Clones across engines: a clone made here opens in the official wheel (it reads the parent's
SSTs in place through ``external_dbs`` and the copied WAL range, and accepts writes that stay
out of the parent), and a clone made by the official admin API opens here.

Both engines address databases as paths inside one store: the wheel's store is rooted at
``tmp_path`` with databases ``"parent"`` and ``"clone"``; ours are ``file://<tmp_path>/parent``
and ``file://<tmp_path>/clone`` (``ExternalDb.path`` = ``"parent"`` on both sides)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb.clone import create_clone_url
from slatedb.format.manifest import decode_manifest_v2

pytestmark = pytest.mark.interop

NO_COMPACTOR = {"compactor_options": None, "flush_interval": "10ms"}

OFFICIAL_OPEN_WRITE_READ = """
async def main(root, path, puts):
    db = await open_db(root, path, overrides={"compactor_options": None})
    before = [[b64(kv.key), b64(kv.value)] for kv in await scan_all(db)]
    for k, v in json.loads(puts).items():
        await db.put(base64.b64decode(k), base64.b64decode(v))
    await db.flush()
    after = [[b64(kv.key), b64(kv.value)] for kv in await scan_all(db)]
    await db.shutdown()
    emit({"before": before, "after": after})
asyncio.run(main(*sys.argv[1:]))
"""

OFFICIAL_MAKE_PARENT_AND_CLONE = """
async def main(root, puts, wal_puts):
    db = await open_db(root, "parent", overrides={"compactor_options": None})
    for k, v in json.loads(puts).items():
        await db.put(base64.b64decode(k), base64.b64decode(v))
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    for k, v in json.loads(wal_puts).items():
        await db.put(base64.b64decode(k), base64.b64decode(v))
    await db.flush()
    await db.shutdown()
    admin = u.AdminBuilder("clone", store_at(root)).build()
    builder = admin.create_clone_builder_from_source(
        u.CloneSourceSpec(path="parent", checkpoint=None, projection_range=None))
    await builder.build()
    emit({})
asyncio.run(main(*sys.argv[1:]))
"""


def enc(rows: dict[bytes, bytes]) -> str:
    return json.dumps({base64.b64encode(k).decode(): base64.b64encode(v).decode() for k, v in rows.items()})


def dec(pairs: list) -> dict[bytes, bytes]:
    return {base64.b64decode(k): base64.b64decode(v) for k, v in pairs}


def rows(prefix: bytes, n: int) -> dict[bytes, bytes]:
    return {prefix + b"%04d" % i: b"value-%d-" % i + b"x" * 30 for i in range(n)}


def scan(url: str) -> dict[bytes, bytes]:
    with slatedb.Db.open(url, settings=NO_COMPACTOR) as db:
        return dict(db.scan())


def test_a_clone_made_here_opens_in_the_official_wheel(official, tmp_path: Path) -> None:
    parent, child = f"file://{tmp_path}/parent", f"file://{tmp_path}/clone"
    with slatedb.Db.open(parent, settings=NO_COMPACTOR) as db:
        for k, v in rows(b"l0-", 300).items():
            db.put(k, v)
        db.flush(wal=False)
    db = slatedb.Db.open(parent, settings={**NO_COMPACTOR, "flush_interval": "1h"})
    for k, v in rows(b"wal-", 20).items():
        db.put(k, v)
    db.flush()
    db.abort()  # these rows stay in the parent's WAL: the clone gets them through its copy
    done = trio.run(lambda: create_clone_url(child, parent))
    assert done.manifest.external_dbs[-1].path == "parent"
    assert done.manifest.wal_id_last_seen > done.manifest.replay_after_wal_id
    expected = {**rows(b"l0-", 300), **rows(b"wal-", 20)}

    out = official.run_json(OFFICIAL_OPEN_WRITE_READ, str(tmp_path), "clone", enc({b"theirs": b"1", b"l0-0000": b"new"}))
    assert dec(out["before"]) == expected
    assert dec(out["after"]) == {**expected, b"theirs": b"1", b"l0-0000": b"new"}
    # Their writes went to the clone only; we read the clone they wrote, and the parent as it was.
    assert scan(child) == {**expected, b"theirs": b"1", b"l0-0000": b"new"}
    assert scan(parent) == expected


@pytest.mark.parametrize("spelling", ["p%20q", "p q"])
def test_a_clone_of_a_parent_whose_name_has_a_space_opens_in_the_official_wheel(official, tmp_path: Path, spelling) -> None:
    """The clone records the parent's object-store path ``p q`` (decoded), whichever way the URL
    spells it. Before, ``file://.../p%20q`` recorded ``p%20q`` and the wheel failed to open the
    clone (its parent's SSTs "not found" under a directory ``p%20q``)."""
    parent, child = f"file://{tmp_path}/{spelling}", f"file://{tmp_path}/clone"
    with slatedb.Db.open(parent, settings=NO_COMPACTOR) as db:
        for k, v in rows(b"l0-", 50).items():
            db.put(k, v)
        db.flush(wal=False)
    assert (tmp_path / "p q").is_dir()
    done = trio.run(lambda: create_clone_url(child, parent))
    assert done.manifest.external_dbs[-1].path == "p q"
    out = official.run_json(OFFICIAL_OPEN_WRITE_READ, str(tmp_path), "clone", enc({b"theirs": b"1"}))
    assert dec(out["before"]) == rows(b"l0-", 50)
    assert scan(child) == {**rows(b"l0-", 50), b"theirs": b"1"}


def test_a_clone_made_by_the_official_wheel_opens_here(official, tmp_path: Path) -> None:
    official.run_json(OFFICIAL_MAKE_PARENT_AND_CLONE, str(tmp_path), enc(rows(b"l0-", 200)), enc(rows(b"wal-", 10)))
    manifests = sorted((tmp_path / "clone" / "manifest").iterdir())
    m = decode_manifest_v2(manifests[-1].read_bytes(), str(manifests[-1]))
    assert m.initialized and [e.path for e in m.external_dbs] == ["parent"]
    child = f"file://{tmp_path}/clone"
    expected = {**rows(b"l0-", 200), **rows(b"wal-", 10)}
    with slatedb.Db.open(child, settings=NO_COMPACTOR) as db:
        assert dict(db.scan()) == expected
        db.put(b"ours", b"1")
    assert scan(child) == {**expected, b"ours": b"1"}
    # Re-running our create_clone on their finished clone only checks it.
    again = trio.run(lambda: create_clone_url(child, f"file://{tmp_path}/parent"))
    assert again.manifest.initialized
    assert scan(f"file://{tmp_path}/parent") == expected
