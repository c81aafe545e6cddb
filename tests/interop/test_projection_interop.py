"""Projection and union across engines (docs/rescaling.md): databases the official 0.17
``CloneBuilder`` projects and unites open here (Db and DbReader, rows exact), and the official
``DbBuilder``, ``DbReaderBuilder``, ``Admin.read_manifest`` and ``run_gc_once`` accept ours.

Databases are paths inside one store rooted at ``tmp_path`` on the official side
(``"src"``, ``"left"``...) and ``file://<tmp_path>/<name>`` on ours."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.checkpoint import CheckpointOptions
from slatedb.objstore import resolve_store
from slatedb.projection import KeyRange
from tests.checker.known import OFFICIAL_UNION_REPEATS_VIEW_ID

from .test_clone_interop import dec, enc

pytestmark = pytest.mark.interop

NO_COMPACTOR = {"compactor_options": None, "flush_interval": "10ms"}

OFFICIAL_SPLIT_AND_MERGE = """
def rng(start, end):
    return u.KeyRange(start=None if start == "" else start.encode(), start_inclusive=True,
                      end=None if end == "" else end.encode(), end_inclusive=False)

async def main(root, puts, cut):
    db = await open_db(root, "src", overrides={"compactor_options": None, "wal_enabled": False})
    items = list(json.loads(puts).items())
    for i, (k, v) in enumerate(items):
        await db.put(base64.b64decode(k), base64.b64decode(v))
        if i == len(items) // 2:
            await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    await db.shutdown()
    for name, r in (("left", rng("", cut)), ("right", rng(cut, ""))):
        a = u.AdminBuilder(name, store_at(root)).build()
        b = a.create_clone_builder_from_source(u.CloneSourceSpec(path="src", checkpoint=None, projection_range=r))
        await b.build()
    a = u.AdminBuilder("merged", store_at(root)).build()
    b = a.create_clone_builder_from_source(u.CloneSourceSpec(path="left", checkpoint=None, projection_range=None))
    b.with_source(u.CloneSourceSpec(path="right", checkpoint=None, projection_range=None))
    await b.build()
    emit({})
asyncio.run(main(*sys.argv[1:]))
"""

OFFICIAL_CHECK_OURS = """
def vr(v):
    r = v.visible_range
    return None if r is None else [b64(r.start), r.start_inclusive, b64(r.end), r.end_inclusive]

async def main(root, names, write_to):
    out = {}
    for name in json.loads(names):
        a = u.AdminBuilder(name, store_at(root)).build()
        m = await a.read_manifest(None)
        reader = await u.DbReaderBuilder(name, store_at(root)).build()
        it = await reader.scan(u.KeyRange(start=None, start_inclusive=False, end=None, end_inclusive=False))
        rows = []
        while True:
            batch = await it.next_batch(1000)
            if not batch:
                break
            rows.extend([b64(kv.key), b64(kv.value)] for kv in batch)
        await reader.shutdown()
        out[name] = {"rows": rows, "writer_epoch": m.writer_epoch, "compactor_epoch": m.compactor_epoch,
                     "last_l0_seq": m.last_l0_seq, "initialized": m.initialized,
                     "external": [[e.path, len(e.sst_ids), e.final_checkpoint_id is not None] for e in m.external_dbs],
                     "l0_ranges": [vr(v) for v in m.l0],
                     "run_ranges": [[vr(v) for v in r.sst_views] for r in m.compacted] if m.compacted and hasattr(m.compacted[0], "sst_views") else None}
    db = await open_db(root, write_to, overrides={"compactor_options": None})
    await db.put(b"theirs", b"1")
    await db.flush()
    await db.shutdown()
    for name in json.loads(names):
        a = u.AdminBuilder(name, store_at(root)).build()
        await a.run_gc_once(None)
    emit(out)
asyncio.run(main(*sys.argv[1:]))
"""


def rows(n: int) -> dict[bytes, bytes]:
    return {b"k%04d" % i: b"value-%d-" % i + b"x" * 20 for i in range(n)}


def scan(url: str) -> dict[bytes, bytes]:
    with slatedb.DbReader.open(url) as r:
        return dict(r.scan())


@pytest.mark.check_allows("COMPACT-4", reason=OFFICIAL_UNION_REPEATS_VIEW_ID)
def test_projections_and_unions_made_by_the_official_wheel_open_here(official, tmp_path: Path) -> None:
    data = rows(200)
    official.run_json(OFFICIAL_SPLIT_AND_MERGE, str(tmp_path), enc(data), "k0100")
    left = {k: v for k, v in data.items() if k < b"k0100"}
    right = {k: v for k, v in data.items() if k >= b"k0100"}
    for name, expect in (("left", left), ("right", right), ("merged", data)):
        url = f"file://{tmp_path}/{name}"
        assert scan(url) == expect, name
        with slatedb.Db.open(url, settings=NO_COMPACTOR) as db:
            assert dict(db.scan()) == expect, name
            assert db.get(b"k0000") == (None if name == "right" else data[b"k0000"])
    merged = trio.run(admin.read_manifest, resolve_store(f"file://{tmp_path}/merged"))
    assert merged.manifest.initialized and len(merged.manifest.external_dbs) >= 1
    # Our own union of their shards gives the same rows.
    trio.run(admin.union, f"file://{tmp_path}/ours", [f"file://{tmp_path}/left", f"file://{tmp_path}/right"])
    assert scan(f"file://{tmp_path}/ours") == data


def test_our_projections_and_unions_open_in_the_official_wheel(official, tmp_path: Path) -> None:
    import json

    data = rows(200)
    src = f"file://{tmp_path}/src"
    with slatedb.Db.open(src, settings=NO_COMPACTOR) as db:
        for i, (k, v) in enumerate(data.items()):
            db.put(k, v)
            if i == 100:
                db.flush(wal=False)
    cp = trio.run(admin.create_checkpoint, resolve_store(src), CheckpointOptions(lifetime_s=3600)).id
    trio.run(admin.project, f"file://{tmp_path}/left", src, KeyRange(None, b"k0100"), cp)
    trio.run(admin.project, f"file://{tmp_path}/right", src, KeyRange(b"k0100", None), cp)
    u = trio.run(admin.union, f"file://{tmp_path}/merged", [f"file://{tmp_path}/left", f"file://{tmp_path}/right"])
    shard_seq = trio.run(admin.read_manifest, resolve_store(f"file://{tmp_path}/left")).manifest.last_l0_seq
    out = official.run_json(OFFICIAL_CHECK_OURS, str(tmp_path), json.dumps(["left", "right", "merged"]), "left")
    left = {k: v for k, v in data.items() if k < b"k0100"}
    right = {k: v for k, v in data.items() if k >= b"k0100"}
    assert dec(out["left"]["rows"]) == left
    assert dec(out["right"]["rows"]) == right
    assert dec(out["merged"]["rows"]) == data
    m = out["merged"]
    assert m["writer_epoch"] == 0 and m["compactor_epoch"] == 0 and m["initialized"]
    assert m["last_l0_seq"] == u.manifest.last_l0_seq >= shard_seq
    assert m["external"] == [["src", len(u.manifest.external_dbs[0].sst_ids), True]]
    # the shards' views carry their ranges (start included or open, as the official engine requires)
    for name in ("left", "right"):
        ranges = out[name]["l0_ranges"]
        assert ranges and all(r is not None and (r[0] is None or r[1]) for r in ranges), (name, ranges)
    assert all(base64.b64decode(r[2]) <= b"k0100" for r in out["left"]["l0_ranges"])
    # Their write to the left shard, and their GC of all three, leave every database whole.
    assert scan(f"file://{tmp_path}/left") == {**left, b"theirs": b"1"}
    assert scan(f"file://{tmp_path}/merged") == data
    assert scan(f"file://{tmp_path}/right") == right
