"""Merge operators: operands folded across the memtable, L0, snapshots, batches and transactions;
a merge without an operator and a failing operator."""
import asyncio, json, sys

import slatedb.uniffi as u


class Concat(u.MergeOperator):
    """Associative (the official engine folds operands in partial merges, in varying groupings)."""

    def merge(self, key, existing_value, operand):
        return (existing_value or b"") + operand


class Failing(u.MergeOperator):
    def merge(self, key, existing_value, operand):
        if operand == b"bad":
            raise u.MergeOperatorCallbackError.Failed("refusing bad operand")
        return operand


def kr():
    return u.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    b = u.DbBuilder("db", store)
    b.with_merge_operator(Concat())
    db = await b.build()
    await db.put(b"k", b"base")
    await db.merge(b"k", b"a")
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
    snap = await db.snapshot()
    await db.merge(b"k", b"b")
    await db.merge_with_options(b"fresh", b"x", u.MergeOptions(ttl=u.Ttl.NO_EXPIRY()), u.WriteOptions())
    wb = u.WriteBatch()
    wb.merge(b"k", b"c")
    wb.merge_with_options(b"fresh", b"y", u.MergeOptions(ttl=u.Ttl.DEFAULT()))
    await db.write(wb)
    out["get"] = [(await db.get(b"k")).decode(), (await db.get(b"fresh")).decode()]
    out["snapshot"] = (await snap.get(b"k")).decode()
    it = await db.scan(kr())
    out["scan"] = [[kv.key.decode(), kv.value.decode()] for kv in await it.next_batch(10)]
    t = await db.begin(u.IsolationLevel.SNAPSHOT)
    await t.merge(b"k", b"t")
    out["txn_read"] = (await t.get(b"k")).decode()
    # a transaction's own operand on a snapshot row: not yet written (seq u64::MAX), the row's
    # timestamps kept (create_ts and the TTL'd expire_ts of "ttl"), a pending TTL not shown
    await db.put_with_options(b"ttl", b"base", u.PutOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(60000)), u.WriteOptions())
    t2 = await db.begin(u.IsolationLevel.SNAPSHOT)
    base = await t2.get_key_value(b"ttl")
    await t2.merge(b"ttl", b"m")
    await t2.merge_with_options(b"fresh", b"m", u.MergeOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(30000)))
    await t2.merge(b"none", b"z")
    kvs = [await t2.get_key_value(k) for k in (b"ttl", b"fresh", b"none")]
    out["txn_key_value"] = [[kv.value.decode(), kv.seq == 2**64 - 1, kv.create_ts == (base.create_ts if i == 0 else kv.create_ts),
                             kv.create_ts > 0, None if kv.expire_ts is None else kv.expire_ts - kv.create_ts]
                            for i, kv in enumerate(kvs)]
    await t2.rollback()
    await t.commit()
    await db.delete(b"k")
    await db.merge(b"k", b"after_delete")
    out["after_delete"] = (await db.get(b"k")).decode()
    await db.shutdown()

    b = u.DbBuilder("db", store)
    b.with_merge_operator(Concat())
    db = await b.build()
    out["reopened"] = [(await db.get(b"k")).decode(), (await db.get(b"fresh")).decode()]
    await db.merge(b"k", b"r")
    await db.flush()
    rb = u.DbReaderBuilder("db", store)
    rb.with_merge_operator(Concat())
    reader = await rb.build()
    out["reader"] = [(await reader.get(b"k")).decode(), (await reader.get(b"fresh")).decode()]
    await reader.shutdown()
    await db.shutdown()

    db = await u.DbBuilder("plain", store).build()
    try:
        await db.merge(b"k", b"x")
        out["no_operator"] = "accepted"
    except u.Error as e:
        out["no_operator"] = type(e).__qualname__
    await db.shutdown()

    try:
        u.DbBuilder("other", store).with_merge_operator(object())
    except TypeError:
        out["duck_typed_operator"] = "TypeError"

    b = u.DbBuilder("failing", store)
    b.with_merge_operator(Failing())
    db = await b.build()
    await db.put(b"f", b"base")
    try:
        await db.merge(b"f", b"bad")
        out["failing_merge"] = "accepted"
    except u.Error as e:
        out["failing_merge"] = type(e).__qualname__
    wb = u.WriteBatch()
    wb.put(b"in_batch", b"1")
    wb.merge(b"f", b"bad")
    try:
        await db.write(wb)
        out["failing_batch"] = "accepted"
    except u.Error as e:
        out["failing_batch"] = type(e).__qualname__
    out["nothing_written"] = [(await db.get(b"f")).decode(), await db.get(b"in_batch")]
    await db.merge(b"f", b"good")
    out["good_merge"] = (await db.get(b"f")).decode()
    await db.shutdown()
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
