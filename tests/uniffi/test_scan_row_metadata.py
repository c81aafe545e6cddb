"""``slatedb.uniffi``: a scanned row's metadata is the row a point read reports. For a key whose
newest row is a merge operand, that is the folded row (MERGE-1: the earliest expiry of its
parts): a put with a TTL followed by a merge without one expires with the put, and a scan says
so as ``get_key_value`` does (and as the official 0.17 wheel's scan does, probed), in memory and
after an L0 flush, on the database and on a snapshot."""

from __future__ import annotations

import asyncio

import slatedb.uniffi as u


class _Concat(u.MergeOperator):
    def merge(self, key, existing_value, operand):
        return (existing_value or b"") + operand


def _all():
    return u.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)


async def _scanned(reads):
    it = await reads.scan(_all())
    out = {}
    while (kv := await it.next()) is not None:
        out[kv.key] = (kv.value, kv.seq, kv.expire_ts)
    return out


async def _read(reads, keys):
    out = {}
    for k in keys:
        kv = await reads.get_key_value(k)
        out[k] = (kv.value, kv.seq, kv.expire_ts)
    return out


def test_a_scanned_merged_row_carries_the_folded_metadata(tmp_path):
    async def main():
        b = u.DbBuilder("db", u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build())
        b.with_merge_operator(_Concat())
        db = await b.build()
        w = u.WriteOptions(seqnum=0)
        await db.put_with_options(b"k1", b"base", u.PutOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(100_000)), w)
        await db.merge(b"k1", b"+op")  # no TTL of its own: the fold expires with the base
        await db.put(b"k2", b"base")
        await db.merge_with_options(b"k2", b"+op", u.MergeOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(100_000)), w)
        keys = [b"k1", b"k2"]
        for _ in range(2):
            got = await _scanned(db)
            assert got == await _read(db, keys)
            assert got[b"k1"][0] == b"base+op" and got[b"k1"][2] is not None
            snap = await db.snapshot()
            assert await _scanned(snap) == got
            await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
        await db.shutdown()

    asyncio.run(main())
