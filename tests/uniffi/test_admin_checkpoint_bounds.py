"""slatedb.uniffi Admin checkpoint calls at the ends of their ranges, as the official 0.17 binding
answers them (run side by side against the official wheel, session 20):

- ``lifetime_ms=0`` (``create_detached_checkpoint``, ``refresh_checkpoint``) is accepted: the
  checkpoint expires at once (the official sets its expiry to now); a program releasing a
  checkpoint with ``refresh_checkpoint(id, 0)`` must not get ``Error.Invalid``;
- ``list_checkpoints("")`` lists the unnamed checkpoints (the official compares the name, an
  unnamed checkpoint's being empty), not none.
"""

from __future__ import annotations

import asyncio

import pytest

import slatedb.uniffi as u


async def _admin(root: str):
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("compactor_options", "null")
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    db = await b.build()
    await db.put(b"k", b"v")
    await db.flush()
    await db.shutdown()
    return u.AdminBuilder("db", store).build()


def test_lifetime_zero_is_accepted_and_expires_at_once(tmp_path) -> None:
    async def main() -> None:
        admin = await _admin(str(tmp_path))
        made = await admin.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=0, source=None, name="now"))
        keep = await admin.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=None, source=None, name=None))
        await admin.refresh_checkpoint(keep.id, 0)
        got = {c.id: c for c in await admin.list_checkpoints(None)}
        for cid in (made.id, keep.id):
            c = got[cid]
            assert c.expire_time_secs is not None, "lifetime 0 is an expiry now, not never"
            assert c.create_time_secs <= c.expire_time_secs <= c.create_time_secs + 2

    asyncio.run(main())


def test_an_empty_name_filter_lists_the_unnamed_checkpoints(tmp_path) -> None:
    async def main() -> None:
        admin = await _admin(str(tmp_path))
        named = await admin.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=None, source=None, name="n"))
        unnamed = await admin.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=None, source=None, name=None))
        assert [c.id for c in await admin.list_checkpoints("")] == [unnamed.id]
        assert [c.id for c in await admin.list_checkpoints("n")] == [named.id]
        assert {c.id for c in await admin.list_checkpoints(None)} == {named.id, unnamed.id}

    asyncio.run(main())


def test_a_timestamp_past_the_official_date_range_is_invalid(tmp_path) -> None:
    """``get_sequence_for_timestamp`` takes Unix seconds the official turns into a chrono date:
    outside [-8334601228800, 8210266876799] (years -262143..262142) it answers ``Error.Invalid``
    ("invalid timestamp seconds"), found by bisection against the official wheel; here such a
    timestamp was looked up and answered."""
    async def main() -> None:
        admin = await _admin(str(tmp_path))
        for ok in (-8334601228800, 0, 8210266876799):
            await admin.get_sequence_for_timestamp(ok, False)
        for bad in (-8334601228801, 8210266876800, 2**62):
            with pytest.raises(u.Error.Invalid, match="invalid timestamp seconds"):
                await admin.get_sequence_for_timestamp(bad, True)

    asyncio.run(main())
