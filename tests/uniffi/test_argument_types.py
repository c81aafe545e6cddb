"""``slatedb.uniffi``: an argument of the wrong type where bytes go (a key, a value, an operand,
a prefix, a ``KeyRange`` bound, the keys of ``mark_read`` / ``unmark_write``) raises a plain
``TypeError`` at the call, as the official binding's generated checks do (probed on the 0.17
wheel) -- in every class, not ``Error.Invalid`` from the calls whose conversion ran inside the
layer's error translation. Nothing is written."""

from __future__ import annotations

import asyncio

import pytest

import slatedb.uniffi as u


def _kr(start=None, end=None):
    return u.KeyRange(start=start, start_inclusive=True, end=end, end_inclusive=False)


def test_wrong_byte_argument_types_raise_type_error(tmp_path):
    async def main():
        store = u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()
        db = await u.DbBuilder("db", store).build()
        await db.put(b"a", b"1")
        txn = await db.begin(u.IsolationLevel.SNAPSHOT)
        wb = u.WriteBatch()
        calls = {
            "db.put value": lambda: db.put(b"a", "1"),
            "db.scan str bounds": lambda: db.scan(_kr("a", "b")),
            "db.scan_prefix str": lambda: db.scan_prefix("a", _kr()),
            "snapshot.scan str bound": None,
            "txn.put key": lambda: txn.put("a", b"1"),
            "txn.put value": lambda: txn.put(b"a", "1"),
            "txn.delete": lambda: txn.delete(5),
            "txn.get": lambda: txn.get(None),
            "txn.get_key_value": lambda: txn.get_key_value("a"),
            "txn.scan str bound": lambda: txn.scan(_kr(None, "b")),
            "txn.scan_prefix str": lambda: txn.scan_prefix("a", _kr()),
            "txn.mark_read str": lambda: txn.mark_read("abc"),
            "txn.mark_read None": lambda: txn.mark_read(None),
            "txn.unmark_write strs": lambda: txn.unmark_write(["a"]),
        }
        snap = await db.snapshot()
        calls["snapshot.scan str bound"] = lambda: snap.scan(_kr("a"))
        for what, call in calls.items():
            with pytest.raises(TypeError) as info:
                await call()
            assert type(info.value) is TypeError, (what, info.value)
        for what, call in {
            "batch.put key": lambda: wb.put("x", b"1"),
            "batch.put value": lambda: wb.put(b"x", "1"),
            "batch.put None": lambda: wb.put(None, b"1"),
            "batch.delete": lambda: wb.delete(5),
            "batch.merge": lambda: wb.merge("x", b"1"),
            "batch.put_with_options": lambda: wb.put_with_options("x", b"1", u.PutOptions(ttl=u.Ttl.DEFAULT())),
        }.items():
            with pytest.raises(TypeError) as info:
                call()
            assert type(info.value) is TypeError, (what, info.value)
        await txn.rollback()
        assert await db.get(b"x") is None
        await db.shutdown()

    asyncio.run(main())


def test_next_batch_checks_its_size_as_the_official_u32(tmp_path):
    """``DbIterator.next_batch(n)``: a non-integer is a ``TypeError`` and an int outside u32 a
    ``ValueError``, as the official's generated checks raise (probed on the 0.17 wheel); before,
    both were ``Error.Invalid``, and ``2**32`` or more was taken. The iterator loses no row."""
    async def main():
        db = await u.DbBuilder("db", u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()).build()
        for k in (b"a", b"b", b"c"):
            await db.put(k, k)
        it = await db.scan(_kr())
        assert [kv.key for kv in await it.next_batch(1)] == [b"a"]
        for bad, error in (("2", TypeError), (None, TypeError), (1.5, TypeError), (-1, ValueError),
                           (2**32, ValueError), (2**64, ValueError)):
            with pytest.raises(error) as info:
                await it.next_batch(bad)
            assert type(info.value) is error, (bad, info.value)
        with pytest.raises(u.Error.Invalid):
            await it.next_batch(True)  # the official takes it as 1; a flag is no count
        assert [kv.key for kv in await it.next_batch(2**32 - 1)] == [b"b", b"c"]
        await db.shutdown()

    asyncio.run(main())


def test_integer_and_enum_fields_of_options_are_checked_as_the_official_lowers_them(tmp_path):
    """A TTL's milliseconds, ``WriteOptions.seqnum``, ``ScanOptions.read_ahead_bytes`` /
    ``max_fetch_tasks``: a non-integer is a ``TypeError``, an int outside the field's type
    (u64; i64 for ``EXPIRE_AT_MILLIS``) a ``ValueError``; a ``durability_filter`` or ``order``
    that is not the enum a ``ValueError`` -- as the official's generated checks raise (probed on
    the 0.17 wheel), where all were ``Error.Invalid`` here. Nothing is written."""
    async def main():
        db = await u.DbBuilder("db", u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()).build()
        w = u.WriteOptions(seqnum=0)

        def put(ttl, write=w):
            return db.put_with_options(b"k", b"v", u.PutOptions(ttl=ttl), write)

        def scan(**fields):
            o = dict(durability_filter=u.DurabilityLevel.MEMORY, dirty=False, read_ahead_bytes=1, cache_blocks=True,
                     max_fetch_tasks=1, order=u.IterationOrder.ASCENDING)
            o.update(fields)
            return db.scan_with_options(_kr(), u.ScanOptions(**o))

        calls = [
            (lambda: put(u.Ttl.EXPIRE_AFTER_MILLIS("5")), TypeError),
            (lambda: put(u.Ttl.EXPIRE_AFTER_MILLIS(-1)), ValueError),
            (lambda: put(u.Ttl.EXPIRE_AFTER_MILLIS(2**64)), ValueError),
            (lambda: put(u.Ttl.EXPIRE_AT_MILLIS(1.5)), TypeError),
            (lambda: put(u.Ttl.EXPIRE_AT_MILLIS(2**63)), ValueError),
            (lambda: put(u.Ttl.DEFAULT(), u.WriteOptions(seqnum="0")), TypeError),
            (lambda: put(u.Ttl.DEFAULT(), u.WriteOptions(seqnum=-1)), ValueError),
            (lambda: scan(read_ahead_bytes=-1), ValueError),
            (lambda: scan(max_fetch_tasks="1"), TypeError),
            (lambda: scan(order="descending"), ValueError),
            (lambda: scan(durability_filter="memory"), ValueError),
            (lambda: db.get_with_options(b"k", u.ReadOptions(durability_filter="remote", dirty=False,
                                                             cache_blocks=True)), ValueError),
        ]
        for i, (call, error) in enumerate(calls):
            with pytest.raises(error) as info:
                await call()
            assert type(info.value) is error, (i, info.value)
        with pytest.raises(u.Error.Invalid, match="seqnum='1'|seqnum=1"):
            await put(u.Ttl.DEFAULT(), u.WriteOptions(seqnum=1))  # refused: the writer assigns seqs
        assert await db.get(b"k") is None
        await db.shutdown()

    asyncio.run(main())


def test_reader_options_fields_are_checked_as_the_official_lowers_them(tmp_path):
    """``DbReaderBuilder.with_options(ReaderOptions(...))``: a millisecond or byte field that is
    not an integer is a ``TypeError`` (it was ``Error.Invalid`` with Python's own "unsupported
    operand type(s) for /" message), an int outside u64 a ``ValueError``, and a
    ``skip_wal_replay`` that is not a bool (``None``, which the official refuses) a ``TypeError``."""
    store = u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()
    base = dict(manifest_poll_interval_ms=10_000, checkpoint_lifetime_ms=600_000, max_memtable_bytes=64 << 20,
                skip_wal_replay=False)
    for change, error in ((dict(manifest_poll_interval_ms="5"), TypeError), (dict(max_memtable_bytes=1.5), TypeError),
                          (dict(manifest_poll_interval_ms=-1), ValueError), (dict(checkpoint_lifetime_ms=2**64), ValueError),
                          (dict(skip_wal_replay=None), TypeError)):
        b = u.DbReaderBuilder("db", store)
        with pytest.raises(error) as info:
            b.with_options(u.ReaderOptions(**{**base, **change}))
        assert type(info.value) is error, (change, info.value)


def test_enum_and_wal_id_arguments_are_checked_as_the_official_lowers_them(tmp_path):
    """``begin``'s isolation level, ``FlushOptions`` / ``CloseOptions``' flush type that are not
    the enum: ``ValueError`` (``begin`` raised ``TypeError``, the options ``Error.Invalid``); the
    WAL reader's ids: ``TypeError`` for a non-integer (``last_wal_file_id("1")`` failed on an
    internal comparison) and ``ValueError`` outside u64 (``last_wal_file_id(-1)`` and
    ``iterator(2**64)`` were taken) -- as the official's generated checks raise (probed)."""
    async def main():
        store = u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()
        db = await u.DbBuilder("db", store).build()
        await db.put(b"a", b"1")
        await db.flush()
        w = u.SlateDbWalReader("db", store)
        calls = [
            (lambda: db.begin("SNAPSHOT"), ValueError),
            (lambda: db.flush_with_options(u.FlushOptions(flush_type="WAL")), ValueError),
            (lambda: db.shutdown_with_options(u.CloseOptions(flush_type="x")), ValueError),
            (lambda: w.last_wal_file_id("1"), TypeError),
            (lambda: w.last_wal_file_id(-1), ValueError),
            (lambda: w.iterator("1"), TypeError),
            (lambda: w.iterator(2**64), ValueError),
        ]
        for i, (call, error) in enumerate(calls):
            with pytest.raises(error) as info:
                await call()
            assert type(info.value) is error, (i, info.value)
        assert await db.get(b"a") == b"1"  # the refused shutdown left the database open
        await db.shutdown()

    asyncio.run(main())
