"""``Db.open(..., create="force")`` over a path whose manifests are gone (robust.md: lost
manifests): the new database starts empty -- the stray WAL objects are not replayed into it --
and its manifest ids continue above the manifest boundary (``DbCore._open`` through
``initial_over_leftovers``). The default open of an empty path starts at manifest 1.
`sim mutate` seed 24: ``DbCore._open`` asking for the leftovers on every create but the forced
one survived -- the tests of the forced open live in tests/robust and tests/manifest, which db's
campaign does not run."""

from __future__ import annotations

from pathlib import Path

import slatedb
from slatedb.format.layout import MANIFEST_BOUNDARY_KEY

SETTINGS = {"compactor_options": None, "garbage_collector_options": None, "l0_sst_size_bytes": 1024,
            "flush_interval": "1h"}


def _manifest_ids(path: Path) -> list[int]:
    return sorted(int(f.name.split(".")[0]) for f in (path / "manifest").iterdir() if f.name.endswith(".manifest"))


def test_a_forced_create_over_lost_manifests_starts_empty_above_the_boundary(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, SETTINGS) as db:
        for i in range(20):
            db.put(b"k%03d" % i, b"v" * 100)
        db.flush()
        db.put(b"after", b"wal only", durable=True)
    lost = _manifest_ids(tmp_path)
    for i in lost:
        (tmp_path / "manifest" / f"{i:020d}.manifest").unlink()
    boundary = lost[-1] + 3  # a GC had moved the boundary past them
    (tmp_path / MANIFEST_BOUNDARY_KEY).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / MANIFEST_BOUNDARY_KEY).write_text(str(boundary))
    wal_before = sorted(f.name for f in (tmp_path / "wal").iterdir())
    with slatedb.Db.open(url, SETTINGS, create="force") as db:
        assert db.get(b"after") is None and db.get(b"k001") is None  # the leftovers are not part of it
        db.put(b"new", b"db", durable=True)
    assert _manifest_ids(tmp_path)[0] == boundary + 1
    assert set(wal_before) <= {f.name for f in (tmp_path / "wal").iterdir()}  # GC's to delete, not the open's
    with slatedb.Db.open(url, SETTINGS, create="never") as db:
        assert db.get(b"new") == b"db" and db.get(b"after") is None and db.get(b"k001") is None


def test_a_default_open_of_an_empty_path_starts_at_manifest_1(tmp_path: Path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", SETTINGS) as db:
        db.put(b"a", b"1", durable=True)
    assert _manifest_ids(tmp_path)[0] == 1
