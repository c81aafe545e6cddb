"""Byte compatibility with the official SlateDB 0.17.0 wheel, in both directions.

Official -> ours: the wheel writes one database per compression codec (puts, deletes, TTL rows,
>1000 rows so there are bloom filters and several blocks, a memtable flushed to L0, a WAL left
behind); our codecs decode every manifest, compactions file, WAL SST and compacted SST, and
every row matches the operation that wrote it. A separate database drives the official
compactor so that a real ``Compaction`` record (and a compactor checkpoint) is decoded too.

Ours -> official: SSTs from our writer plus a V2 manifest from our encoder, assembled into a
database directory, open in the wheel, which reads back every key (tombstones hide keys); and a
manifest the wheel wrote, decoded and re-encoded by us, is accepted by the wheel.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
from ulid import ULID

from slatedb.errors import CorruptionError
from slatedb.format import compactions as cf
from slatedb.format import manifest as mf
from slatedb.format import types as t
from slatedb.format.sst import SstOptions, decode_all_rows, decode_layout, decode_stats
from slatedb.format.sst_writer import write_sst
from slatedb.format.wal_sst import decode_wal_sst
from slatedb.row import Row, RowKind

pytestmark = pytest.mark.interop

CODECS = {
    "none": t.CompressionFormat.NONE,
    "Snappy": t.CompressionFormat.SNAPPY,
    "Zlib": t.CompressionFormat.ZLIB,
    "Lz4": t.CompressionFormat.LZ4,
    "Zstd": t.CompressionFormat.ZSTD,
}
TTL_MS = 10 * 3600 * 1000  # far enough in the future to stay visible during the test

# ---------------------------------------------------------------------------------------------
# The workload, shared by the official writer script and the expectations
# ---------------------------------------------------------------------------------------------


def workload() -> list[dict]:
    """Operations in order; every put/delete is its own write batch, so op i gets seq i+1."""
    ops: list[dict] = []
    for i in range(1500):
        ops.append({"op": "put", "key": b"key%05d" % i, "value": (b"v%d-" % i) * (i % 7 + 1)})
    for i in range(0, 1500, 97):
        ops.append({"op": "delete", "key": b"key%05d" % i})
    for i in range(20):
        ops.append({"op": "put", "key": b"ttl%03d" % i, "value": b"t%d" % i, "ttl_ms": TTL_MS})
    ops.append({"op": "flush_l0"})
    for i in range(0, 60, 2):
        ops.append({"op": "put", "key": b"key%05d" % i, "value": b"rewritten%d" % i})
    ops.append({"op": "delete", "key": b"key00001"})
    ops.append({"op": "flush_wal"})
    return ops


def writes(ops: list[dict]) -> list[dict]:
    """Only the data operations; ``writes(ops)[seq - 1]`` wrote sequence number ``seq``."""
    return [o for o in ops if o["op"] in ("put", "delete")]


def final_state(ops: list[dict], max_seq: int | None = None) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for seq, o in enumerate(writes(ops), start=1):
        if max_seq is not None and seq > max_seq:
            break
        if o["op"] == "put":
            state[o["key"]] = o["value"]
        else:
            state.pop(o["key"], None)
    return state


def _jsonable(ops: list[dict]) -> str:
    enc = [
        {k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in o.items()} for o in ops
    ]
    return json.dumps(enc)


WRITER_SCRIPT = """
async def main(root, ops_path, codec):
    ops = json.load(open(ops_path))
    overrides = {} if codec == "none" else {"compression_codec": codec}
    db = await open_db(root, overrides=overrides)
    for o in ops:
        key = base64.b64decode(o["key"]) if "key" in o else None
        if o["op"] == "put" and "ttl_ms" in o:
            await db.put_with_options(key, base64.b64decode(o["value"]),
                u.PutOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(o["ttl_ms"])), u.WriteOptions())
        elif o["op"] == "put":
            await db.put(key, base64.b64decode(o["value"]))
        elif o["op"] == "delete":
            await db.delete(key)
        elif o["op"] == "flush_l0":
            await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
        elif o["op"] == "flush_wal":
            await db.flush()
    await db.shutdown()
asyncio.run(main(*sys.argv[1:]))
emit({"ok": True})
"""

READ_ALL_SCRIPT = """
async def main(root, keys_path):
    db = await open_db(root)
    keys = [base64.b64decode(k) for k in json.load(open(keys_path))]
    got = {}
    for k in keys:
        got[b64(k)] = b64(await db.get(k))
    scanned = [[b64(kv.key), b64(kv.value)] for kv in await scan_all(db)]
    await db.shutdown()
    return got, scanned
got, scanned = asyncio.run(main(*sys.argv[1:]))
emit({"get": got, "scan": scanned})
"""


def official_read_all(official, root: Path, keys: list[bytes]) -> tuple[dict[bytes, bytes | None], list]:
    keys_path = root / "keys.json"
    keys_path.write_text(json.dumps([base64.b64encode(k).decode() for k in keys]))
    out = official.run_json(READ_ALL_SCRIPT, str(root), str(keys_path))
    dec = lambda s: None if s is None else base64.b64decode(s)  # noqa: E731
    got = {dec(k): dec(v) for k, v in out["get"].items()}
    scanned = [(dec(k), dec(v)) for k, v in out["scan"]]
    return got, scanned


def write_official_db(official, root: Path, codec: str) -> tuple[str, Path, list[dict]]:
    ops = workload()
    ops_path = root / "ops.json"
    ops_path.write_text(_jsonable(ops))
    official.run_json(WRITER_SCRIPT, str(root), str(ops_path), codec)
    return codec, root / "db", ops


@pytest.fixture(scope="module", params=list(CODECS))
def official_db(request, official, tmp_path_factory) -> tuple[str, Path, list[dict]]:
    return write_official_db(official, tmp_path_factory.mktemp(f"official-{request.param}"), request.param)


# ---------------------------------------------------------------------------------------------
# Official -> ours
# ---------------------------------------------------------------------------------------------


def _check_row(row: Row, ops: list[dict]) -> None:
    op = writes(ops)[row.seq - 1]
    assert row.key == op["key"], row
    assert row.create_ts_ms is not None
    if op["op"] == "delete":
        assert row.kind is RowKind.TOMBSTONE and row.value == b""
    else:
        assert row.kind is RowKind.VALUE and row.value == op["value"]
        if "ttl_ms" in op:
            assert row.expire_ts_ms == row.create_ts_ms + op["ttl_ms"]
        else:
            assert row.expire_ts_ms is None


def _latest_manifest(db: Path) -> tuple[Path, t.ManifestV2]:
    path = sorted((db / "manifest").glob("*.manifest"))[-1]
    decoded = mf.decode_manifest(path.read_bytes(), str(path))
    assert isinstance(decoded, t.ManifestV2), "the official wheel writes manifest V2"
    return path, decoded


def test_every_manifest_decodes_and_round_trips(official_db) -> None:
    _, db, ops = official_db
    paths = sorted((db / "manifest").glob("*.manifest"))
    assert [int(p.stem) for p in paths] == list(range(1, len(paths) + 1))
    for p in paths:
        data = p.read_bytes()
        m = mf.decode_manifest(data, str(p))
        assert m.manifest_id == 0
        assert mf.decode_manifest(mf.encode_manifest(m), "re") == m
        for cut in range(len(data)):  # official files: every truncation is detected
            with pytest.raises(CorruptionError):
                mf.decode_manifest(data[:cut], str(p))
    _, latest = _latest_manifest(db)
    assert latest.initialized and latest.writer_epoch >= 1
    assert latest.last_l0_seq <= len(writes(ops))
    assert [v.id for v in latest.l0] == [v.sst_id for v in latest.l0]  # new L0 view id == SST id
    assert {v.sst_id for v in latest.l0} <= {s.id for s in latest.ssts}
    assert latest.sequence_tracker  # preserved opaque blob


def test_every_compactions_file_decodes(official_db) -> None:
    _, db, _ = official_db
    paths = sorted((db / "compactions").glob("*.compactions"))
    assert paths
    for p in paths:
        data = p.read_bytes()
        assert cf.compactions_version(data, str(p)) == 2
        c = cf.decode_compactions(data, str(p))
        assert cf.decode_compactions(cf.encode_compactions(c), "re") == c


def test_wal_ssts_hold_every_write(official_db) -> None:
    codec, db, ops = official_db
    rows: list[Row] = []
    fences = 0
    for p in sorted((db / "wal").glob("*.sst")):
        wal = decode_wal_sst(p.read_bytes(), str(p))
        if wal.is_fence:
            fences += 1
            continue
        assert wal.info.compression_format == CODECS[codec]
        assert [r.seq for r in wal.rows] == sorted(r.seq for r in wal.rows)
        rows.extend(wal.rows)
    assert fences >= 1, "the official writer fences the WAL at open"
    assert [r.seq for r in rows] == list(range(1, len(writes(ops)) + 1))
    for row in rows:
        _check_row(row, ops)


def test_compacted_ssts_hold_the_state(official_db) -> None:
    codec, db, ops = official_db
    _, m = _latest_manifest(db)
    newest: dict[bytes, Row] = {}
    saw_filter = saw_blocks = False
    for sst in m.ssts:
        name = f"compacted/{sst.id}.sst"
        data = (db / name).read_bytes()
        layout = decode_layout(data, name)
        assert layout.info == sst.info
        assert layout.format_version == sst.format_version == 2
        assert layout.info.compression_format == CODECS[codec]
        rows = decode_all_rows(data, name)
        assert [(r.key, -r.seq) for r in rows] == sorted((r.key, -r.seq) for r in rows)
        assert rows[0].key == sst.info.first_entry and rows[-1].key == sst.info.last_entry
        stats = decode_stats(
            data[sst.info.stats_offset : sst.info.stats_offset + sst.info.stats_len], sst.info, name
        )
        assert stats.num_puts + stats.num_deletes + stats.num_merges == len(rows)
        if layout.filter is not None:
            saw_filter = True
            assert all(layout.filter.might_contain(r.key) for r in rows)
        saw_blocks |= len(layout.index) > 1
        for row in rows:
            _check_row(row, ops)
            if row.key not in newest or newest[row.key].seq < row.seq:
                newest[row.key] = row
    assert saw_filter and saw_blocks
    visible = {k: r.value for k, r in newest.items() if r.kind is RowKind.VALUE}
    assert visible == final_state(ops, m.last_l0_seq)


def test_official_compactor_output_decodes(official, tmp_path) -> None:
    script = """
async def main(root):
    db = await open_db(root, overrides={"compactor_options.poll_interval": "100ms",
        "compactor_options.worker.compactions_poll_interval": "100ms"})
    for r in range(5):
        for i in range(50):
            await db.put(b"k%03d" % i, b"round%d" % r)
        await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    for _ in range(100):
        await asyncio.sleep(0.1)
    await db.shutdown()
asyncio.run(main(sys.argv[1]))
emit({"ok": True})
"""
    official.run_json(script, str(tmp_path))
    db = tmp_path / "db"
    jobs = [
        job
        for p in sorted((db / "compactions").glob("*.compactions"))
        for job in cf.decode_compactions(p.read_bytes(), str(p)).recent_compactions
    ]
    assert jobs, "the official compactor recorded no compaction"
    done = [j for j in jobs if j.status is t.CompactionStatus.COMPLETED]
    assert done and isinstance(done[-1].spec, t.TieredCompactionSpec)
    assert len(done[-1].spec.l0_view_ids) >= 4 and done[-1].output_ssts
    _, m = _latest_manifest(db)
    assert m.compacted and m.compacted[0].ssts
    # Under load the official compactor may not have taken the last L0 SST yet: decode every
    # SST the manifest lists (runs and L0) and keep each key's newest version.
    views = [v for run in m.compacted for v in run.ssts] + list(m.l0)
    rows = [
        r
        for view in views
        for r in decode_all_rows((db / f"compacted/{view.sst_id}.sst").read_bytes(), str(view.sst_id))
    ]
    newest = {}
    for r in sorted(rows, key=lambda r: r.seq):
        newest[r.key] = r.value
    assert newest == {b"k%03d" % i: b"round4" for i in range(50)}


# ---------------------------------------------------------------------------------------------
# Ours -> official
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CODECS.values()), ids=list(CODECS))
def test_official_reads_our_ssts_and_manifest(official, tmp_path, codec) -> None:
    now_ms = int(time.time() * 1000)
    keys = [b"ours%05d" % i for i in range(1200)]
    old_rows = [Row(k, i + 1, RowKind.VALUE, b"old-%d" % i, None, now_ms) for i, k in enumerate(keys)]
    seq = len(keys)
    new_rows = []
    for i, k in enumerate(keys):
        if i % 10 == 0:
            seq += 1
            new_rows.append(Row(k, seq, RowKind.TOMBSTONE, b"", None, now_ms))
        elif i % 10 == 1:
            seq += 1
            new_rows.append(Row(k, seq, RowKind.VALUE, b"new-%d" % i, now_ms + TTL_MS, now_ms))
    expected = {r.key: r.value for r in old_rows}
    for r in new_rows:
        if r.kind is RowKind.TOMBSTONE:
            expected.pop(r.key)
        else:
            expected[r.key] = r.value

    options = SstOptions(compression=codec)
    db = tmp_path / "db"
    (db / "compacted").mkdir(parents=True)
    (db / "manifest").mkdir()
    ssts, views = [], []
    for rows in (new_rows, old_rows):  # l0 lists newest first
        sst_id = ULID()
        encoded = write_sst(rows, options)
        (db / f"compacted/{sst_id}.sst").write_bytes(encoded.data)
        ssts.append(t.CompactedSsTableV2(sst_id, encoded.info, encoded.format_version))
        views.append(t.CompactedSsTableView(sst_id, sst_id))
    assert decode_layout((db / f"compacted/{ssts[1].id}.sst").read_bytes(), "old").filter is not None
    manifest = t.ManifestV2(
        initialized=True,
        ssts=tuple(ssts),
        l0=tuple(views),
        last_l0_clock_tick=now_ms,
        last_l0_seq=seq,
    )
    (db / "manifest" / f"{1:020d}.manifest").write_bytes(mf.encode_manifest(manifest))

    got, scanned = official_read_all(official, tmp_path, keys)
    assert got == {k: expected.get(k) for k in keys}
    assert scanned == sorted(expected.items())
    # The wheel then wrote its own manifests on top of ours; they decode and keep our SSTs.
    _, latest = _latest_manifest(db)
    assert {s.id for s in ssts} <= {s.id for s in latest.ssts}


def test_official_accepts_our_rewrite_of_its_manifest(official, tmp_path) -> None:
    _, db, ops = write_official_db(official, tmp_path, "none")
    path, m = _latest_manifest(db)
    rewritten = mf.encode_manifest(m)
    (db / "manifest" / f"{int(path.stem) + 1:020d}.manifest").write_bytes(rewritten)
    state = final_state(ops)
    keys = sorted({o["key"] for o in writes(ops)})
    got, scanned = official_read_all(official, tmp_path, keys)
    assert got == {k: state.get(k) for k in keys}
    assert scanned == sorted(state.items())
    # Fields we do not interpret survived into the wheel's next manifest.
    _, after = _latest_manifest(db)
    assert after.sequence_tracker and after.last_l0_seq >= m.last_l0_seq
