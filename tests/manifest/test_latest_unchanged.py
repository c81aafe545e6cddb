"""``SequencedStore.read_latest``: a poll that lists the latest file unchanged (the same id and
ETag as the one this store last read) returns the value read before without a GET; any other
listing reads the file (sequenced-metadata.md step 1, "an unchanged latest file")."""

from __future__ import annotations

import pytest
import trio

from slatedb.compactor.store import CompactionsStore
from slatedb.errors import CorruptionError
from slatedb.format.types import CompactionsV1, ManifestV2
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import ObjectMeta
from slatedb.objstore.memory import MemoryStore
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


class CountingStore:
    """A store that counts the GETs it passes on, and can list objects without an ETag."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.gets: list[str] = []
        self.etags = True

    async def get(self, key, byte_range=None):
        self.gets.append(key)
        return await self.inner.get(key, byte_range)

    async def list(self, prefix=""):
        metas = await self.inner.list(prefix)
        return metas if self.etags else [ObjectMeta(m.key, m.size_bytes, m.last_modified_ms, "") for m in metas]

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _stores() -> tuple[MemoryStore, CountingStore, ManifestStore]:
    inner = memory_store()
    counting = CountingStore(inner)
    return inner, counting, ManifestStore(counting, ProductionRuntime())  # type: ignore[arg-type]


def test_an_unchanged_latest_manifest_is_read_once() -> None:
    inner, counting, ms = _stores()
    writer = ManifestStore(inner, ProductionRuntime())
    trio.run(writer.try_write, 1, ManifestV2(initialized=True, writer_epoch=1))
    first = trio.run(ms.read_latest)
    second = trio.run(ms.read_latest)
    assert first is not None and second == first and second.id == 1
    assert counting.gets == ["manifest/00000000000000000001.manifest"]  # the second poll: a LIST only
    trio.run(writer.try_write, 2, ManifestV2(initialized=True, writer_epoch=2))
    third, ids = trio.run(ms.read_latest_listed)
    assert (third.id, third.manifest.writer_epoch, ids) == (2, 2, [1, 2])
    assert len(counting.gets) == 2  # a new latest file: read


def test_a_latest_file_written_again_under_its_id_is_read_again() -> None:
    """The same id with another ETag is another object (a database destroyed and created again
    at the path, a stale create landing after a delete): its bytes are read, not the old value."""
    inner, counting, ms = _stores()
    writer = ManifestStore(inner, ProductionRuntime())
    trio.run(writer.try_write, 1, ManifestV2(initialized=True, writer_epoch=1))
    assert trio.run(ms.read_latest).manifest.writer_epoch == 1
    inner.delete_now("manifest/00000000000000000001.manifest")
    trio.run(writer.try_write, 1, ManifestV2(initialized=True, writer_epoch=7))
    assert trio.run(ms.read_latest).manifest.writer_epoch == 7
    assert len(counting.gets) == 2


def test_damaged_bytes_written_again_under_the_id_still_raise() -> None:
    """Nothing is remembered of bytes that did not decode, and a latest file put again (a new
    ETag) with damaged bytes raises, though the value read before is still remembered."""
    inner, counting, ms = _stores()
    writer = ManifestStore(inner, ProductionRuntime())
    trio.run(writer.try_write, 1, ManifestV2(initialized=True))
    good = trio.run(ms.read_latest)
    key = "manifest/00000000000000000001.manifest"
    inner.delete_now(key)
    inner.put_now(key, b"\x00" * 16)
    for _ in range(2):
        with pytest.raises(CorruptionError):
            trio.run(ms.read_latest)
    assert counting.gets == [key] * 3 and good is not None


def test_a_listing_without_etags_reads_every_time() -> None:
    inner, counting, ms = _stores()
    counting.etags = False
    trio.run(ManifestStore(inner, ProductionRuntime()).try_write, 1, ManifestV2(initialized=True))
    for _ in range(3):
        assert trio.run(ms.read_latest).id == 1
    assert len(counting.gets) == 3


def test_compactions_polls_read_an_unchanged_file_once() -> None:
    inner = memory_store()
    counting = CountingStore(inner)
    cs = CompactionsStore(counting, ProductionRuntime())  # type: ignore[arg-type]
    trio.run(CompactionsStore(inner, ProductionRuntime()).try_write, 1, CompactionsV1(compactor_epoch=3))
    for _ in range(3):
        assert trio.run(cs.read_latest).compactions.compactor_epoch == 3
    assert counting.gets == ["compactions/00000000000000000001.compactions"]


def test_a_file_this_store_wrote_is_not_read_back() -> None:
    """A commit's own file, listed unchanged, is taken as written (the put's reply carried its
    ETag); another process's store reads it."""
    inner, counting, ms = _stores()
    trio.run(ms.try_write, 1, ManifestV2(initialized=True, writer_epoch=5))
    assert trio.run(ms.read_latest).manifest.writer_epoch == 5
    assert counting.gets == ["gc/manifest.boundary"]  # the create's boundary check, no manifest GET
    other = ManifestStore(CountingStore(inner), ProductionRuntime())  # type: ignore[arg-type]
    assert trio.run(other.read_latest).manifest.writer_epoch == 5
    assert other.store.gets == ["manifest/00000000000000000001.manifest"]
