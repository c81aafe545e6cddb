"""A clone's external entry names its parent by a relative path, tried under each ancestor of the
clone's URL, nearest first (RFC 000 "SST Path Resolution"). With the parent deleted, an unrelated
database at an ancestor with the same relative path was taken for it: ``slatedb check`` reported
that database's (missing) SSTs and final checkpoint, and the clone's reads looked there. Now a
candidate must hold one of the entry's SSTs (ids are ULIDs): the check says the entry does not
resolve, and the locator falls back to the nearest candidate."""

from __future__ import annotations

import shutil
from pathlib import Path

import trio

import slatedb
from slatedb import admin
from slatedb.lsm.paths import SstLocator
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.url import resolve_store
from slatedb.runtime.production import ProductionRuntime

SETTINGS = {"compactor_options": None, "garbage_collector_options": None}


def _clone_of_a_deleted_parent_beside_an_unrelated_db(tmp_path: Path) -> tuple[str, str]:
    with slatedb.Db.open(f"file://{tmp_path}/pg/db", SETTINGS) as db:
        db.put(b"k", b"v")
        db.flush(wal=False)
    trio.run(lambda: admin.create_clone(f"file://{tmp_path}/pg/clone", f"file://{tmp_path}/pg/db"))
    # An unrelated database at an ancestor with the entry's relative path ("db"):
    with slatedb.Db.open(f"file://{tmp_path}/db", SETTINGS) as db:
        db.put(b"x", b"y")
        db.flush(wal=False)
    return f"file://{tmp_path}/pg/clone", f"file://{tmp_path}/db"


def test_the_locator_takes_the_parent_not_an_unrelated_database_with_the_same_relative_path(tmp_path) -> None:
    clone_url, unrelated = _clone_of_a_deleted_parent_beside_an_unrelated_db(tmp_path)
    with slatedb.Db.open(clone_url, SETTINGS) as db:
        assert db.get(b"k") == b"v"  # the parent is there: found at the nearest candidate
    shutil.rmtree(tmp_path / "pg" / "db")

    async def resolved() -> str:
        store = resolve_store(clone_url)
        locator = SstLocator(store, ProductionRuntime())
        latest = await ManifestStore(store, ProductionRuntime()).read_latest()
        await locator.update(latest.manifest)
        root = await locator.root_of(latest.manifest.external_dbs[0].path)
        return root.url

    assert trio.run(resolved) == f"file://{tmp_path}/pg/db"  # the nearest, not {unrelated}


def test_slatedb_check_says_the_deleted_parent_does_not_resolve(tmp_path) -> None:
    clone_url, unrelated = _clone_of_a_deleted_parent_beside_an_unrelated_db(tmp_path)
    shutil.rmtree(tmp_path / "pg" / "db")
    report = slatedb.check(clone_url, deep=True)
    lines = [f.line() for f in report.findings]
    assert lines and not [f for f in report.findings if f.object.startswith(unrelated)], lines
    assert any(f.invariant == "CLONE-2" and "does not resolve" in f.line() for f in report.findings), lines
    assert slatedb.check(unrelated, deep=True).findings == ()
