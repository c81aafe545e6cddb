"""slatedb.uniffi Admin.delete_db beyond what the official-style program compares
(tests/interop/uniffi_programs/delete_db.py): a database with a live checkpoint is refused with
Error.Invalid and keeps every object (DESTROY-1; the official deletes it under its holder), and
``confirm`` must be a bool."""

from __future__ import annotations

import asyncio
import os

import pytest

import slatedb.uniffi as u


def _files(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_a_database_with_a_live_checkpoint_is_refused_and_kept(tmp_path) -> None:
    root = str(tmp_path)

    async def main() -> None:
        store = u.ObjectStoreBuilder.from_url("file://" + root).build()
        s = u.Settings.default()
        s.set("compactor_options", "null")
        b = u.DbBuilder("db", store)
        b.with_settings(s)
        db = await b.build()
        await db.put(b"k", b"v")
        await db.flush()
        await db.shutdown()
        admin = u.AdminBuilder("db", store).build()
        await admin.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=None, source=None, name="keep"))
        before = _files(os.path.join(root, "db"))
        with pytest.raises(u.Error.Invalid, match="active checkpoint"):
            await admin.delete_db(True)
        assert _files(os.path.join(root, "db")) == before
        with pytest.raises(TypeError, match="confirm must be a bool"):
            await admin.delete_db("yes")

    asyncio.run(main())


def test_a_database_stored_below_the_path_is_neither_named_nor_deleted(tmp_path) -> None:
    """DESTROY-8: delete_db of ``db`` names and deletes ``db``'s objects only; ``db/sub`` (another
    database) keeps its rows (the official deletes every object under the path)."""
    root = str(tmp_path)

    async def main() -> None:
        store = u.ObjectStoreBuilder.from_url("file://" + root).build()
        s = u.Settings.default()
        s.set("compactor_options", "null")
        for name in ("db", "db/sub"):
            b = u.DbBuilder(name, store)
            b.with_settings(s)
            db = await b.build()
            await db.put(b"k", name.encode())
            await db.flush()
            await db.shutdown()
        deleted = await u.AdminBuilder("db", store).build().delete_db(True)
        assert deleted and not any(p.startswith("db/sub/") for p in deleted), deleted
        assert all(f.startswith("sub/") for f in _files(os.path.join(root, "db"))), _files(os.path.join(root, "db"))
        b = u.DbBuilder("db/sub", store)
        b.with_settings(s)
        db = await b.build()
        assert await db.get(b"k") == b"db/sub"
        await db.shutdown()

    asyncio.run(main())
