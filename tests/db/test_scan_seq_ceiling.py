"""Scans at or above the view's seq ceiling (the manifest's ``last_l0_seq``, DUR-2) take plain
blocks as columns without reading any row's seq; scans below it (snapshots) still hide what
was written after them. Both on the writer and after a reopen."""

from __future__ import annotations

import slatedb

S = {"flush_interval": "1h", "compactor_options": None, "garbage_collector_options": None,
     "block_size_bytes": 512}
KEYS = [b"k%04d" % i for i in range(300)]


def _blocks(core):
    view = core.read_state.view
    for h in view.l0:
        for i in range(len(h.reader.index)):
            block = h.reader.cached_block(i)
            if block is not None:
                yield block


def test_the_view_ceiling_is_the_manifest_last_l0_seq_and_snapshots_below_it_read_their_state(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, S) as db:
        for k in KEYS:
            db.put(k, b"old" + k)
        db.flush(wal=False)
        snap = db.snapshot()
        for k in KEYS:
            db.put(k, b"new" + k)
        db.flush(wal=False)
        core = db._core
        view = core.read_state.view
        assert len(view.l0) == 2 and view.seq_ceiling == core._stored.manifest.last_l0_seq > 0
        assert list(snap.scan()) == [(k, b"old" + k) for k in KEYS]  # below the ceiling
        assert list(db.scan()) == [(k, b"new" + k) for k in KEYS]
    with slatedb.Db.open(url, S) as db:
        core = db._core
        assert core.read_state.view.seq_ceiling == core._stored.manifest.last_l0_seq
        assert list(db.scan()) == [(k, b"new" + k) for k in KEYS]
        blocks = list(_blocks(core))
        # the newer SST's blocks were taken as columns with no row's seq read; the older
        # one's rows are all shadowed (not plain across the merge, read row by row or skipped)
        assert blocks and any(b.plain and b._plain is False for b in blocks)
