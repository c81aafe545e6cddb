"""DbReader across engines, through checkpoints (spec/protocols/reader.md).

Ours -> official: our writer fills a database (L0, sorted runs from our compactor, rows left only
in the WAL by a crash), our managed DbReader raises ``wal_id_last_seen``, we create a checkpoint
with ``slatedb.checkpoint.create_checkpoint``, and our writer goes on writing. The official
wheel's ``DbReaderBuilder`` in ``ReaderMode.CHECKPOINT`` reads exactly the state at the
checkpoint, as does ours.

Official -> ours: the wheel writes (L0 and WAL-only rows), opens and shuts a managed reader,
``Admin.create_detached_checkpoint`` pins the state, the wheel writes more. Our ``DbReader`` on
that checkpoint reads exactly what the wheel's own checkpoint reader reads: the L0 rows, not the
WAL-only ones (the wheel's reader, unlike ours, does not raise ``wal_id_last_seen``, so they lie
past the checkpoint manifest's WAL range); our managed reader reads everything.

Paths: the wheel's store is ``file://<root>`` with path ``"db"``; ours is ``file://<root>/db``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb.checkpoint import CheckpointOptions, create_checkpoint
from slatedb.manifest.store import ManifestStore
from slatedb.objstore import resolve_store
from slatedb.runtime.production import ProductionRuntime

from .test_compaction_interop import run_our_compactor
from .test_db_interop import _dec, latest_manifest, model, official_apply, ours_apply, url_of

pytestmark = pytest.mark.interop

SMALL = {"l0_sst_size_bytes": 4096, "l0_max_ssts": 64, "flush_interval": "10ms", "compactor_options": None}
QUIET = slatedb.DbReaderOptions(manifest_poll_interval_s=3600, checkpoint_lifetime_s=3 * 3600)


def ops(prefix: bytes, n: int, tag: bytes) -> list[dict]:
    out = [{"op": "put", "key": prefix + b"%04d" % i, "value": tag + b"-%d-" % i + b"v" * 30} for i in range(n)]
    out += [{"op": "delete", "key": prefix + b"%04d" % i} for i in range(0, n, 13)]
    return out


def wal_tail(prefix: bytes) -> list[dict]:
    """Overwrites, deletes and new keys that stay in the WAL (the writer then crashes)."""
    return [{"op": "put", "key": prefix + b"0001", "value": b"wal-overwrite"},
            {"op": "delete", "key": prefix + b"0002"},
            {"op": "put", "key": prefix + b"wal-only", "value": b"W" * 50},
            {"op": "flush_wal"}]


OFFICIAL_CHECKPOINT = """
async def main(root, mode, arg):
    store = store_at(root)
    if mode == "create":
        # A managed reader first (it adds and removes a checkpoint of its own), then the checkpoint.
        r = await u.DbReaderBuilder("db", store).build()
        await r.shutdown()
        a = u.AdminBuilder("db", store).build()
        cp = await a.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=3600 * 1000, source=None, name="interop"))
        emit({"id": cp.id, "manifest_id": cp.manifest_id})
    else:
        b = u.DbReaderBuilder("db", store)
        b.with_reader_mode(u.ReaderMode.CHECKPOINT(arg))
        r = await b.build()
        rows = [[b64(kv.key), b64(kv.value)] for kv in await scan_all(r)]
        missing = b64(await r.get(b"no-such-key"))
        await r.shutdown()
        emit({"rows": rows, "missing": missing})
asyncio.run(main(*sys.argv[1:]))
"""


def official_checkpoint_rows(official, root: Path, cid: str) -> list[tuple[bytes, bytes]]:
    out = official.run_json(OFFICIAL_CHECKPOINT, str(root), "read", cid)
    assert out["missing"] is None
    return [(_dec(k), _dec(v)) for k, v in out["rows"]]


def our_checkpoint_rows(root: Path, cid) -> list[tuple[bytes, bytes]]:
    with slatedb.DbReader.open(url_of(root), cid) as r:
        rows = list(r.scan())
        assert list(r.scan(reverse=True)) == rows[::-1]
        for k, v in rows[::17]:
            assert r.get(k) == v
        assert r.manifest_id == r.core.manifest_id
        return rows


def test_the_official_reader_opens_a_checkpoint_created_here(official, tmp_path: Path) -> None:
    first = ops(b"k", 500, b"r1") + [{"op": "flush_l0"}] + ops(b"k", 300, b"r2") + [{"op": "flush_l0"}]
    ours_apply(tmp_path, first, SMALL, "close", "first")
    assert run_our_compactor(tmp_path)["completed"] >= 1
    assert latest_manifest(tmp_path).compacted, "expected a sorted run"
    tail = ops(b"m", 40, b"l0") + [{"op": "flush_l0"}] + wal_tail(b"k")
    ours_apply(tmp_path, tail, SMALL, "crash", "tail")  # L0 on top of the run, and WAL-only rows
    expected = model(first + tail)

    async def make_checkpoint():
        store = resolve_store(url_of(tmp_path))
        rt = ProductionRuntime("admin")
        try:
            return await create_checkpoint(ManifestStore(store, rt), rt, CheckpointOptions(lifetime_s=3600, name="interop"))
        finally:
            await store.aclose()

    with slatedb.DbReader.open(url_of(tmp_path), options=QUIET) as managed:  # raises wal_id_last_seen
        assert dict(managed.scan()) == expected
        cp = trio.run(make_checkpoint)
    after = ops(b"k", 50, b"after") + [{"op": "flush_l0"}, {"op": "put", "key": b"zz", "value": b"late"}]
    ours_apply(tmp_path, after, SMALL, "close", "after")  # not in the checkpoint

    assert official_checkpoint_rows(official, tmp_path, str(cp.id)) == sorted(expected.items())
    assert our_checkpoint_rows(tmp_path, cp.id) == sorted(expected.items())
    with slatedb.DbReader.open(url_of(tmp_path), options=QUIET) as r:
        assert dict(r.scan()) == model(after, expected)


def test_our_reader_opens_a_checkpoint_the_official_wheel_created(official, tmp_path: Path) -> None:
    overrides = {"l0_sst_size_bytes": 4096, "flush_interval": "10ms"}
    l0 = ops(b"k", 400, b"r1") + [{"op": "flush_l0"}]
    first = l0 + ops(b"k", 100, b"r2") + wal_tail(b"k")
    official_apply(official, tmp_path, first, overrides, "crash", "first")  # L0 and WAL-only rows
    # The wheel's managed reader does not raise wal_id_last_seen when it establishes its
    # checkpoint (ours does, RFC 000 step 4), so the checkpoint holds the L0 rows only: the
    # WAL-only rows lie past its manifest's wal_id_last_seen. Both readers agree on that.
    expected = model(l0)
    made = official.run_json(OFFICIAL_CHECKPOINT, str(tmp_path), "create", "")
    cid = uuid.UUID(made["id"])
    m = latest_manifest(tmp_path)
    cp = next(c for c in m.checkpoints if c.id == cid)
    assert cp.manifest_id == made["manifest_id"] and cp.checkpoint_expire_time_s > 0 and cp.name == "interop"
    after = ops(b"k", 60, b"after") + [{"op": "flush_l0"}, {"op": "put", "key": b"zz", "value": b"late"}]
    official_apply(official, tmp_path, after, overrides, "shutdown", "after")

    theirs = official_checkpoint_rows(official, tmp_path, str(cid))
    ours = our_checkpoint_rows(tmp_path, str(cid))
    assert ours == theirs == sorted(expected.items())
    with slatedb.DbReader.open(url_of(tmp_path), options=QUIET) as r:
        assert dict(r.scan()) == model(after, model(first))
        managed = r.checkpoint_id
    assert all(c.id != managed for c in latest_manifest(tmp_path).checkpoints)
    assert any(c.id == cid for c in latest_manifest(tmp_path).checkpoints)
