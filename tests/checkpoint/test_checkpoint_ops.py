"""slatedb.checkpoint: RFC 000's procedures on the manifest (create from the current manifest or
from a source checkpoint, refresh, delete, list), expiry, lost CAS races, refused states."""

from __future__ import annotations

import uuid

import attrs
import pytest
import trio

from slatedb.checkpoint import (
    CheckpointOptions,
    active_checkpoints,
    create_checkpoint,
    delete_checkpoint,
    format_duration,
    is_expired,
    list_checkpoints,
    parse_duration,
    refresh_checkpoint,
)
from slatedb.errors import CheckpointNotFoundError, InvalidArgumentError, InvalidDbStateError, NotFoundError
from slatedb.format.manifest import encode_manifest
from slatedb.format.types import ManifestV2
from slatedb.manifest.store import ManifestStore, manifest_key
from slatedb.objstore.base import OVERWRITE
from slatedb.objstore.memory import MemoryBucket, MemoryStore

from .helpers import ClockRuntime, manifest_at


def new_db(manifest: ManifestV2 = ManifestV2(initialized=True, writer_epoch=1)) -> tuple[MemoryStore, ClockRuntime]:
    rt = ClockRuntime()
    store = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://ckpt")
    store.put_now(manifest_key(1), encode_manifest(manifest))
    return store, rt


def run(fn, *args, **kwargs):
    return trio.run(lambda: fn(*args, **kwargs))


def latest_id(store: MemoryStore) -> int:
    return max(int(m.key[len("manifest/"):].split(".")[0]) for m in store.list_now("manifest/"))


def test_create_from_the_current_manifest_pins_the_manifest_that_adds_it():
    store, rt = new_db()
    ms = ManifestStore(store, rt)
    got = run(create_checkpoint, ms, rt, CheckpointOptions(name="nightly"))
    assert got.manifest_id == 2 == latest_id(store)
    (cp,) = manifest_at(store, 2).checkpoints
    assert (cp.id, cp.manifest_id, cp.name, cp.metadata) == (got.id, 2, "nightly", None)
    assert cp.id.version == 4
    assert cp.checkpoint_expire_time_s == 0  # no lifetime: never expires
    assert cp.checkpoint_create_time_s == rt.now // 1000
    # The rest of the manifest is carried over unchanged.
    assert attrs.evolve(manifest_at(store, 2), checkpoints=()) == manifest_at(store, 1)


def test_lifetime_and_expiry_semantics():
    store, rt = new_db()
    ms = ManifestStore(store, rt)
    rt.now = 1_700_000_000_500  # half a second past a whole second: the expiry rounds up
    got = run(create_checkpoint, ms, rt, CheckpointOptions(lifetime_s=parse_duration("1min 30s")))
    (cp,) = run(list_checkpoints, ms)
    assert cp.id == got.id and cp.checkpoint_expire_time_s == 1_700_000_091
    assert not is_expired(cp, 1_700_000_091)  # expired only once the expire time is older than now
    assert is_expired(cp, 1_700_000_092)
    assert active_checkpoints(manifest_at(store, 2), 1_700_000_092) == ()
    # An expired checkpoint is still listed until GC removes it.
    rt.advance(3600)
    assert [c.id for c in run(list_checkpoints, ms)] == [got.id]
    with pytest.raises(InvalidArgumentError):
        CheckpointOptions(lifetime_s=0)
    assert CheckpointOptions(lifetime_s=0.5).lifetime_s == 0.5  # any positive lifetime, under a second too
    for bad in (float("nan"), float("inf"), -1, "60"):
        with pytest.raises(InvalidArgumentError, match="lifetime_s"):
            CheckpointOptions(lifetime_s=bad)
    # the expiry is a u32 of seconds: a lifetime of 2**32 - 1 s or more is refused at the call
    # (any int or float spelling of it), one second less is accepted
    for absurd in (2**32 - 1, 2**32, float(2**32 + 7), 10**12):
        with pytest.raises(InvalidArgumentError):
            CheckpointOptions(lifetime_s=absurd)
    assert CheckpointOptions(lifetime_s=2**32 - 2).lifetime_s == 2**32 - 2
    assert parse_duration("7days 30min 10s") == 7 * 86400 + 1810 and format_duration(93610) == "1day 2h 10s"
    assert [format_duration(s) for s in (0, 0.9, -5, 1, 60, 2 * 86400)] == ["0s", "0s", "0s", "1s", "1min", "2days"]
    assert parse_duration("10") == 10.0  # a bare number is seconds (issue 16 item 5)
    # ... with any whitespace the grammar's \s allows around it (the number alone is converted:
    # float() itself refuses the ASCII separators \x1c-\x1f that \s matches).
    assert parse_duration(" 2.5\t") == 2.5 and parse_duration("\x1f10\x1c") == 10.0
    assert parse_duration("2w 1d") == 15 * 86400 and parse_duration("1 week") == 7 * 86400
    for bad in ("", "7 parsecs", "-10", "abc"):
        with pytest.raises(InvalidArgumentError):
            parse_duration(bad)
    # The error names where the text stops making sense: all of it when nothing at its start does.
    with pytest.raises(InvalidArgumentError, match=r"malformed duration 'x 5s' at 'x 5s'"):
        parse_duration("x 5s")
    with pytest.raises(InvalidArgumentError, match=r"malformed duration '5s x' at 'x'"):
        parse_duration("5s x")


def test_create_from_a_source_checkpoint_copies_its_manifest_id():
    store, rt = new_db()
    ms = ManifestStore(store, rt)
    src = run(create_checkpoint, ms, rt, CheckpointOptions(lifetime_s=60, name="src"))
    copy = run(create_checkpoint, ms, rt, CheckpointOptions(source=src.id, name="copy"))
    assert copy.manifest_id == src.manifest_id == 2 and copy.id != src.id and latest_id(store) == 3
    by_id = {c.id: c for c in run(list_checkpoints, ms)}
    assert by_id[copy.id].checkpoint_expire_time_s == 0 and by_id[copy.id].name == "copy"
    with pytest.raises(CheckpointNotFoundError):
        run(create_checkpoint, ms, rt, CheckpointOptions(source=uuid.uuid4()))
    rt.advance(61)
    with pytest.raises(InvalidDbStateError, match="expired"):
        run(create_checkpoint, ms, rt, CheckpointOptions(source=src.id))
    assert latest_id(store) == 3  # refused: nothing written


def test_refresh_sets_a_new_expiry_or_none():
    store, rt = new_db()
    ms = ManifestStore(store, rt)
    got = run(create_checkpoint, ms, rt, CheckpointOptions(lifetime_s=10))
    rt.advance(5)  # not expired yet: refreshed
    new = run(refresh_checkpoint, ms, rt, got.id, 3600)
    assert new.checkpoint_expire_time_s == rt.now // 1000 + 3600 and new.manifest_id == got.manifest_id
    assert run(refresh_checkpoint, ms, rt, str(got.id), None).checkpoint_expire_time_s == 0
    assert [c.checkpoint_expire_time_s for c in run(list_checkpoints, ms)] == [0]
    with pytest.raises(CheckpointNotFoundError) as e:
        run(refresh_checkpoint, ms, rt, uuid.uuid4(), 10)
    assert isinstance(e.value, NotFoundError)
    with pytest.raises(InvalidArgumentError, match="not a UUID"):
        run(refresh_checkpoint, ms, rt, "not-a-uuid", 10)
    with pytest.raises(InvalidArgumentError):
        run(refresh_checkpoint, ms, rt, got.id, -5)


def test_an_expired_checkpoint_is_not_revived_by_a_refresh():
    """checkpoints-gc.md step 3 (GC-2; gc seed 1246): expired but not yet collected, a checkpoint
    may already be counted out by a GC pass that is deleting the manifest it pins; a refresh
    landing then is refused (CheckpointExpiredError, a CheckpointNotFoundError) and writes
    nothing."""
    from slatedb.errors import CheckpointExpiredError

    store, rt = new_db()
    ms = ManifestStore(store, rt)
    got = run(create_checkpoint, ms, rt, CheckpointOptions(lifetime_s=10))
    rt.advance(12)
    before = latest_id(store)
    with pytest.raises(CheckpointExpiredError, match="expired at") as e:
        run(refresh_checkpoint, ms, rt, got.id, 3600)
    assert isinstance(e.value, CheckpointNotFoundError) and latest_id(store) == before


def test_delete_and_list_by_name():
    store, rt = new_db()
    ms = ManifestStore(store, rt)
    a = run(create_checkpoint, ms, rt, CheckpointOptions(name="x"))
    b = run(create_checkpoint, ms, rt, CheckpointOptions(name="x"))
    c = run(create_checkpoint, ms, rt, CheckpointOptions(name="y"))
    run(create_checkpoint, ms, rt, CheckpointOptions())
    assert [k.id for k in run(list_checkpoints, ms, "x")] == [a.id, b.id]  # names are not unique
    assert [k.id for k in run(list_checkpoints, ms, "y")] == [c.id]
    assert run(list_checkpoints, ms, "nope") == [] and len(run(list_checkpoints, ms)) == 4
    run(delete_checkpoint, ms, rt, a.id)
    assert [k.id for k in run(list_checkpoints, ms, "x")] == [b.id]
    before = latest_id(store)
    with pytest.raises(CheckpointNotFoundError):
        run(delete_checkpoint, ms, rt, a.id)
    run(delete_checkpoint, ms, rt, a.id, missing_ok=True)
    assert latest_id(store) == before  # nothing to delete: nothing written


class RacingStore(MemoryStore):
    """Before the next ``n`` manifest creates, a concurrent writer commits that very id first
    (bumping ``writer_epoch``): each create loses its CAS race."""

    races = 0

    async def put(self, key, data, mode=OVERWRITE):
        if key.startswith("manifest/") and self.races > 0:
            self.races -= 1
            prev = manifest_at(self, latest_id(self))
            self.put_now(key, encode_manifest(attrs.evolve(prev, writer_epoch=prev.writer_epoch + 1)))
        return await super().put(key, data, mode)


def test_a_lost_cas_race_retries_from_a_fresh_read():
    rt = ClockRuntime()
    store = RacingStore(MemoryBucket(), rt.now_ms, url="memory://race")
    store.put_now(manifest_key(1), encode_manifest(ManifestV2(initialized=True, writer_epoch=1)))
    ms = ManifestStore(store, rt)
    store.races = 2
    got = run(create_checkpoint, ms, rt, CheckpointOptions(name="r"))
    # Manifests 2 and 3 were the concurrent writer's; ours is 4, on top of both of its changes.
    assert got.manifest_id == 4 == latest_id(store)
    m = manifest_at(store, 4)
    assert m.writer_epoch == 3 and [c.id for c in m.checkpoints] == [got.id]
    store.races = 1
    run(delete_checkpoint, ms, rt, got.id)
    assert manifest_at(store, 6).checkpoints == () and manifest_at(store, 6).writer_epoch == 4


@pytest.mark.parametrize("state", [{"initialized": False}, {"destroyed_at_s": 1_600_000_000}])
def test_uninitialized_or_destroyed_databases_are_refused(state):
    store, rt = new_db(ManifestV2(initialized=True))
    ms = ManifestStore(store, rt)
    src = run(create_checkpoint, ms, rt, CheckpointOptions())
    m = manifest_at(store, 2)
    store.put_now(manifest_key(3), encode_manifest(attrs.evolve(m, **state)))
    with pytest.raises(InvalidDbStateError):
        run(create_checkpoint, ms, rt, CheckpointOptions())
    if "destroyed_at_s" in state:
        with pytest.raises(InvalidDbStateError, match="destroyed"):
            run(create_checkpoint, ms, rt, CheckpointOptions(source=src.id))
    assert latest_id(store) == 3


def test_no_database_at_all():
    rt = ClockRuntime()
    ms = ManifestStore(MemoryStore(MemoryBucket(), rt.now_ms), rt)
    with pytest.raises(InvalidDbStateError, match="no manifest"):
        run(list_checkpoints, ms)
    # ... nor for a checkpoint: a database destroyed and removed by GC meanwhile is refused as not
    # there, not reported as corruption (destroy seed 99: CorruptionError escaped the admin)
    with pytest.raises(InvalidDbStateError, match="no database at .*destroyed and removed"):
        run(create_checkpoint, ms, rt, CheckpointOptions())


@pytest.mark.parametrize("text, seconds", [
    ("1ns", 1e-9), ("1us", 1e-6), ("1ms", 1e-3), ("1s", 1.0), ("1min", 60.0), ("1h", 3_600.0),
    ("1d", 86_400.0), ("1w", 604_800.0), ("1M", 2_630_016.0), ("1y", 31_557_600.0),
])
def test_each_unit_is_humantimes(text, seconds) -> None:
    """The official CLI's humantime units, exactly (a month is 30.44 days, a year 365.25)."""
    assert parse_duration(text) == seconds


def test_new_checkpoint_takes_the_given_id_or_mints_a_fresh_one():
    from slatedb.checkpoint import new_checkpoint

    rt = ClockRuntime()
    given = uuid.uuid4()
    mine = new_checkpoint(rt, 7, lifetime_s=60, name="n", checkpoint_id=given)
    assert (mine.id, mine.manifest_id, mine.name) == (given, 7, "n")
    assert mine.checkpoint_expire_time_s == rt.now // 1000 + 60
    fresh = new_checkpoint(rt, 7)
    assert isinstance(fresh.id, uuid.UUID) and fresh.id != given and fresh.checkpoint_expire_time_s == 0


def test_a_long_duration_text_parses_to_its_end():
    """The parser walks the text term by term to its end, however long (positions past 256 are
    plain ints like any other: compared by value)."""
    text = " ".join(["1s"] * 150)  # 449 characters
    assert len(text) > 256 and parse_duration(text) == 150.0
    assert parse_duration("2days 3h") == 2 * 86400 + 3 * 3600 and format_duration(2 * 86400 + 3 * 3600) == "2days 3h"


def test_a_create_with_a_given_id_reports_the_checkpoint_it_adds_not_one_already_there():
    """The ``checkpoint_create`` event (the trace's record of a new checkpoint) comes once: for
    the create that adds it, not for a repeat with the same ``checkpoint_id`` (a clone's final
    checkpoint, RFC 000 "Clones"), which finds it in the latest manifest and writes nothing."""
    class Recording(ClockRuntime):
        def __init__(self) -> None:
            super().__init__()
            self.created: list[dict] = []

        def event(self, kind: str, **fields) -> None:
            if kind == "checkpoint_create":
                self.created.append(fields)

    rt = Recording()
    store = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://ckpt")
    store.put_now(manifest_key(1), encode_manifest(ManifestV2(initialized=True, writer_epoch=1)))
    ms = ManifestStore(store, rt)
    given = uuid.uuid4()
    first = run(create_checkpoint, ms, rt, CheckpointOptions(), checkpoint_id=given)
    reported = [{"id": str(given), "manifest_id": 2, "expire_s": 0}]
    assert first.id == given and rt.created == reported
    again = run(create_checkpoint, ms, rt, CheckpointOptions(), checkpoint_id=given)
    assert again == first and latest_id(store) == 2  # the repeat wrote nothing ...
    assert rt.created == reported  # ... and reported nothing
