"""``close()`` after a fatal background error raises nothing, on a ``DbReader`` as on a ``Db``.

Found comparing the two: a writer whose manifest poll met a corrupt manifest stops for good, its
writes raise that error, and ``Db.close()`` then just stops it (docs/db.md: "``close()`` then
just stops it"; the official ``Db.shutdown()`` likewise raises nothing, probed on the 0.17 wheel:
close_reason PANIC, shutdown quiet). A reader stopped the same way raised the error again at
``close()``: deleting its checkpoint re-read the corrupt manifest. Now its close deletes the
checkpoint if the store lets it and raises nothing. The drop-in ``slatedb.uniffi`` reader's
``shutdown()`` raises the stored error, as the official reader's does (probed on the wheel: also
after the manifest was repaired)."""

from __future__ import annotations

import asyncio
import time

import pytest

import slatedb
import slatedb.uniffi as u
from slatedb.errors import CorruptionError
from slatedb.manifest.store import manifest_key

from ..anyloop import sleep
from ..db.helpers import latest_manifest, memory_store
from .helpers import WRITER, checkpoints

#: A reader that polls often: its background round meets the corrupt manifest soon.
POLLING = slatedb.DbReaderOptions(manifest_poll_interval_s=0.02, checkpoint_lifetime_s=3600)

#: How long a test waits for a background poll to meet the corrupt manifest (no speed measured).
GENEROUS_S = 60.0


def _corrupt_next_manifest(store) -> str:
    """Write garbage as the next manifest; its key."""
    key = manifest_key(latest_manifest(store)[0] + 1)
    store.put_now(key, b"\xff" * 64)
    return key


def _wait_until_raises(call) -> BaseException:
    deadline = time.monotonic() + GENEROUS_S
    while time.monotonic() < deadline:
        try:
            call()
        except Exception as e:  # noqa: BLE001 - the fatal error is what we wait for
            return e
        time.sleep(0.01)
    raise AssertionError("the background poll never met the corrupt manifest")


def test_a_reader_stopped_by_a_fatal_error_closes_without_raising_as_a_db_does() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    reader = slatedb.DbReader.open("memory://test", options=POLLING, store=store)
    assert reader.get(b"a") == b"1" and len(checkpoints(store)) == 1
    bad = _corrupt_next_manifest(store)
    assert isinstance(_wait_until_raises(lambda: reader.get(b"a")), CorruptionError)
    reader.close()  # raised the CorruptionError again before
    reader.close()
    store.delete_now(bad)
    # Its checkpoint could not be deleted (the latest manifest was corrupt): it lapses after its
    # lifetime, as a crashed reader's does.
    assert len(checkpoints(store)) == 1

    db = slatedb.Db.open("memory://test", settings={**WRITER, "manifest_poll_interval": "20ms"}, store=store)
    _corrupt_next_manifest(store)
    # Waited for with a flush, which writes nothing: a put that landed before the poll stopped
    # the writer would be a write lost with it, and the close says so (10fcc7a), not quietly.
    assert isinstance(_wait_until_raises(db.flush), CorruptionError)
    db.close()  # the writer stopped the same way: quiet, as before
    db.close()


@pytest.mark.anyloop
async def test_the_async_reader_closes_without_raising_too() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    r = await slatedb.aio.DbReader.open("memory://test", options=POLLING, store=store)
    _corrupt_next_manifest(store)
    for _ in range(int(GENEROUS_S / 0.01)):
        if r.core.error is not None:
            break
        await sleep(0.01)
    assert isinstance(r.core.error, CorruptionError)
    await r.close()


def test_the_drop_in_readers_shutdown_raises_the_stored_error_as_the_officials_does(tmp_path) -> None:
    async def main() -> BaseException | None:
        store = u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()
        db = await u.DbBuilder("db", store).build()
        await db.put(b"a", b"1")
        await db.shutdown()
        rb = u.DbReaderBuilder("db", store)
        rb.with_options(u.ReaderOptions(manifest_poll_interval_ms=20, checkpoint_lifetime_ms=3_600_000,
                                        max_memtable_bytes=64 << 20, skip_wal_replay=False))
        r = await rb.build()  # nothing changes after it: it writes no manifest while it polls
        manifests = tmp_path / "db" / "manifest"
        newest = max(int(p.name.split(".")[0]) for p in manifests.iterdir())
        bad = manifests / f"{newest + 1:020d}.manifest"
        bad.write_bytes(b"\xff" * 64)
        for _ in range(int(GENEROUS_S / 0.01)):
            try:
                await r.get(b"a")
            except u.Error:
                break
            await asyncio.sleep(0.01)
        bad.unlink()  # the store is sound again: what shutdown raises is the stored error
        try:
            await r.shutdown()
        except u.Error as e:
            return e
        return None

    assert isinstance(asyncio.run(main()), u.Error)
