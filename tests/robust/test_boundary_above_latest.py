"""Issue 16 item 2: a GC boundary above the latest id is corruption, found in O(1).

GC only ever moves ``gc/<ns>.boundary`` to an id below the latest file it listed, and never
deletes the latest file, so at any time the boundary is below the highest id that exists
(spec/protocols/sequenced-metadata.md, "Corrupt boundary rule"). A boundary at or above every file is
therefore corrupt: a writer whose create lands behind it lists again, and raises
:class:`CorruptionError` naming the boundary file instead of climbing one id per round to it
(``999`` wrote ~1,000 manifests, ``1000000000`` never ended).
"""

from __future__ import annotations

import pytest
import trio

import slatedb.aio
from slatedb.compactor.store import CompactionsStore
from slatedb.errors import CorruptionError
from slatedb.format.types import CompactionsV1
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime

SETTINGS = {"compactor_options": None, "garbage_collector_options": None}


def _store() -> MemoryStore:
    return MemoryStore(MemoryBucket(), ProductionRuntime().now_ms, url="memory://boundary")


def _ids(store: MemoryStore, ns: str) -> list[int]:
    return [int(m.key.split("/")[1].split(".")[0]) for m in store.list_now(f"{ns}/")]


@pytest.mark.parametrize("boundary", [999, 1_000_000_000, 2**64 - 1])
async def test_manifest_boundary_above_latest_is_corruption_on_open(boundary: int) -> None:
    store = _store()
    async with slatedb.aio.Db.open("memory://boundary", SETTINGS, store=store) as db:
        await db.put(b"k", b"v", durable=True)
    before = max(_ids(store, "manifest"))
    store.put_now("gc/manifest.boundary", str(boundary).encode())
    with trio.fail_after(10):
        with pytest.raises(CorruptionError) as err:
            async with slatedb.aio.Db.open("memory://boundary", SETTINGS, store=store):
                pass
    assert err.value.object_name == "gc/manifest.boundary"
    assert str(boundary) in str(err.value) and f"manifest {before + 1}" in str(err.value)
    assert max(_ids(store, "manifest")) <= before + 1  # O(1): at most the one create that found it


async def test_a_boundary_without_manifests_is_refused_or_skipped_with_force() -> None:
    """No manifest but a boundary file: not a new database (item 3's refusal names the file);
    ``create="force"`` starts the new database above the boundary, in O(1)."""
    from slatedb.errors import ManifestsMissingError

    store = _store()
    store.put_now("gc/manifest.boundary", b"1000000000")
    with trio.fail_after(10):
        with pytest.raises(ManifestsMissingError, match="gc/manifest.boundary"):
            async with slatedb.aio.Db.open("memory://boundary", SETTINGS, store=store):
                pass
        async with slatedb.aio.Db.open("memory://boundary", SETTINGS, store=store, create="force") as db:
            await db.put(b"k", b"v", durable=True)
    assert min(_ids(store, "manifest")) == 1_000_000_001 and len(_ids(store, "manifest")) <= 4


async def test_compactions_boundary_above_latest_is_corruption() -> None:
    store = _store()
    cs = CompactionsStore(store, ProductionRuntime("compactor"))
    await cs.try_write(1, CompactionsV1(0, ()))
    await cs.try_write(2, CompactionsV1(0, ()))
    store.put_now("gc/compactions.boundary", b"1000000000")
    with trio.fail_after(10):
        with pytest.raises(CorruptionError) as err:
            await cs.try_write(3, CompactionsV1(0, ()))
    assert err.value.object_name == "gc/compactions.boundary"
    assert "1000000000" in str(err.value)
    assert _ids(store, "compactions") == [1, 2, 3]


async def test_a_boundary_below_the_latest_still_means_not_committed() -> None:
    """The legitimate case (RFC 004's stalled writer): a create behind a boundary that is below
    the latest file is "not committed", not corruption."""
    from slatedb.errors import ObjectVersionBehindBoundaryError

    store = _store()
    cs = CompactionsStore(store, ProductionRuntime("compactor"))
    for i in (1, 2, 3):
        await cs.try_write(i, CompactionsV1(0, ()))
    store.put_now("gc/compactions.boundary", b"2")
    store.delete_now("compactions/00000000000000000002.compactions")
    with pytest.raises(ObjectVersionBehindBoundaryError):
        await cs.try_write(2, CompactionsV1(0, ()))
