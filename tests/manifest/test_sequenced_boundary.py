"""SequencedStore.advance_boundary's edges (slatedb/manifest/store.py, RFC 004 "Advancing
Boundaries"): the whole u64 range is accepted, 0 included, and an advance never lowers."""

from __future__ import annotations

import pytest
import trio

from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


def test_advance_to_zero_is_a_no_op_and_advances_never_lower() -> None:
    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())

    async def main():
        assert await ms.advance_boundary(0) == 0  # a fresh database's boundary: nothing written
        assert not store.list_now("manifest/")
        assert await ms.advance_boundary(7) == 7
        assert await ms.advance_boundary(3) == 7
        assert await ms.advance_boundary(2**64 - 1) == 2**64 - 1

    trio.run(main)
    with pytest.raises(AssertionError):
        trio.run(ms.advance_boundary, 2**64)
