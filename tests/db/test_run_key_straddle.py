"""A sorted run whose SSTs split one key's versions (the official compactor cuts an output SST
after any row, not only between keys): reads find the key's versions in both SSTs."""

from __future__ import annotations

import slatedb
from slatedb.format.manifest import encode_manifest
from slatedb.format.types import CompactedSsTableView, ManifestV2, SortedRunV2
from slatedb.manifest.store import manifest_key
from slatedb.row import Row, RowKind

from ..compactor.test_executor import put_sst
from .helpers import memory_store

V, T = RowKind.VALUE, RowKind.TOMBSTONE
SETTINGS = {"compactor_options": None, "min_filter_keys": 1}


def _straddling(newer_k: Row) -> object:
    """One sorted run of two SSTs: the first ends with ``newer_k``, the second starts with an
    older version of the same key."""
    store = memory_store()
    first = put_sst(store, [Row(b"a", 1, V, b"A"), newer_k])
    second = put_sst(store, [Row(b"k", 5, V, b"old"), Row(b"z", 2, V, b"Z")])
    m = ManifestV2(initialized=True, last_l0_seq=20, ssts=(first, second), compacted=(SortedRunV2(
        0, (CompactedSsTableView(first.id, first.id), CompactedSsTableView(second.id, second.id))),))
    store.put_now(manifest_key(1), encode_manifest(m))
    return store


def test_a_get_sees_the_newer_version_at_the_end_of_the_previous_sst() -> None:
    with slatedb.Db.open("memory://test", SETTINGS, store=_straddling(Row(b"k", 10, V, b"new"))) as db:
        assert dict(db.scan(None, None))[b"k"] == b"new"
        assert db.get(b"k") == b"new"
        assert db.get_key_value(b"k").seq == 10  # type: ignore[union-attr]


def test_a_delete_at_the_end_of_the_previous_sst_is_not_undone() -> None:
    with slatedb.Db.open("memory://test", SETTINGS, store=_straddling(Row(b"k", 10, T, b""))) as db:
        assert b"k" not in dict(db.scan(None, None))
        assert db.get(b"k") is None
        assert db.get_key_value(b"k") is None


def test_the_checker_accepts_a_key_spanning_two_ssts_of_a_run() -> None:
    store = _straddling(Row(b"k", 10, V, b"new"))
    report = slatedb.check("memory://test", deep=True, store=store)
    assert "COMPACT-4" not in report.invariants(), report.describe()
