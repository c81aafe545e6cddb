"""Issue 22 item 4: admin sequence <-> timestamp lookups over the manifest's sequence tracker
(RFC 0012). The official wheel writes a database (each open writes a tracker entry at its L0
flush); our decoder reads its tracker byte for byte and our lookups agree with the official
Admin's. A tracker we encode (many entries, every delta-of-delta width) is read by the official
Admin with the same answers; corrupt tracker bytes raise CorruptionError naming the manifest."""

from __future__ import annotations

import shutil

import attrs
import pytest
import trio

from slatedb import admin
from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format import seq_tracker as st
from slatedb.format.layout import manifest_key
from slatedb.format.manifest import decode_manifest_v2, encode_manifest
from slatedb.objstore.local import LocalStore

pytestmark = pytest.mark.interop

OFFICIAL_WRITE_AND_LOOK_UP = """
import time
root = sys.argv[1]
store = store_at(root)

async def main():
    for r in range(2):
        db = await open_db(root, overrides={"compactor_options": None})
        for i in range(5):
            await db.put(b"k%d-%d" % (r, i), b"v")
        await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))
        await db.shutdown()
    emit(await look_up(root))

async def look_up(root):
    a = u.AdminBuilder("db", store_at(root)).build()
    seqs, times = json.loads(sys.argv[2]), json.loads(sys.argv[3])
    return {"ts": [[await a.get_timestamp_for_sequence(q, up) for up in (False, True)] for q in seqs],
            "seq": [[await a.get_sequence_for_timestamp(t, up) for up in (False, True)] for t in times]}

if sys.argv[4] == "write":
    asyncio.run(main())
else:
    emit(asyncio.run(look_up(root)))
"""


def _latest(root) -> tuple[int, bytes]:
    mdir = root / "db" / "manifest"
    newest = max(mdir.iterdir(), key=lambda p: int(p.name.split(".")[0]))
    return int(newest.name.split(".")[0]), newest.read_bytes()


def _ours(root, seqs, times) -> dict:
    async def main():
        store = LocalStore(str(root / "db"))
        return {"ts": [[await admin.get_timestamp_for_sequence(store, q, up) for up in (False, True)] for q in seqs],
                "seq": [[await admin.get_sequence_for_timestamp(store, t, up) for up in (False, True)] for t in times]}
    return trio.run(main)


def _write_tracker(root, tracker_bytes: bytes) -> str:
    """A new latest manifest: the latest one with ``tracker_bytes`` as its sequence tracker."""
    mid, data = _latest(root)
    m = decode_manifest_v2(data, manifest_key(mid))
    key = manifest_key(mid + 1)
    (root / "db" / key).write_bytes(encode_manifest(attrs.evolve(m, sequence_tracker=tracker_bytes)))
    return key


def test_official_tracker_decodes_and_lookups_agree(official, tmp_path) -> None:
    import json
    seqs = list(range(0, 14))
    # the official run's wall-clock seconds are not known in advance: probe a window around now
    import time as _time
    now = int(_time.time())
    times = list(range(now - 5, now + 60))
    got = official.run_json(OFFICIAL_WRITE_AND_LOOK_UP, str(tmp_path), json.dumps(seqs), json.dumps(times), "write")
    mid, data = _latest(tmp_path)
    raw = decode_manifest_v2(data, manifest_key(mid)).sequence_tracker
    tracker = st.decode(raw, "m")
    assert len(tracker) >= 1 and tracker.seqs[0] >= 1 and now - 5 <= tracker.timestamps_s[0] <= now + 60
    assert tracker.encode() == raw  # byte for byte
    assert _ours(tmp_path, seqs, times) == got
    assert any(v != [None, None] for v in got["seq"]) and any(v[0] is not None for v in got["ts"])


@pytest.mark.check_allows("TRACK-1", "TRACK-2", reason="the test writes a synthetic tracker (seqs far above "
                          "last_l0_seq, the writer's pair replaced) into a manifest by hand")
def test_a_tracker_we_encode_reads_the_same_in_the_official_admin(official, tmp_path) -> None:
    import json
    official.run_json(OFFICIAL_WRITE_AND_LOOK_UP, str(tmp_path), "[]", "[]", "write")
    # deltas of deltas of every width: 0, 7, 9, 12 and 32 bits; repeated timestamps
    seqs = [3, 3, 10, 17, 24, 100, 400, 3000, 3001, 90_000, 5_000_000, 5_000_001]
    times = [1_700_000_000, 1_700_000_060, 1_700_000_120, 1_700_000_180, 1_700_000_180, 1_700_000_500,
             1_700_003_000, 1_700_003_001, 1_700_100_000, 1_750_000_000, 1_750_000_060, 1_800_000_000]
    tracker = st.SequenceTracker(tuple(seqs), tuple(times))
    _write_tracker(tmp_path, tracker.encode())
    q_seqs = sorted({0, 1, 2, 4, 11, 99, 101, 2999, 3002, 5_000_002, 2**63} | set(seqs))
    q_times = sorted({0, 1_699_999_999, 1_700_000_061, 1_700_000_179, 1_760_000_000, 1_900_000_000} | set(times))
    theirs = official.run_json(OFFICIAL_WRITE_AND_LOOK_UP, str(tmp_path), json.dumps(q_seqs), json.dumps(q_times), "read")
    ours = _ours(tmp_path, q_seqs, q_times)
    for i, q in enumerate(q_seqs):  # duplicate keys: both searches may land on either copy
        if seqs.count(q) < 2:
            assert ours["ts"][i] == theirs["ts"][i], q
    for i, t in enumerate(q_times):
        if times.count(t) < 2:
            assert ours["seq"][i] == theirs["seq"][i], t
    assert ours["ts"][q_seqs.index(4)] == [1_700_000_060, 1_700_000_120]


def test_corrupt_tracker_bytes_raise_corruption_naming_the_manifest(official, tmp_path_factory) -> None:
    root = tmp_path_factory.mktemp("corrupt")  # outside tmp_path: the after-test check would refuse it
    official.run_json(OFFICIAL_WRITE_AND_LOOK_UP, str(root), "[]", "[]", "write")
    _, data = _latest(root)
    good = decode_manifest_v2(data, "m").sequence_tracker
    store = LocalStore(str(root / "db"))
    for bad in (b"\x02" + good[1:], good[:-3], good[:5] + b"\xff" * 3):
        key = _write_tracker(root, bad)
        with pytest.raises(CorruptionError, match="sequence_tracker") as e:
            trio.run(admin.get_sequence_for_timestamp, store, 0, True)
        assert e.value.object_name == key
    shutil.rmtree(root)


def test_bad_arguments_fail_at_the_call(tmp_path) -> None:
    store = LocalStore(str(tmp_path))
    with pytest.raises(InvalidArgumentError, match="seq"):
        trio.run(admin.get_timestamp_for_sequence, store, -1, True)
    with pytest.raises(InvalidArgumentError, match="round_up"):
        trio.run(admin.get_sequence_for_timestamp, store, 5, "yes")
