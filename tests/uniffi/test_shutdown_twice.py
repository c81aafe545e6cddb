"""``slatedb.uniffi``: a second ``shutdown()`` (or ``shutdown_with_options``) of a database shut
down cleanly raises ``Error.Closed(CloseReason.CLEAN, "Closed error: db is closed")``, as the
official binding's does; a fenced database's shutdowns and a reader's stay quiet, as there.
Found comparing boundary calls on both engines: ours returned None the second time
(tests/interop/uniffi_programs/basic.py runs the same on the official wheel)."""

from __future__ import annotations

import asyncio

import slatedb.uniffi as u


def test_a_second_shutdown_of_a_cleanly_shut_database_is_closed_clean(tmp_path) -> None:
    async def main() -> list:
        store = u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()
        db = await u.DbBuilder("db", store).build()
        await db.put(b"k", b"v")
        await db.shutdown()
        got = []
        for again in (db.shutdown, lambda: db.shutdown_with_options(u.CloseOptions(flush_type=None))):
            try:
                await again()
                got.append("ok")
            except u.Error.Closed as e:
                got.append((e.reason, e.message))
        old = await u.DbBuilder("db", store).build()
        new = await u.DbBuilder("db", store).build()
        try:
            await old.put(b"x", b"y")
            await old.flush()  # fenced by new
        except u.Error.Closed as e:
            assert e.reason is u.CloseReason.FENCED
        await old.shutdown()  # a fenced database's shutdowns: quiet, both times
        await old.shutdown()
        reader = await u.DbReaderBuilder("db", store).build()
        await reader.shutdown()
        await reader.shutdown()
        await new.shutdown()
        return got

    assert asyncio.run(main()) == [(u.CloseReason.CLEAN, "Closed error: db is closed")] * 2
