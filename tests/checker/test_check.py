"""``slatedb check`` on a healthy database and on a dozen hand-made corruptions: each reported
with its invariant id and the object at fault; the garbage report; the CLI's exit codes.

Each corruption is what a real defect leaves behind (a GC that deleted too much, a writer that
lost its epoch, an engine that dropped a checkpoint's metadata, a parent database removed under
its clone), made by hand on a copy of one healthy database."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import attrs
import pytest

import slatedb
from slatedb import admin
from slatedb.checker import CheckAccessError
from slatedb.format.types import Checkpoint, CompactedSsTableView, SortedRunV2, WriterCheckpoint

from .helpers import REPO, build, latest, rewrite_latest, run, write_manifest


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pristine") / "db"
    build(root)
    return root


@pytest.fixture
def db(pristine, tmp_path) -> tuple[Path, str]:
    root = tmp_path / "db"
    shutil.copytree(pristine, root)
    return root, f"file://{root}"


def only(report, invariant: str):
    assert report.invariants() == {invariant}, report.describe()
    return report.about(invariant)


def test_healthy_database_is_clean(db):
    root, url = db
    for deep in (False, True):
        report = slatedb.check(url, deep=deep)
        assert report.healthy, report.describe()
    m = latest(url).manifest
    assert m.compacted and m.l0 and m.replay_after_wal_id < max(int(p.stem) for p in (root / "wal").iterdir())


def test_deleted_sst_of_the_latest_manifest(db):
    root, url = db
    m = latest(url).manifest
    victim = m.compacted[0].ssts[0].sst_id
    (root / "compacted" / f"{victim}.sst").unlink()
    (f,) = only(slatedb.check(url), "GC-4")
    assert f.object == f"compacted/{victim}.sst" and "does not exist" in f.message


def test_deleted_sst_only_a_checkpoint_pins(db):
    root, url = db
    stored = latest(url)
    live = {v.sst_id for v in stored.manifest.l0} | {v.sst_id for r in stored.manifest.compacted for v in r.ssts}
    # The compactor's checkpoint pins the manifest before its compaction: L0 SSTs since compacted.
    pinned = [run(lambda: _read(url, c.manifest_id)) for c in stored.manifest.checkpoints]
    victim = next(s.id for p in pinned for s in p.ssts if s.id not in live)
    (root / "compacted" / f"{victim}.sst").unlink()
    findings = only(slatedb.check(url), "CKPT-2")
    assert {f.object for f in findings} == {f"compacted/{victim}.sst"}


async def _read(url, mid):
    from slatedb.objstore import resolve_store
    store = resolve_store(url)
    try:
        return (await admin.read_manifest(store, mid)).manifest
    finally:
        await store.aclose()


def test_deleted_wal_object_in_the_replay_range(db):
    root, url = db
    m = latest(url).manifest
    above = sorted(int(p.stem) for p in (root / "wal").iterdir() if int(p.stem) > m.replay_after_wal_id)
    victim = above[len(above) // 2]
    (root / "wal" / f"{victim:020d}.sst").unlink()
    (f,) = only(slatedb.check(url), "FENCE-1")
    assert f.object == f"wal/{victim:020d}.sst"


def test_wal_object_pinned_by_a_checkpoint(db):
    root, url = db
    stored = latest(url)
    # A checkpoint on an old manifest whose WAL range lies below the replay point.
    # ... an old manifest whose WAL range is not empty and lies below the latest replay point
    old = next(i for i in range(2, stored.id)
               if (lambda pm: pm.replay_after_wal_id < pm.wal_id_last_seen <= stored.manifest.replay_after_wal_id)(
                   run(lambda: _read(url, i))))
    pm = run(lambda: _read(url, old))
    cp = Checkpoint(id=uuid.uuid4(), manifest_id=old, checkpoint_expire_time_s=0, checkpoint_create_time_s=1)
    rewrite_latest(root, url, checkpoints=stored.manifest.checkpoints + (cp,))
    victim = pm.wal_id_last_seen
    (root / "wal" / f"{victim:020d}.sst").unlink()
    findings = only(slatedb.check(url), "READ-2")
    assert [f.object for f in findings] == [f"wal/{victim:020d}.sst"]


def test_boundary_above_latest(db):
    root, url = db
    (root / "gc").mkdir(exist_ok=True)
    (root / "gc" / "manifest.boundary").write_text("999")
    (f,) = only(slatedb.check(url), "BOUNDARY-4")
    assert f.object == "gc/manifest.boundary"
    (root / "gc" / "manifest.boundary").write_text("x1")
    (f,) = only(slatedb.check(url), "BOUNDARY-4")


def test_manifest_missing_above_the_boundary(db):
    root, url = db
    stored = latest(url)
    (root / "gc").mkdir(exist_ok=True)
    (root / "gc" / "manifest.boundary").write_text("3")
    (root / "manifest" / f"{stored.id - 2:020d}.manifest").unlink()
    (f,) = only(slatedb.check(url), "BOUNDARY-1")
    assert f.object == f"manifest/{stored.id - 2:020d}.manifest"
    (root / "gc" / "manifest.boundary").write_text(str(stored.id - 2))
    assert slatedb.check(url).healthy


def test_orphan_writer_checkpoint_whose_metadata_was_dropped(db):
    """What an engine switch left (issue 25 item 1): the old writer checkpoint survives a newer
    writer epoch, without its metadata, never expiring."""
    root, url = db
    m = latest(url).manifest
    mine = next(c for c in m.checkpoints if isinstance(c.metadata, WriterCheckpoint))
    anonymous = attrs.evolve(mine, metadata=None)
    rest = tuple(c for c in m.checkpoints if c.id != mine.id)
    rewrite_latest(root, url, writer_epoch=m.writer_epoch + 1, checkpoints=rest + (anonymous,))
    (f,) = only(slatedb.check(url), "CKPT-3")
    assert str(mine.id) in f.object and "never expires" in f.message and "dropped" in f.message


def test_user_checkpoints_are_not_orphans(db):
    root, url = db
    m = latest(url).manifest
    # A newer writer epoch: our writer checkpoint (epoch m.writer_epoch) is now an orphan, the
    # user's never-expiring checkpoint is not.
    rewrite_latest(root, url, writer_epoch=m.writer_epoch + 1)
    findings = only(slatedb.check(url), "CKPT-3")
    assert len(findings) == 1 and f"epoch {m.writer_epoch}" in findings[0].message


def test_deleted_checkpointed_manifest(db):
    root, url = db
    m = latest(url).manifest
    user = next(c for c in m.checkpoints if c.metadata is None and c.checkpoint_expire_time_s == 0)
    (root / "manifest" / f"{user.manifest_id:020d}.manifest").unlink()
    report = slatedb.check(url)
    assert f"manifest/{user.manifest_id:020d}.manifest" in {f.object for f in report.about("GC-2")}, report.describe()
    assert report.invariants() == {"GC-2"}


def test_overlapping_sorted_runs(db):
    root, url = db
    m = latest(url).manifest
    run0 = m.compacted[0]
    dup = CompactedSsTableView(id=slatedb_ulid(), sst_id=run0.ssts[0].sst_id)
    bad = SortedRunV2(id=run0.id, ssts=run0.ssts + (dup,))
    rewrite_latest(root, url, compacted=(bad,) + m.compacted[1:])
    (f,) = only(slatedb.check(url), "COMPACT-4")
    assert f.object == f"compacted/{run0.ssts[0].sst_id}.sst" and "overlaps" in f.message


def slatedb_ulid():
    from ulid import ULID
    return ULID()


def test_writer_epoch_going_back(db):
    root, url = db
    m = latest(url).manifest
    new_id = rewrite_latest(root, url, writer_epoch=m.writer_epoch - 1,
                            checkpoints=tuple(c for c in m.checkpoints if c.metadata is None))
    (f,) = only(slatedb.check(url), "FENCE-4")
    assert f.object == f"manifest/{new_id:020d}.manifest"


def test_replay_point_going_back(db):
    root, url = db
    m = latest(url).manifest
    new_id = rewrite_latest(root, url, last_l0_seq=m.last_l0_seq - 5)
    report = slatedb.check(url, deep=True)
    assert "DUR-2" in report.invariants(), report.describe()
    assert f"manifest/{new_id:020d}.manifest" in {f.object for f in report.about("DUR-2")}
    # deep: the L0 SSTs now hold seqs above last_l0_seq
    assert any(f.object.startswith("compacted/") for f in report.about("DUR-2"))


def test_bit_flip_in_a_data_block_is_found_by_deep(db):
    root, url = db
    m = latest(url).manifest
    sst = m.compacted[0].ssts[0].sst_id
    path = root / "compacted" / f"{sst}.sst"
    data = bytearray(path.read_bytes())
    data[100] ^= 0x10
    path.write_bytes(bytes(data))
    assert slatedb.check(url).healthy  # metadata and index intact
    (f,) = only(slatedb.check(url, deep=True), "GC-4")
    assert f.object == f"compacted/{sst}.sst" and "does not decode" in f.message


def test_bit_flip_in_the_stats_block_is_found_by_deep(db):
    """``--deep`` checks every block's CRC, the stats block too: before, a flipped byte there
    (no row, no index entry) passed as healthy."""
    from slatedb.format.sst import decode_layout

    root, url = db
    sst = latest(url).manifest.compacted[0].ssts[0].sst_id
    path = root / "compacted" / f"{sst}.sst"
    data = bytearray(path.read_bytes())
    info = decode_layout(bytes(data), path.name).info
    assert info.stats_len > 4
    data[info.stats_offset + 1] ^= 0x10
    path.write_bytes(bytes(data))
    (f,) = only(slatedb.check(url, deep=True), "GC-4")
    assert f.object == f"compacted/{sst}.sst" and "does not decode" in f.message, f


def test_objects_without_a_manifest(db):
    root, url = db
    shutil.rmtree(root / "manifest")
    (f,) = only(slatedb.check(url), "DESTROY-4")


def test_compactions_epoch_above_the_manifest(db):
    root, url = db
    from slatedb.format.compactions import decode_compactions, encode_compactions
    files = sorted((root / "compactions").glob("*.compactions"))
    c = decode_compactions(files[-1].read_bytes(), "x")
    nxt = root / "compactions" / f"{int(files[-1].stem) + 1:020d}.compactions"
    nxt.write_bytes(encode_compactions(attrs.evolve(c, compactor_epoch=c.compactor_epoch + 5)))
    (f,) = only(slatedb.check(url), "CFENCE-3")
    assert f.object == f"compactions/{nxt.stem}.compactions"


def test_clone_and_projection_and_union_are_clean_then_dangling(tmp_path, pristine):
    parent = tmp_path / "parent"
    shutil.copytree(pristine, parent)
    p_url = f"file://{parent}"
    clone, proj, low, uni = (f"file://{tmp_path / n}" for n in ("clone", "proj", "low", "union"))
    with slatedb.Db.open(p_url):
        pass  # close flushes the WAL to L0: projections and unions take sources without WAL rows
    run(admin.create_clone, clone, p_url)
    run(admin.project, proj, p_url, "k0100..k0200")
    run(admin.project, low, p_url, "..k0100")
    run(admin.union, uni, [low, proj])
    for url in (p_url, clone, proj, low, uni):
        report = slatedb.check(url, deep=True)
        assert report.healthy, (url, report.describe())
    # The clone's final checkpoint removed from the parent: CLONE-1.
    m = latest(clone).manifest
    final = m.external_dbs[0].final_checkpoint_id
    run(_delete_checkpoint, p_url, final)
    (f,) = only(slatedb.check(clone), "CLONE-1")
    assert str(final) in f.object
    # The parent gone altogether: a dangling external database, CLONE-2.
    shutil.rmtree(parent)
    findings = only(slatedb.check(proj), "CLONE-2")
    assert findings[0].object == m.external_dbs[0].path and "does not resolve" in findings[0].message
    assert not parent.exists()  # read-only: nothing re-created


def test_an_sst_listed_under_two_paths_of_external_dbs_is_proj_6(tmp_path, pristine):
    """A union that lists a source's nested external SST as the source's own (issue 27 item 5)."""
    from slatedb.format.types import ExternalDb

    parent = tmp_path / "parent"
    shutil.copytree(pristine, parent)
    p_url = f"file://{parent}"
    low, uni = (f"file://{tmp_path / n}" for n in ("low", "union"))
    with slatedb.Db.open(p_url):
        pass
    run(admin.project, low, p_url, "..k0100")
    run(admin.union, uni, [low])
    assert slatedb.check(uni).healthy
    m = latest(uni).manifest
    ext = next(e for e in m.external_dbs if e.sst_ids)
    wrong = ExternalDb(path=f"{ext.path}-elsewhere", source_checkpoint_id=uuid.uuid4(), sst_ids=ext.sst_ids[:1])
    rewrite_latest(tmp_path / "union", uni, external_dbs=m.external_dbs + (wrong,))
    (f,) = slatedb.check(uni).about("PROJ-6")
    assert str(ext.sst_ids[0]) in f.message and "under one database only" in f.message


async def _delete_checkpoint(url, cid):
    from slatedb.objstore import resolve_store
    store = resolve_store(url)
    try:
        await admin.delete_checkpoint(store, cid)
    finally:
        await store.aclose()


def test_garbage_report(db):
    root, url = db
    orphan = root / "compacted" / "01ARZ3NDEKTSV4RRFFQ69G5FAV.sst"
    shutil.copy(next((root / "compacted").iterdir()), orphan)
    report = slatedb.check(url)
    g = next(g for g in report.garbage if g.key == "compacted/01ARZ3NDEKTSV4RRFFQ69G5FAV.sst")
    assert g.kind == "sst" and g.collectable == "later"
    shutil.rmtree(root / "compactions")
    g = next(g for g in slatedb.check(url).garbage if g.key.endswith("01ARZ3NDEKTSV4RRFFQ69G5FAV.sst"))
    assert g.collectable == "never" and ".compactions" in g.why
    (root / "stray.txt").write_text("x")
    assert any(g.key == "stray.txt" and g.collectable == "never" for g in slatedb.check(url).garbage)
    assert slatedb.check(url).healthy  # garbage is not a finding


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "slatedb.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_cli_exit_codes_and_json(db, tmp_path):
    root, url = db
    ok = _cli("check", "--path", url)
    assert ok.returncode == 0, ok.stderr
    assert "healthy" in ok.stdout.splitlines()[-1]
    (root / "gc").mkdir(exist_ok=True)
    (root / "gc" / "manifest.boundary").write_text("999")
    bad = _cli("--path", url, "check", "--json")
    assert bad.returncode == 1
    out = json.loads(bad.stdout)
    assert out["healthy"] is False and out["findings"][0]["invariant"] == "BOUNDARY-4"
    text = _cli("check", "--path", url, "--no-garbage")
    assert text.stdout.splitlines()[0].startswith("BOUNDARY-4 gc/manifest.boundary: ")
    assert json.loads(_cli("--path", url, "check", "--json").stdout)["garbage"]  # there is garbage
    # Found ignored with --json: the whole garbage list was printed (thousands of objects).
    assert "garbage" not in json.loads(_cli("--path", url, "check", "--json", "--no-garbage").stdout)
    missing = tmp_path / "nothing"
    gone = _cli("check", "--path", f"file://{missing}")
    assert gone.returncode == 2 and not missing.exists()
    missing.mkdir()
    assert _cli("check", "--path", f"file://{missing}").returncode == 2
    assert _cli("check").returncode == 2
    with pytest.raises(CheckAccessError):
        slatedb.check(f"file://{tmp_path / 'nothing2'}")


def _tracker_now(url):
    from slatedb.format import seq_tracker

    m = latest(url).manifest
    return m, seq_tracker.decode(m.sequence_tracker, "latest")


def test_sequence_tracker_forgotten_pairs_are_track_2_and_garbage_is_track_1(db):
    """TRACK-2 (writer.md): a manifest's tracker keeps the pairs of the one below it; TRACK-1:
    it decodes."""
    from slatedb.format.seq_tracker import SequenceTracker

    root, url = db
    m, t = _tracker_now(url)
    assert t, "our writer records a pair at its first L0 flush"
    grown = SequenceTracker(t.seqs + (m.last_l0_seq,), t.timestamps_s + (t.timestamps_s[-1] + 60,))
    rewrite_latest(root, url, sequence_tracker=grown.encode())
    assert slatedb.check(url).healthy, "an appended pair is fine"
    forgot = rewrite_latest(root, url, sequence_tracker=SequenceTracker((m.last_l0_seq,), (t.timestamps_s[-1] + 120,)).encode())
    (f,) = only(slatedb.check(url), "TRACK-2")
    assert f.object == f"manifest/{forgot:020d}.manifest" and "pairs are gone" in f.message
    new_id = rewrite_latest(root, url, sequence_tracker=b"\x07garbage")
    assert any(f.object == f"manifest/{new_id:020d}.manifest" and "does not decode" in f.message
               for f in slatedb.check(url).about("TRACK-1"))


@pytest.mark.parametrize("what", ["not in order", "above last_l0_seq"])
def test_sequence_tracker_out_of_order_or_ahead_is_track_1(db, what):
    from slatedb.format.seq_tracker import SequenceTracker

    root, url = db
    m, t = _tracker_now(url)
    if what == "not in order":  # the decoder itself refuses it, naming the manifest
        bad = SequenceTracker(t.seqs + (t.seqs[-1],), t.timestamps_s + (t.timestamps_s[-1] - 60,))
    else:
        bad = SequenceTracker(t.seqs + (m.last_l0_seq + 1,), t.timestamps_s + (t.timestamps_s[-1] + 60,))
    new_id = rewrite_latest(root, url, sequence_tracker=bad.encode())
    (f,) = only(slatedb.check(url), "TRACK-1")
    assert f.object == f"manifest/{new_id:020d}.manifest" and what in f.message



@pytest.mark.parametrize("bad", ["file://tmp/{root}/gone", "file://{root}/../gone", "file://{root}/gone#x"])
def test_malformed_file_url_is_refused_as_the_other_commands_refuse_it(db, bad):
    """A ``file://`` URL every other command refuses (a host, a '..' segment, a fragment) is a
    bad URL to ``check`` too, whether or not the directory it seems to name exists: the same
    InvalidUrlError at ``slatedb.check`` and, from the CLI, exit 2 with the URL's fault (not
    "``/x`` is not a directory" for ``file://tmp/x``, a directory the URL does not name)."""
    from slatedb.errors import InvalidUrlError

    root, _ = db
    url = bad.format(root=str(root).lstrip("/") if bad.startswith("file://tmp/") else root)
    with pytest.raises(InvalidUrlError):
        slatedb.check(url)
    out = _cli("check", "--path", url)
    assert out.returncode == 2
    assert "is not a directory" not in out.stderr, out.stderr
    assert "file URL" in out.stderr or "fragment" in out.stderr, out.stderr
