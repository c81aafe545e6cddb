"""SequencedStore.advance_boundary's edges (slatedb/manifest/store.py, RFC 004 "Advancing
Boundaries"): the whole u64 range is accepted, 0 included, and an advance never lowers."""

from __future__ import annotations

import pytest
import trio

from slatedb.errors import CorruptionError
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


@pytest.mark.parametrize("text, value", [(b"0", 0), (b"7\n", 7), (b"18446744073709551615", 2**64 - 1),
                                         (b"18446744073709551616", None), (b"36893488147419103231", None),
                                         (b"-1", None), (b"", None), (b"12a", None)])
def test_a_boundary_file_holds_a_decimal_u64_or_is_corrupt(text: bytes, value: int | None) -> None:
    """``read_boundary_versioned``: the file's decimal text (whitespace around it allowed) is
    the boundary when it is a u64; 2**64 and above, or anything not a plain decimal, is
    :class:`CorruptionError` naming the file (`sim mutate` seed 24 made the bound ``2** 65``)."""
    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())
    store.put_now(ms.boundary_key, text)
    if value is None:
        with pytest.raises(CorruptionError) as e:
            trio.run(ms.read_boundary)
        assert e.value.object_name == ms.boundary_key and "decimal u64" in e.value.reason
    else:
        got, etag = trio.run(ms.read_boundary)
        assert got == value and etag is not None
        if value < 2**64 - 1:
            assert trio.run(ms.advance_boundary, value + 1) == value + 1
