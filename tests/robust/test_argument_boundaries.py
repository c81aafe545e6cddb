"""No foreground argument can kill a background task (issue 25 item 2).

Before: ``db.put(k, v, ttl=1e30)`` was accepted, the background WAL flush died
(``struct.error: int too large to convert``), every later call raised ``ClosedError: the database
was aborted`` and the writes pending in that flush were lost. Zero intervals were accepted and an
idle writer then burnt a core. ``put(durable='yes')`` and ``flush(wal='x')`` were accepted.

Here every public write/read argument gets its boundary values (hypothesis): each call either
succeeds or raises :class:`InvalidArgumentError` at the call, and the database stays usable: a
durable probe write after every example is acknowledged and read back.
"""

from __future__ import annotations

import math

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slatedb
from slatedb import admin
from slatedb.batch import MAX_EXPIRE_TS_MS, MAX_TTL_S
from slatedb.errors import InvalidArgumentError, SlateDBError
from slatedb.objstore import resolve_store

NUMBERS = st.sampled_from([
    0, -1, -0.0, 1e-9, 1e-3, 0.5, 1, 2**31, 2**32, 2**53, MAX_TTL_S, MAX_TTL_S + 1, 2**62, 2**63 // 1000,
    2**63, 2**64, 1e30, 1e300, math.inf, -math.inf, math.nan, True, False, None, "1", b"1",
])
INTS = st.sampled_from([0, -1, 1, 2**31, 2**53, MAX_EXPIRE_TS_MS, MAX_EXPIRE_TS_MS + 1, 2**64, None, 1.5, True, "5"])
KEYS = st.sampled_from([b"", b"k", b"\x00", b"\xff" * 300, "str", None, 5, bytearray(b"ba"), memoryview(b"mv")])
VALUES = st.sampled_from([b"", b"v", b"\x00" * 5000, "str", None, 5, bytearray(b"ba")])
FLAGS = st.sampled_from([True, False, None, 0, 1, "yes", "", "x"])

CALLS = st.one_of(
    st.tuples(st.just("put"), KEYS, VALUES, NUMBERS, INTS, FLAGS),
    st.tuples(st.just("delete"), KEYS, FLAGS),
    st.tuples(st.just("flush"), FLAGS),
    st.tuples(st.just("get"), KEYS),
    st.tuples(st.just("scan"), KEYS, KEYS),
    st.tuples(st.just("batch"), KEYS, VALUES, NUMBERS, FLAGS),
)


@pytest.fixture(scope="module")
def db():
    d = slatedb.Db.open("memory://argument-boundaries/db",
                        settings={"flush_interval": "5ms", "compactor_options": None, "l0_sst_size_bytes": 4096})
    yield d
    d.close()


def _call(db, call) -> None:
    name, *args = call
    if name == "put":
        key, value, ttl, expire_at, durable = args
        if expire_at is not None and ttl is not None:
            expire_at = None
        db.put(key, value, ttl, durable=durable, expire_at_ms=expire_at)
    elif name == "delete":
        db.delete(args[0], durable=args[1])
    elif name == "flush":
        db.flush(wal=args[0])
    elif name == "get":
        db.get(args[0])
    elif name == "scan":
        list(db.scan(args[0], args[1]))
    elif name == "batch":
        key, value, ttl, durable = args
        b = slatedb.WriteBatch()
        b.put(key, value, ttl)
        db.write(b, durable=durable)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(call=CALLS)
def test_every_argument_is_refused_at_the_call_or_accepted_and_the_database_lives(db, call) -> None:
    try:
        _call(db, call)
    except InvalidArgumentError:
        pass  # refused at the call, typed
    db.put(b"probe", repr(call).encode()[:100], durable=True)  # the background flush still works
    assert db.get(b"probe") == repr(call).encode()[:100]


@pytest.mark.parametrize("bad", [dict(ttl=1e30), dict(ttl=2**62), dict(expire_at_ms=2**63), dict(durable="yes")])
def test_the_reported_values_are_refused_at_the_call(db, bad) -> None:
    with pytest.raises(InvalidArgumentError):
        db.put(b"k", b"v", **bad)
    with pytest.raises(InvalidArgumentError):
        db.flush(wal="x")
    db.put(b"after", b"1", durable=True)


@pytest.mark.parametrize("setting", [{"flush_interval": 0}, {"manifest_poll_interval": "0s"},
                                     {"compactor_options": {"poll_interval": "0ms"}},
                                     {"garbage_collector_options": {"wal_options": {"interval": 0}}},
                                     {"default_ttl_millis": 2**63}])
def test_zero_intervals_and_out_of_range_settings_are_refused(setting) -> None:
    with pytest.raises(InvalidArgumentError):
        slatedb.Settings.from_dict(setting)


def test_a_background_task_that_fails_anyway_closes_the_database_naming_the_error(monkeypatch) -> None:
    """An engine bug in a background task: the database stops with the original error named
    (not 'aborted'), and what was acknowledged durable before is still there on reopen."""
    import slatedb.wal.writer as wal_writer

    url = "memory://argument-boundaries/broken"
    db = slatedb.Db.open(url, settings={"flush_interval": "5ms", "compactor_options": None})
    db.put(b"before", b"1", durable=True)

    def broken(*a, **k):
        raise OverflowError("an encoder bug")

    monkeypatch.setattr(wal_writer, "encode_wal_sst_fast", broken)
    with pytest.raises(SlateDBError) as e:
        db.put(b"after", b"2", durable=True)
    assert "OverflowError" in str(e.value) and "an encoder bug" in str(e.value), str(e.value)
    with pytest.raises(SlateDBError, match="an encoder bug"):
        db.put(b"again", b"3")
    db.abort()
    monkeypatch.undo()
    with slatedb.Db.open(url, settings={"compactor_options": None}) as again:
        assert again.get(b"before") == b"1"


@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_is_not_a_checkpoint_lifetime_or_a_manifest_id(tmp_path, flag) -> None:
    """Found trying boundary values: ``CheckpointOptions(lifetime_s=True)`` made a checkpoint
    that expired after 1 s (``False``: refused as "not positive", by accident), where every other
    number argument (a put's ``ttl``, a setting, ``DbReaderOptions``) refuses a bool; the admin
    API's ``refresh_checkpoint(store, id, True)`` alike, and ``read_manifest(store, True)``
    returned manifest 1 as a ``StoredManifest`` whose id was ``True``."""
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        with pytest.raises(InvalidArgumentError, match="lifetime_s must be a positive number of seconds, got"):
            db.create_checkpoint(options=slatedb.CheckpointOptions(lifetime_s=flag))
        cp = db.create_checkpoint()
    store = resolve_store(url)
    with pytest.raises(InvalidArgumentError, match="lifetime_s"):
        trio.run(admin.refresh_checkpoint, store, cp.id, flag)
    with pytest.raises(InvalidArgumentError, match="manifest id must be an integer"):
        trio.run(admin.read_manifest, store, flag)
    assert trio.run(admin.read_manifest, store, 1).id == 1


@pytest.mark.parametrize("lifetime", [2**32, 2**40, "99999999999999999999d"])
def test_a_compactor_checkpoint_lifetime_past_the_manifest_range_is_refused_at_the_call(lifetime) -> None:
    """``compactor_options.checkpoint_lifetime`` is the lifetime of the checkpoint the compactor
    writes with its epoch claim and each commit, whose expiry the manifest holds as u32 seconds.
    Found trying boundary values: ``2**40`` was accepted, and the compactor's first manifest
    write failed in the flatbuffer encoder ("bad number ... for type uint32"), aborting the
    database ("the database was aborted") a moment after the open."""
    with pytest.raises(InvalidArgumentError, match="checkpoint_lifetime"):
        slatedb.Settings.from_dict({"compactor_options": {"checkpoint_lifetime": lifetime}})


def test_a_compactor_checkpoint_lifetime_near_the_top_of_the_range_runs_and_pins_until_2106() -> None:
    """The longest lifetime accepted (below 2^32 s) is an internal pin's: its expiry is held at
    the top of the manifest's range (2106) rather than past it, and the database lives."""
    from slatedb.manifest.checkpoints import MAX_U32

    url = "memory://argument-boundaries/long-pin"
    settings = {"flush_interval": "5ms", "l0_sst_size_bytes": 4096,
                "compactor_options": {"poll_interval": "10ms", "checkpoint_lifetime": MAX_U32 - 1}}
    with slatedb.Db.open(url, settings=settings) as db:
        for i in range(2000):
            db.put(b"k%05d" % i, b"v" * 30)
        db.flush(wal=False)
        db.put(b"after", b"1", durable=True)
        assert db.get(b"k00007") == b"v" * 30
    store = resolve_store(url)
    pins = [c for c in trio.run(admin.list_checkpoints, store) if c.checkpoint_expire_time_s]
    assert pins and all(c.checkpoint_expire_time_s == MAX_U32 for c in pins)
