"""slatedb/manifest/store.py paths no other check runs (``sim mutate``: their mutants survived
unrun): a boundary file that holds no u64, ``read_boundary``, and ``listed_ids`` when another
thread starts the name table again between its fill and its lookup."""

from __future__ import annotations

import pytest

from slatedb.errors import CorruptionError
from slatedb.format.layout import MANIFEST_DIR, MANIFEST_SUFFIX
from slatedb.manifest import store as ms
from slatedb.objstore.base import ObjectMeta
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store

KEY = "gc/manifest.boundary"


async def test_read_boundary_is_the_stored_value_or_0_and_a_file_without_a_u64_is_corrupt() -> None:
    store, rt = memory_store(), ProductionRuntime()
    assert await ms.read_boundary(store, rt, KEY) == 0
    store.put_now(KEY, b"12345\n")
    assert await ms.read_boundary(store, rt, KEY) == 12345
    text = "x" * 39 + "yz" + "w" * 20  # the message quotes the first 40 characters
    for bad in (text, str(2**64)):
        store.put_now(KEY, bad.encode())
        with pytest.raises(CorruptionError) as info:
            await ms.read_boundary(store, rt, KEY)
        assert info.value.object_name == KEY and info.value.offset == 0
        assert info.value.reason == f"boundary file does not hold a decimal u64: {bad[:40]!r}"
    store.put_now(KEY, str(2**64 - 1).encode())
    assert await ms.read_boundary(store, rt, KEY) == 2**64 - 1


class StartedAgainMeanwhile(dict):
    """A name table that another thread clears right after this one added the new names."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.cleared = 0

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.armed = True

    def __getitem__(self, key):
        if self.armed:
            self.armed = False
            self.cleared += 1
            self.clear()
        return super().__getitem__(key)


def test_listed_ids_parse_the_names_when_the_table_is_started_again_meanwhile(monkeypatch) -> None:
    names = [f"manifest/{i:020d}.manifest" for i in (7, 3, 12)] + ["manifest/tmp", "manifest/1.manifest"]
    table = StartedAgainMeanwhile()
    monkeypatch.setitem(ms._LISTED, (MANIFEST_DIR, MANIFEST_SUFFIX), table)
    metas = [ObjectMeta(n, 1, 0, '"e"') for n in names]
    assert ms._listed_ids(metas, MANIFEST_DIR, MANIFEST_SUFFIX) == [3, 7, 12]
    assert table.cleared == 1
