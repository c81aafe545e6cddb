"""Issue 16 item 3: a database whose manifests are gone is not silently recreated.

Deleting every ``manifest/`` file of a database that still holds WAL objects and SSTs used to
make ``Db.open`` create a new database there (orphaning the SSTs, which GC then deletes, and
replaying stray WAL objects into it). Now opening refuses with
:class:`~slatedb.errors.ManifestsMissingError` naming what it found, unless the caller asks for
a new database with ``create="force"``; ``create="never"`` opens an existing database only.
The admin CLI reports the same error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import slatedb
import slatedb.aio
from slatedb.errors import InvalidArgumentError, ManifestsMissingError, NotFoundError
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime
from tests.anyloop import to_thread

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {"compactor_options": None, "garbage_collector_options": None, "l0_sst_size_bytes": 1024}


def _lose_manifests(path: Path) -> None:
    with slatedb.Db.open(f"file://{path}", SETTINGS) as db:
        for i in range(50):
            db.put(b"k%03d" % i, b"v" * 100)
        db.flush()
        db.put(b"after", b"wal only", durable=True)
    for f in (path / "manifest").iterdir():
        f.unlink()
    assert any((path / "compacted").iterdir()) and any((path / "wal").iterdir())


def test_open_refuses_a_database_whose_manifests_are_gone(tmp_path: Path) -> None:
    _lose_manifests(tmp_path)
    with pytest.raises(ManifestsMissingError) as err:
        slatedb.Db.open(f"file://{tmp_path}", SETTINGS)
    msg = str(err.value)
    assert "no manifest" in msg and "WAL object" in msg and "compacted/" in msg, msg
    assert 'create="force"' in msg, msg
    assert err.value.found["wal/"] >= 2 and err.value.found["compacted/"] >= 1
    assert not any((tmp_path / "manifest").iterdir())  # nothing written


@pytest.mark.anyloop
async def test_aio_open_refuses_too(tmp_path: Path) -> None:
    await to_thread(_lose_manifests, tmp_path)
    with pytest.raises(ManifestsMissingError):
        async with slatedb.aio.Db.open(f"file://{tmp_path}", SETTINGS):
            pass


def test_create_force_starts_a_new_empty_database_over_leftovers(tmp_path: Path) -> None:
    _lose_manifests(tmp_path)
    with slatedb.Db.open(f"file://{tmp_path}", SETTINGS, create="force") as db:
        assert db.get(b"after") is None and db.get(b"k001") is None  # leftovers are not part of it
        db.put(b"new", b"db", durable=True)
    with slatedb.Db.open(f"file://{tmp_path}", SETTINGS) as db:  # now a database again
        assert db.get(b"new") == b"db" and db.get(b"after") is None


def test_create_never_and_bad_create_value(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no database"):
        slatedb.Db.open(f"file://{tmp_path}", SETTINGS, create="never")
    with pytest.raises(InvalidArgumentError, match="create"):
        slatedb.Db.open(f"file://{tmp_path}", SETTINGS, create="yes")
    with slatedb.Db.open(f"file://{tmp_path}", SETTINGS) as db:  # default: create where nothing is
        db.put(b"a", b"1")
    with slatedb.Db.open(f"file://{tmp_path}", SETTINGS, create="never") as db:
        assert db.get(b"a") == b"1"


async def test_a_concurrent_creator_is_not_mistaken_for_lost_manifests() -> None:
    """An opener that listed ``manifest/`` just before another writer created the database, and
    then finds that writer's WAL fence, opens the database instead of refusing it."""
    from slatedb.manifest.missing import latest_or_refuse
    from slatedb.manifest.store import ManifestStore

    class ListsManifestLate(MemoryStore):
        stale = True

        async def list(self, prefix: str = ""):
            if prefix == "manifest/" and self.stale:  # the first listing predates the other writer
                self.stale = False
                return []
            return await super().list(prefix)

    bucket = MemoryBucket()
    async with slatedb.aio.Db.open("memory://race", SETTINGS, store=MemoryStore(bucket, ProductionRuntime().now_ms)):
        pass
    late = ListsManifestLate(bucket, ProductionRuntime().now_ms, url="memory://race")
    got = await latest_or_refuse(ManifestStore(late, ProductionRuntime()))
    assert got is not None and got.manifest.writer_epoch == 1


def test_cli_reports_the_lost_manifests(tmp_path: Path) -> None:
    _lose_manifests(tmp_path)
    got = subprocess.run([sys.executable, "-m", "slatedb.cli", "--path", f"file://{tmp_path}", "list-checkpoints"],
                         capture_output=True, text=True, timeout=60, cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert got.returncode == 1, got
    assert "no manifest" in got.stderr and "WAL object" in got.stderr and "Traceback" not in got.stderr, got.stderr
    got = subprocess.run([sys.executable, "-m", "slatedb.cli", "--path", f"file://{tmp_path}", "read-manifest"],
                         capture_output=True, text=True, timeout=60, cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert got.returncode == 1 and "WAL object" in got.stderr, got.stderr
