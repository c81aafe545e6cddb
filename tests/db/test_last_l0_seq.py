"""``last_l0_seq`` of an L0 flush is the largest seq the flushed memtable holds, as read from its
rows, also when that is seq 0: a WAL row of seq 0 (this engine's writers start at 1; the format
allows it) replayed at open and flushed leaves ``last_l0_seq`` 0, not a seq nothing wrote."""

from __future__ import annotations

import slatedb
from slatedb.format.sst import SstOptions
from slatedb.format.wal_sst import encode_wal_sst
from slatedb.row import Row, RowKind
from slatedb.wal.writer import wal_key

from .helpers import latest_manifest, memory_store

S = {"flush_interval": "1h", "compactor_options": None, "garbage_collector_options": None}


def test_a_flushed_memtable_of_seq_0_alone_leaves_last_l0_seq_0() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=S, store=store):
        pass  # a database with no row: its open fenced WAL 1
    last_wal = max(int(m.key[len("wal/"):-len(".sst")]) for m in store.list_now("wal/"))
    store.put_now(wal_key(last_wal + 1), encode_wal_sst([Row(b"a", 0, RowKind.VALUE, b"v")], SstOptions()).data)
    with slatedb.Db.open("memory://test", settings=S, store=store) as db:  # replays it, flushes it at close
        assert db.get(b"a") == b"v"
    m = latest_manifest(store)[1]
    assert len(m.l0) == 1 and m.last_l0_seq == 0
