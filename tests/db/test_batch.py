"""WriteBatch and key/value validation."""

from __future__ import annotations

import math

import pytest

from slatedb import batch as batch_mod
from slatedb.batch import (
    MAX_KEY_SIZE_BYTES,
    NO_EXPIRY,
    OpKind,
    WriteBatch,
    expire_ts_ms,
    validate_key,
    validate_value,
)
from slatedb.errors import InvalidArgumentError


def test_validate_key_accepts_bytes_like():
    k = b"abc"
    assert validate_key(k) is k
    assert validate_key(bytearray(b"abc")) == b"abc"
    assert type(validate_key(bytearray(b"abc"))) is bytes
    assert validate_key(memoryview(b"xabcx")[1:4]) == b"abc"
    assert type(validate_key(memoryview(b"abc"))) is bytes


@pytest.mark.parametrize("bad", ["abc", 1, None, [1], 1.5])
def test_validate_key_rejects_non_bytes(bad):
    with pytest.raises(InvalidArgumentError, match="key must be bytes"):
        validate_key(bad)


@pytest.mark.parametrize("empty", [b"", bytearray(), memoryview(b"")])
def test_validate_key_rejects_empty(empty):
    with pytest.raises(InvalidArgumentError, match="key cannot be empty"):
        validate_key(empty)


def test_key_limit_is_the_formats_u32(monkeypatch):
    # The official engine accepts keys above u16::MAX (65536 B, 1 MiB, 16 MiB all work).
    assert MAX_KEY_SIZE_BYTES == 2**32 - 1
    assert validate_key(b"k" * 65536) == b"k" * 65536
    monkeypatch.setattr(batch_mod, "MAX_KEY_SIZE_BYTES", 4)
    assert validate_key(b"kkkk") == b"kkkk"
    with pytest.raises(InvalidArgumentError, match="key is 5 bytes, above the limit of 4 bytes"):
        validate_key(b"kkkkk")


def test_value_limits(monkeypatch):
    assert validate_value(b"") == b""
    assert validate_value(bytearray(b"v")) == b"v"
    with pytest.raises(InvalidArgumentError, match="value must be bytes"):
        validate_value("v")
    monkeypatch.setattr(batch_mod, "MAX_VALUE_SIZE_BYTES", 3)
    with pytest.raises(InvalidArgumentError, match="value is 4 bytes, above the limit of 3"):
        validate_value(b"vvvv")


def test_batch_records_ops_in_order():
    b = WriteBatch()
    assert not b and len(b) == 0
    b.put(b"a", b"1")
    b.delete(bytearray(b"b"))
    b.put(b"c", b"3", ttl_s=2)
    ops = b.ops
    assert [(o.kind, o.key, o.value, o.ttl_s) for o in ops] == [
        (OpKind.PUT, b"a", b"1", None),
        (OpKind.DELETE, b"b", b"", None),
        (OpKind.PUT, b"c", b"3", 2.0),
    ]
    assert list(b) == list(ops)
    assert b.size_bytes == 2 + 1 + 2
    b.clear()
    assert len(b) == 0 and b.size_bytes == 0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda b: b.put(b"", b"v"), "key cannot be empty"),
        (lambda b: b.put("k", b"v"), "key must be bytes"),
        (lambda b: b.put(b"k", "v"), "value must be bytes"),
        (lambda b: b.put(b"k", b"v", ttl_s=0), "ttl must be positive"),
        (lambda b: b.put(b"k", b"v", ttl_s=-1), "ttl must be positive"),
        (lambda b: b.put(b"k", b"v", ttl_s=math.nan), "ttl must be positive"),
        (lambda b: b.put(b"k", b"v", ttl_s="1s"), "ttl must be a number"),
        (lambda b: b.put(b"k", b"v", ttl_s=True), "ttl must be a number"),
        (lambda b: b.delete(b""), "key cannot be empty"),
        (lambda b: b.merge(b"", b"+1"), "key cannot be empty"),
        (lambda b: b.merge(b"k", "+1"), "value must be bytes"),
        (lambda b: b.merge(b"k", b"+1", ttl_s=0), "ttl must be positive"),
    ],
)
def test_rejected_call_leaves_batch_unchanged(call, match):
    b = WriteBatch()
    b.put(b"x", b"y")
    before = (b.ops, b.size_bytes)
    with pytest.raises(InvalidArgumentError, match=match):
        call(b)
    assert (b.ops, b.size_bytes) == before


def test_expire_ts_ms():
    assert expire_ts_ms(1000, None, None) is None
    assert expire_ts_ms(1000, None, 500) == 1500
    assert expire_ts_ms(1000, NO_EXPIRY, 500) is None
    assert expire_ts_ms(1000, 2.5, 500) == 3500
    b = WriteBatch()
    b.put(b"k", b"v", ttl_s=NO_EXPIRY)
    assert b.ops[0].ttl_s == math.inf


def test_a_ttl_below_a_millisecond_lives_one_millisecond(tmp_path) -> None:
    """Rows expire in whole milliseconds: a positive ``ttl`` under half a millisecond rounded
    to 0 and wrote a row already expired (``expire_ts <= now``: never readable); it now lives
    one millisecond."""
    import slatedb

    assert expire_ts_ms(1000, 0.0004, None) == 1001
    assert expire_ts_ms(1000, 1e-9, None) == 1001
    assert expire_ts_ms(1000, 0.0006, None) == 1001
    with slatedb.Db.open(f"file://{tmp_path}", {"compactor_options": None}) as db:
        db.put(b"k", b"v", ttl=0.0001)
        kv = db.get_key_value(b"k")
        assert kv is None or kv.expire_ts > kv.create_ts


def test_a_batch_takes_the_ttl_by_the_name_db_put_uses(tmp_path) -> None:
    """``Db.put(k, v, ttl=...)`` and ``WriteBatch.put(k, v, ttl=...)`` agree (``ttl_s`` was the
    batch's only name: ``ttl=`` raised TypeError); ``ttl_s`` still works; both at once is refused."""
    import slatedb
    from slatedb import InvalidArgumentError, WriteBatch

    b = WriteBatch()
    b.put(b"a", b"1", ttl=60)
    b.put(b"b", b"2", 60)
    b.put(b"c", b"3", ttl_s=60)
    b.merge(b"d", b"4", ttl=60)
    assert [op[3] for op in b._ops] == [60, 60, 60, 60]
    with pytest.raises(InvalidArgumentError, match="give the TTL once"):
        b.put(b"e", b"5", ttl=1, ttl_s=1)
    with pytest.raises(InvalidArgumentError, match="give the TTL once"):
        b.merge(b"e", b"5", ttl=1, ttl_s=1)
    assert len(b._ops) == 4
    with slatedb.Db.open(f"file://{tmp_path}", {"compactor_options": None}) as db:
        w = WriteBatch()
        w.put(b"k", b"v", ttl=3600)
        db.write(w)
        assert db.get_key_value(b"k").expire_ts is not None


def test_a_written_batch_is_consumed(tmp_path) -> None:
    """A batch written once and written again wrote its rows twice (seqs 1 then 2, a merge
    operand applied twice); as the official binding (``Error.Invalid("write batch has already
    been consumed")``), the second write and any later put/delete/merge raise
    InvalidArgumentError and write nothing; ``clear()`` makes the batch writable again."""
    import slatedb
    from slatedb import InvalidArgumentError, WriteBatch

    with slatedb.Db.open(f"file://{tmp_path}", {"compactor_options": None}) as db:
        b = WriteBatch()
        b.put(b"k", b"v")
        h = db.write(b)
        assert h.seq == 1
        with pytest.raises(InvalidArgumentError, match="write batch has already been consumed"):
            db.write(b)
        for add in (lambda: b.put(b"x", b"1"), lambda: b.delete(b"x"), lambda: b.merge(b"x", b"1")):
            with pytest.raises(InvalidArgumentError, match="already been consumed"):
                add()
        assert len(b) == 1 and db.status().durable_seq <= 1
        assert db.put(b"other", b"o").seq == 2  # the refused write took no seq
        b.clear()
        b.put(b"k2", b"v2")
        assert db.write(b).seq == 3
        assert db.get(b"k2") == b"v2"


def test_a_batch_whose_write_failed_before_applying_is_not_consumed(tmp_path) -> None:
    """Consumed means written: a write refused before it applied a row (a merge without a merge
    operator, a closed database) leaves the batch usable."""
    import slatedb
    from slatedb import ClosedError, MergeOperatorMissingError, WriteBatch

    b = WriteBatch()
    b.merge(b"m", b"1")
    with slatedb.Db.open(f"file://{tmp_path}/a", {"compactor_options": None}) as db:
        with pytest.raises(MergeOperatorMissingError):
            db.write(b)
    p = WriteBatch()
    p.put(b"p", b"2")
    with pytest.raises(ClosedError):
        db.write(p)
    with slatedb.Db.open(f"file://{tmp_path}/b", {"compactor_options": None},
                         merge_operator=lambda k, e, o: (e or b"") + o) as db:
        db.write(b)
        db.write(p)
        assert (db.get(b"m"), db.get(b"p")) == (b"1", b"2")


@pytest.mark.anyloop
async def test_an_async_written_batch_is_consumed(tmp_path) -> None:
    from slatedb import InvalidArgumentError, WriteBatch, aio

    async with aio.Db.open(f"file://{tmp_path}", {"compactor_options": None},
                           merge_operator=lambda k, e, o: (e or b"") + o) as db:
        b = WriteBatch()
        b.merge(b"m", b"x")
        await db.write(b)
        with pytest.raises(InvalidArgumentError, match="already been consumed"):
            await db.write(b)
        assert await db.get(b"m") == b"x"
