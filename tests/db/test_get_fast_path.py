"""``Db.get`` without options runs ``ReadPath.get_direct``'s SST half inline (no frame when no
memtable holds the key, a value without expiry returned as the lookup found it). It must answer
what the general path (``SyncReads.get``: checks, then ``get_direct``) and a snapshot answer, on
every kind of row: values with and without expiry, expired rows, tombstones over older values,
merge operands over values in older SSTs (folded through the loop), and rows still in a memtable."""

from __future__ import annotations

import slatedb
from slatedb.api.sync_reads import SyncReads


def _concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + b"+" + operand


def test_the_inline_sst_half_of_get_answers_what_the_general_path_answers(tmp_path) -> None:
    url = "file://" + str(tmp_path)
    settings = {"compactor_options": None}
    keys = [b"k%03d" % i for i in range(120)]
    with slatedb.Db.open(url, settings, merge_operator=_concat) as db:
        for i, k in enumerate(keys):
            if i % 6 == 1:
                db.put(k, b"old-%d" % i, expire_at_ms=1)  # expired long ago
            elif i % 6 == 2:
                db.put(k, b"v%d" % i, expire_at_ms=2**62)  # expires far in the future
            else:
                db.put(k, b"v%d" % i)
        db.flush(wal=False)  # an older L0 SST
        for i, k in enumerate(keys):
            if i % 6 == 3:
                db.delete(k)  # a tombstone in a newer SST over a value
            elif i % 6 == 4:
                db.merge(k, b"m%d" % i)  # an operand over a value in the older SST
        db.flush(wal=False)
    with slatedb.Db.open(url, settings, merge_operator=_concat) as db:
        assert len(db._core.read_state.view.l0) == 2 and db._core.read_state.view.sole_lookup is None
        want = {}
        for i, k in enumerate(keys):
            want[k] = (None if i % 6 in (1, 3) else
                       b"v%d+m%d" % (i, i) if i % 6 == 4 else b"v%d" % i)
        probes = keys + [k + b"~" for k in keys[:10]] + [b"a", b"zz"]
        for round_ in range(2):  # blocks read on first touch, then cached
            for k in probes:
                assert db.get(k) == want.get(k), (round_, k)
                assert SyncReads.get(db, k, None) == want.get(k)
        db.put(keys[0], b"fresh")  # rows in the live memtable: get_direct's memtable half
        db.delete(keys[5])
        db.merge(keys[4], b"again")
        with db.snapshot() as snap:
            for k in probes:
                assert db.get(k) == SyncReads.get(db, k, None) == snap.get(k)
        assert db.get(keys[0]) == b"fresh" and db.get(keys[5]) is None
        assert db.get(keys[4]) == b"v4+m4+again"


def test_one_sst_answers_through_its_sole_lookup_as_the_general_path_does(tmp_path) -> None:
    """A view of one whole L0 SST and no sorted run hands ``Db.get`` that SST's lookup
    (``LsmView.sole_lookup``); its answers are the general path's on every kind of row."""
    url = "file://" + str(tmp_path)
    keys = [b"k%03d" % i for i in range(120)]
    with slatedb.Db.open(url, {"compactor_options": None}, merge_operator=_concat) as db:
        for i, k in enumerate(keys):
            if i % 5 == 1:
                db.put(k, b"old", expire_at_ms=1)
            elif i % 5 == 2:
                db.put(k, b"v%d" % i, expire_at_ms=2**62)
            elif i % 5 == 3:
                db.delete(k)
            elif i % 5 == 4:
                db.merge(k, b"m%d" % i)
            else:
                db.put(k, b"v%d" % i)
    with slatedb.Db.open(url, {"compactor_options": None}, merge_operator=_concat) as db:
        view = db._core.read_state.view
        assert len(view.l0) == 1 and not view.runs and view.sole_lookup is not None
        for k in keys + [b"a", b"k050~", b"zz"]:
            want = SyncReads.get(db, k, None)
            assert db.get(k) == want
        assert db.get(keys[0]) == b"v0" and db.get(keys[1]) is None and db.get(keys[3]) is None
        assert db.get(keys[4]) == b"+m4" and db.get(keys[2]) == b"v2"
