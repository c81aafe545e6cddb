"""Reads on the caller's thread for a local directory (``LocalStore.read_range_now``,
``SstReader.lookup_cached(..., read_now=True)`` / ``read_blocks_now``, ``ReadPath.get_direct``): a get or a scan of SST
rows that are not cached does not go through the engine's loop, where it would queue behind an
in-process compaction; other stores, failed reads and merge operands take the loop as before;
a corrupt block is still a typed error naming the object."""

from __future__ import annotations

import glob
import os

import pytest
import trio

import slatedb
from slatedb.errors import CorruptionError, ObjectNotFoundError
from slatedb.objstore.local import LocalStore


class CountingPortal:
    """The Db's runtime-thread portal, counting the calls that cross to the engine's loop."""

    def __init__(self, portal) -> None:
        self._portal = portal
        self.calls: list[str] = []

    def __call__(self, fn, *args):
        self.calls.append(getattr(fn, "__name__", repr(fn)))
        return self._portal(fn, *args)

    def __getattr__(self, name):
        return getattr(self._portal, name)


N = 3000


def _load(url: str) -> None:
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        for i in range(N):
            db.put(b"key%06d" % i, b"value-%06d" % i * 4)


def _reopen(url: str, **kw) -> tuple[slatedb.Db, CountingPortal]:
    db = slatedb.Db.open(url, {"compactor_options": None}, **kw)
    counting = CountingPortal(db._portal)
    db._portal = counting
    return db, counting


def test_gets_and_scans_of_a_local_directory_do_not_cross_to_the_loop(tmp_path):
    url = "file://" + str(tmp_path)
    _load(url)
    db, portal = _reopen(url)
    try:
        assert db._core.read_state.view.l0  # the rows are in an SST, nothing is cached
        for i in range(0, N, 37):
            assert db.get(b"key%06d" % i) == b"value-%06d" % i * 4
        assert db.get(b"key%06d~" % 5) is None
        assert db.get(b"zzz") is None
        assert [k for k, _ in db.scan(b"key000100", b"key000200")] == [b"key%06d" % i for i in range(100, 200)]
        db._core.cache.clear()
        rows = db.scan().next_batch(10 * N)
        assert len(rows) == N and rows[-1] == (b"key%06d" % (N - 1), b"value-%06d" % (N - 1) * 4)
        assert portal.calls == []
    finally:
        db.close()


def test_gets_of_keys_that_begin_a_block_do_not_cross_to_the_loop(tmp_path):
    """With a block cache too small for read-ahead (as for SSTs of a large database), a key
    whose block's index key is the whole key (find_block steps back one block) is read on the
    caller's thread too: the lookup reads both blocks it walks."""
    url = "file://" + str(tmp_path)
    _load(url)
    db = slatedb.Db.open(url, {"compactor_options": None, "block_cache_size_bytes": 16 * 1024})
    portal = db._portal = CountingPortal(db._portal)
    try:
        (h,) = db._core.read_state.view.l0
        assert not h.reader._readahead
        starts = [k for k in h.reader.index.first_keys[1:] if len(k) == len(b"key000000")]
        assert len(starts) > 20
        for key in starts:
            db._core.cache.clear()
            assert db.get(key) == (b"value-" + key[3:]) * 4
        assert portal.calls == []
    finally:
        db.close()


def test_an_absent_key_after_a_blocks_last_row_does_not_cross_to_the_loop(tmp_path):
    """An SST without a bloom filter (under ``min_filter_keys``), as after a false positive: the
    lookup of a key just after a block's last row walks into the next block; the get reads it on
    the caller's thread too."""
    url = "file://" + str(tmp_path)
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        for i in range(900):  # under min_filter_keys: no bloom filter
            db.put(b"key%06d" % i, b"value-%06d" % i * 4)
    db = slatedb.Db.open(url, {"compactor_options": None, "block_cache_size_bytes": 16 * 1024})
    portal = db._portal = CountingPortal(db._portal)
    try:
        (h,) = db._core.read_state.view.l0
        assert h.reader.filter is None and not h.reader._readahead
        lasts = []
        for i in range(len(h.reader.index) - 1):
            db._core.cache.clear()
            block = h.reader.read_blocks_now(i, i + 1)[0]
            lasts.append(block.keys[-1])
        assert len(lasts) > 10
        for key in lasts:
            db._core.cache.clear()
            assert db.get(key + b"~") is None
        assert portal.calls == []
    finally:
        db.close()


def test_other_stores_and_failed_direct_reads_take_the_loop(tmp_path, monkeypatch):
    url = "file://" + str(tmp_path)
    _load(url)

    def broken(self, key, start, end):
        raise OSError("injected")

    monkeypatch.setattr(LocalStore, "read_range_now", broken)
    db, portal = _reopen(url)
    try:
        assert db.get(b"key%06d" % 7) == b"value-%06d" % 7 * 4
        db._core.cache.clear()
        assert len(db.scan().next_batch(10 * N)) == N
        assert "get_slow" in portal.calls and "load_blocks" in portal.calls
    finally:
        db.close()

    with slatedb.Db.open("memory://direct-reads", {"compactor_options": None}) as mem:
        for i in range(100):
            mem.put(b"k%03d" % i, b"v")
        mem.flush(wal=False)
        mem._core.cache.clear()
        assert mem.get(b"k005") == b"v"  # a store without read_range_now: the loop, as before


def test_a_corrupt_block_read_directly_is_a_typed_error_naming_the_object(tmp_path):
    url = "file://" + str(tmp_path)
    _load(url)
    (sst,) = glob.glob(os.path.join(str(tmp_path), "compacted", "*.sst"))
    with open(sst, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0x55]))
    db, portal = _reopen(url)
    try:
        with pytest.raises(CorruptionError) as e:
            db.get(b"key%06d" % 0)
        assert e.value.object_name.endswith(os.path.basename(sst)) and "CRC" in str(e.value)
        assert portal.calls == []
    finally:
        db.close()


def test_a_first_touch_without_the_filter_answers_as_the_filter_first_path(tmp_path):
    """In an SST whose blocks fit the cache, a get reads an uncached block on the caller's
    thread without asking the bloom filter (the block is decoded whole and kept). Its answers
    are those of the filter-first path: hits and misses alike on good blocks (a miss leaves the
    block decoded); on a damaged block, a key the filter rules out is absent and any other key
    meets the CorruptionError naming the object."""
    url = "file://" + str(tmp_path)
    _load(url)
    (sst,) = glob.glob(os.path.join(str(tmp_path), "compacted", "*.sst"))
    db, portal = _reopen(url)
    try:
        (h,) = db._core.read_state.view.l0
        reader = h.reader
        assert reader._readahead and reader.filter is not None
        for i in range(0, N, 7):
            assert db.get(b"key%06d~" % i) is None  # misses first: blocks read without the filter
            assert db.get(b"key%06d" % i) == b"value-%06d" % i * 4
        start, end = reader.index.block_range(3)
        keys = reader.read_blocks_now(3, 4)[0].keys
    finally:
        db.close()
    with open(sst, "r+b") as f:
        f.seek(start + 5)
        b = f.read(1)
        f.seek(start + 5)
        f.write(bytes([b[0] ^ 0x55]))
    absent = [k + b"~" for k in keys[:-1]]
    db, portal = _reopen(url)
    try:
        reader = db._core.read_state.view.l0[0].reader
        ruled_out = [k for k in absent if not reader.might_contain(k)]
        assert ruled_out
        for key in ruled_out:
            db._core.cache.clear()
            assert db.get(key) is None
        for key in keys[:3]:
            db._core.cache.clear()
            with pytest.raises(CorruptionError) as e:
                db.get(key)
            assert e.value.object_name.endswith(os.path.basename(sst)) and "CRC" in str(e.value)
        assert portal.calls == []
    finally:
        db.close()


def test_read_range_now_reads_maps_and_unmaps(tmp_path):
    store = LocalStore(str(tmp_path))

    async def main() -> None:
        await store.put("a/x", b"0123456789")
        await store.put("a/empty", b"")
        assert store.read_range_now("a/x", 2, 5) == b"234"
        assert store.read_range_now("a/x", 8, 20) == b"89"  # short: the object ends first
        assert store.read_range_now("a/empty", 0, 4) == b""
        with pytest.raises(ObjectNotFoundError):
            store.read_range_now("a/missing", 0, 1)
        assert len(store._maps) == 1
        await store.delete("a/x")
        assert store._maps == {}  # a deleted object's file is unmapped (its space is freed)
        with pytest.raises(ObjectNotFoundError):
            store.read_range_now("a/x", 0, 1)
        await store.aclose()

    trio.run(main)


def test_for_loops_next_next_batch_and_seek_share_one_position(tmp_path):
    """``for kv in it`` steps a generator over the iterator's own buffer and position, so a loop
    left early, ``next()``, ``next_batch`` and ``seek`` continue from one another."""
    url = "file://" + str(tmp_path)
    _load(url)
    want = [(b"key%06d" % i, b"value-%06d" % i * 4) for i in range(N)]
    db, _ = _reopen(url)
    try:
        snap = db.snapshot()
        db.put(b"key000010", b"new")  # a memtable source too: the merge, not the one-SST path
        want2 = [(k, b"new" if k == b"key000010" else v) for k, v in want]
        for rows in (want, want2):
            it = db.scan() if rows is want2 else snap.scan()
            got = []
            for kv in it:
                got.append(kv)
                if len(got) == 300:
                    break
            got.append(next(it))
            got += it.next_batch(500)
            for kv in it:
                got.append(kv)
                if len(got) == 1500:
                    break
            assert got == rows[:1500]
            it.seek(b"key002000")
            assert next(iter(it)) == rows[2000]
            assert list(it) == rows[2001:]
    finally:
        db.close()
