"""Databases to check: a healthy one made by our engine (L0, a sorted run, a checkpoint, WAL
objects left in the replay range by a writer that died), and tools to damage it by hand."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import trio

from slatedb import admin
from slatedb.format import manifest as mf
from slatedb.objstore import resolve_store

REPO = Path(__file__).resolve().parents[2]
SMALL = {"l0_sst_size_bytes": 2048, "l0_max_ssts": 64, "flush_interval": "10ms", "compactor_options": None}

_BUILD = textwrap.dedent('''
    import os, sys
    import slatedb
    url = sys.argv[1]
    settings = slatedb.Settings.from_dict({"l0_sst_size_bytes": 2048, "l0_max_ssts": 64, "flush_interval": "10ms",
                                           "compactor_options": None})
    with slatedb.Db.open(url, settings) as db:
        for i in range(300):
            db.put(b"k%04d" % i, b"a" * 40)
        db.flush(wal=False)
    from slatedb import admin
    import trio
    async def compact():
        from slatedb.objstore import resolve_store
        store = resolve_store(url)
        await admin.submit_compaction(store, "Full")
        await admin.run_compactor(store, once=True)
        await store.aclose()
    trio.run(compact)
    with slatedb.Db.open(url, settings) as db:
        for i in range(0, 300, 3):
            db.put(b"k%04d" % i, b"b" * 40)
        db.flush(wal=False)
        db.create_checkpoint()
        for i in range(0, 300, 7):
            db.put(b"k%04d" % i, b"c" * 40)
        db.flush(wal=False)
    db = slatedb.Db.open(url, settings)
    for i in range(5):
        db.put(b"w%04d" % i, b"d" * 40)
        db.flush()  # the WAL only
    os._exit(0)  # a writer that dies: its WAL objects stay above the replay point
''')


def build(root: Path) -> str:
    """A healthy database of ours at ``root`` (a child process, which dies at the end); its URL."""
    url = f"file://{root}"
    subprocess.run([sys.executable, "-c", _BUILD, url], check=True, cwd=REPO, timeout=120)
    return url


def run(fn, *args):
    return trio.run(fn, *args)


def latest(url: str):
    async def go():
        store = resolve_store(url)
        try:
            return await admin.read_manifest(store)
        finally:
            await store.aclose()
    return run(go)


def write_manifest(root: Path, manifest_id: int, m) -> None:
    (root / "manifest" / f"{manifest_id:020d}.manifest").write_bytes(mf.encode_manifest(m))


def rewrite_latest(root: Path, url: str, **changes) -> int:
    """Commit a successor of the latest manifest with ``changes`` (by hand, as a damaged engine
    would); returns its id."""
    stored = latest(url)
    new_id = stored.id + 1
    write_manifest(root, new_id, attrs.evolve(stored.manifest, **changes))
    return new_id
