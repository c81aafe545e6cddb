"""Issue 22: data written by transactions (and row metadata: seq, create_ts, expire_ts with an
absolute expiry) read by the other engine, both ways, with the official 0.17 wheel."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import slatedb
from slatedb import IsolationLevel, TransactionConflictError
from tests.checker.known import ORPHAN_WRITER_CHECKPOINT

pytestmark = pytest.mark.interop

S = {"compactor_options": None, "flush_interval": "10ms"}
FAR_MS = 4_102_444_800_000  # 2100-01-01

OFFICIAL = """
async def main(root, mode):
    if mode == "write":
        db = await open_db(root)
        t = await db.begin(u.IsolationLevel.SERIALIZABLE_SNAPSHOT)
        await t.put(b"official:a", b"1")
        await t.put(b"official:b", b"2")
        await t.commit()
        t = await db.begin(u.IsolationLevel.SNAPSHOT)
        await t.put(b"official:a", b"overwritten")
        await t.delete(b"official:b")
        await t.commit()
        loser = await db.begin(u.IsolationLevel.SNAPSHOT)
        await loser.put(b"official:c", b"never")
        await db.put(b"official:c", b"plain")
        try:
            await loser.commit()
            emit({"conflict": False})
        except u.Error.Transaction:
            emit({"conflict": True})
        await db.flush()
        await db.shutdown()
    else:
        db = await open_db(root)
        rows = [[b64(kv.key), b64(kv.value)] for kv in await scan_all(db)]
        kv = await db.get_key_value(b"ours:expiring")
        emit({"rows": rows, "expire_ts": kv.expire_ts, "seq": kv.seq})
        await db.shutdown()
asyncio.run(main(*sys.argv[1:]))
"""


def _dec(s: str) -> bytes:
    return base64.b64decode(s)


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)  # the wheel opened as a writer after ours
def test_our_transactions_are_read_by_the_official_wheel(official, tmp_path: Path) -> None:
    root = tmp_path
    (root / "db").mkdir()
    with slatedb.Db.open(f"file://{root}/db", S) as db:
        with db.begin(IsolationLevel.SERIALIZABLE_SNAPSHOT) as t:
            t.put(b"ours:a", b"1")
            t.put(b"ours:b", b"2")
        t = db.begin(IsolationLevel.SNAPSHOT)
        t.put(b"ours:a", b"overwritten")
        t.delete(b"ours:b")
        t.commit()
        loser = db.begin(IsolationLevel.SNAPSHOT)
        loser.put(b"ours:c", b"never")
        db.put(b"ours:c", b"plain")
        with pytest.raises(TransactionConflictError):
            loser.commit()
        h = db.put(b"ours:expiring", b"x", expire_at_ms=FAR_MS)
        ours = db.get_key_value(b"ours:expiring")
    out = official.run_json(OFFICIAL, str(root), "read")
    assert [(_dec(k), _dec(v)) for k, v in out["rows"]] == [
        (b"ours:a", b"overwritten"), (b"ours:c", b"plain"), (b"ours:expiring", b"x")]
    assert out["expire_ts"] == FAR_MS == ours.expire_ts and out["seq"] == h.seq == ours.seq


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
def test_official_transactions_are_read_by_ours(official, tmp_path: Path) -> None:
    root = tmp_path
    out = official.run_json(OFFICIAL, str(root), "write")
    assert out["conflict"] is True  # the probed SNAPSHOT write-write conflict
    with slatedb.Db.open(f"file://{root}/db", S) as db:
        assert list(db.scan()) == [(b"official:a", b"overwritten"), (b"official:c", b"plain")]
        assert db.get_key_value(b"official:a").create_ts is not None
        t = db.begin(IsolationLevel.SERIALIZABLE_SNAPSHOT)
        assert t.get(b"official:c") == b"plain"
        t.put(b"official:d", b"ours")
        assert t.commit() is not None
