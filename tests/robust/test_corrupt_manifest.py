"""A damaged latest manifest is never built on (issue 25 item 5).

A ``.manifest`` has no checksum, so many bit flips decode to another FlatBuffer. Before the fix,
``Db.open`` bumped the writer epoch on top of such a manifest -- copying the damage into the next
manifest -- and only then failed, naming that next manifest. Now every manifest commit checks the
manifest it builds on (:mod:`slatedb.manifest.validate`) and refuses a malformed one with a
:class:`CorruptionError` naming it, writing nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb import CheckpointOptions, admin
from slatedb.errors import CorruptionError
from slatedb.format.manifest import decode_manifest_v2
from slatedb.manifest.validate import manifest_problem
from slatedb.objstore import resolve_store

SETTINGS = {"l0_sst_size_bytes": 1024, "compactor_options": None}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """A database with L0 SSTs, and one malformed flip of its latest manifest per kind."""
    root = tmp_path_factory.mktemp("corrupt-manifest")
    with slatedb.Db.open(f"file://{root}/db", settings=SETTINGS) as db:
        for i in range(60):
            db.put(b"k%03d" % i, b"v" * 40)
        db.flush(wal=False)
    return root / "db", _malformed_flips(sorted((root / "db" / "manifest").glob("*.manifest"))[-1])


def _db(template, tmp_path: Path) -> tuple[str, Path, dict[str, bytes]]:
    shutil.copytree(template[0], tmp_path / "db")
    latest = sorted((tmp_path / "db" / "manifest").glob("*.manifest"))[-1]
    return f"file://{tmp_path}/db", latest, template[1]


def _malformed_flips(path: Path) -> dict[str, bytes]:
    """One flipped copy of ``path`` per kind of structural problem a single bit flip causes."""
    data, n = path.read_bytes(), int(path.stem)
    out: dict[str, bytes] = {}
    for bit in range(0, len(data) * 8, 3):  # every third bit: each field and kind is met, in a third of the time
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            m = decode_manifest_v2(bytes(flipped), path.name)
        except CorruptionError:
            continue
        problem = manifest_problem(m, n)
        if problem is not None:
            kind = problem.split(":")[-1].split(" (")[0].strip() if ":" in problem else problem
            kind = " ".join(w for w in kind.split() if not any(c.isdigit() for c in w))
            out.setdefault(kind, bytes(flipped))
    return out


def _files(tmp_path: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in (tmp_path / "db" / "manifest").glob("*.manifest")}


def test_open_refuses_a_latest_manifest_whose_l0_view_names_a_missing_sst(template, tmp_path: Path) -> None:
    """The issue's case: a flip in an SST id of the latest manifest (the view now names an SST
    the manifest does not list). Nothing is written; the error names the latest manifest."""
    url, latest, flips = _db(template, tmp_path)
    missing = next(v for k, v in flips.items() if "does not list" in k)
    latest.write_bytes(missing)
    before = _files(tmp_path)
    with pytest.raises(CorruptionError) as e:
        slatedb.Db.open(url, settings=SETTINGS)
    assert e.value.object_name == f"manifest/{latest.name}"
    assert _files(tmp_path) == before  # not committed forward; the damaged one untouched


def test_every_kind_of_malformed_manifest_is_refused_by_every_writer(template, tmp_path: Path) -> None:
    url, latest, flips = _db(template, tmp_path)
    assert len(flips) >= 4, sorted(flips)  # several kinds: missing SST, block layout, ranges, ...
    good = latest.read_bytes()
    for kind, data in flips.items():
        latest.write_bytes(data)
        before = _files(tmp_path)
        with pytest.raises(CorruptionError) as e:
            slatedb.Db.open(url, settings=SETTINGS)
        assert e.value.object_name == f"manifest/{latest.name}", kind

        async def checkpoint():
            store = resolve_store(url)
            try:
                await admin.create_checkpoint(store, CheckpointOptions(lifetime_s=60))
            finally:
                await store.aclose()

        with pytest.raises(CorruptionError):
            trio.run(checkpoint)
        assert _files(tmp_path) == before, kind
    latest.write_bytes(good)
    with slatedb.Db.open(url, settings=SETTINGS) as db:
        assert db.get(b"k007") == b"v" * 40


def test_a_manifest_found_well_formed_is_checked_again_under_another_id() -> None:
    """Inside a simulated run (memo.remembering) a value found well formed is not checked again
    (check_manifest's memo); the memo is keyed by the manifest id too, since the checks depend on
    it (a checkpoint may not pin a later manifest), and never keeps a malformed value."""
    import uuid

    from slatedb.format import memo
    from slatedb.format.types import Checkpoint, ManifestV2
    from slatedb.manifest.validate import check_manifest

    m = ManifestV2(initialized=True, checkpoints=(Checkpoint(id=uuid.UUID(int=1), manifest_id=3),))
    with memo.remembering():
        for _ in range(2):
            check_manifest(m, 5)  # fine: the checkpoint pins manifest 3, below 5
            with pytest.raises(CorruptionError, match="pins manifest 3"):
                check_manifest(m, 2)  # as manifest 2, it is malformed
    check_manifest(m, 5)
    with pytest.raises(CorruptionError):
        check_manifest(m, 2)

