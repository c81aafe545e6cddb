"""Every integer and duration setting has an upper bound, refused at the call with an
InvalidArgumentError naming the setting: the official engine's type (u64, or u32 for
``min_filter_keys`` and ``object_store_max_retries``; a duration at most u64 nanoseconds), or
less where the format says so. Found passing boundary values: ``min_filter_keys=2**32``,
``l0_max_ssts=2**64`` and ``flush_interval="1000000y"`` were accepted (the official ``Settings``
refuses all three), ``flush_interval=1e300`` died in the error message with an OverflowError,
a duration of 400 digits with another, and ``filter_bits_per_key=100000`` opened and then
stopped the database at its first L0 flush ("'H' format requires 0 <= number <= 65535")."""

from __future__ import annotations

import json

import attrs
import pytest

import slatedb
from slatedb.config import MAX_DURATION_S, MAX_FILTER_BITS_PER_KEY, U32_MAX, U64_MAX, Settings
from slatedb.errors import InvalidArgumentError
from slatedb.reader import DbReaderOptions

#: The settings the official 0.17 wheel types u32 (probed: 2**32 - 1 accepted, 2**32 refused);
#: every other integer setting of it is u64.
OFFICIAL_U32 = {"min_filter_keys", "compactor_options.worker.min_filter_keys", "object_store_max_retries",
                "compactor_options.object_store_max_retries", "garbage_collector_options.object_store_max_retries"}


def _fields(cls: type = Settings, prefix: str = ""):
    for f in attrs.fields(cls):
        kind = f.metadata["kind"]
        if kind == "nested":
            yield from _fields(f.metadata["cls"], prefix + f.name + ".")
        elif kind in ("int", "duration"):
            yield prefix + f.name, f


def _nest(name: str, value) -> dict:
    out: dict = {}
    node = out
    *parents, last = name.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value
    return out


INTS = [(n, f) for n, f in _fields() if f.metadata["kind"] == "int"]
DURATIONS = [(n, f) for n, f in _fields() if f.metadata["kind"] == "duration"]


@pytest.mark.parametrize("name,field", INTS, ids=[n for n, _ in INTS])
def test_every_integer_setting_refuses_a_value_above_its_bound_naming_it(name, field) -> None:
    hi = field.metadata["max"]
    assert hi is not None
    if not field.metadata["ours"] and name != "default_ttl_millis":
        assert hi == (U32_MAX if name in OFFICIAL_U32 else U64_MAX), name
    for bad in (hi + 1, 2**100):
        with pytest.raises(InvalidArgumentError, match=f"setting {name} must be at most {hi}"):
            Settings.from_dict(_nest(name, bad))
    with pytest.raises(InvalidArgumentError, match=f"setting {name} must be at least"):
        Settings.from_dict(_nest(name, -1))


@pytest.mark.parametrize("name,field", DURATIONS, ids=[n for n, _ in DURATIONS])
def test_every_duration_setting_refuses_one_past_u64_nanoseconds(name, field) -> None:
    hi = field.metadata["max"]
    assert hi is not None and hi <= MAX_DURATION_S
    for bad in (hi + 1, 1e300, "1000000y"):
        with pytest.raises(InvalidArgumentError, match=f"setting {name} must be at most"):
            Settings.from_dict(_nest(name, bad))
    with pytest.raises(InvalidArgumentError, match=f"setting {name}: duration .* is too long"):
        Settings.from_dict(_nest(name, "9" * 400 + "s"))


def test_the_bounds_themselves_are_accepted() -> None:
    s = Settings.from_dict({"l0_max_ssts": U64_MAX, "min_filter_keys": U32_MAX, "flush_interval": "18446744073s",
                            "filter_bits_per_key": MAX_FILTER_BITS_PER_KEY, "object_store_max_retries": U32_MAX})
    assert Settings.from_dict(s.to_dict()) == s


def test_the_most_filter_bits_per_key_flush_and_read_back(tmp_path) -> None:
    """At the bound the filter's probe count is 65535 (its u16's largest); one more refused at
    the open, where it was an error of the background L0 flush."""
    with pytest.raises(InvalidArgumentError, match="filter_bits_per_key must be at most 94979"):
        slatedb.Db.open(f"file://{tmp_path}/no", {"filter_bits_per_key": MAX_FILTER_BITS_PER_KEY + 1})
    with slatedb.Db.open(f"file://{tmp_path}/db", {"compactor_options": None, "min_filter_keys": 1,
                                                   "filter_bits_per_key": MAX_FILTER_BITS_PER_KEY}) as db:
        for i in range(3):
            db.put(b"k%d" % i, b"v")
        db.flush(wal=False)
        assert db.get(b"k1") == b"v" and db.get(b"k9") is None


def test_reader_options_max_memtable_bytes_is_a_u64() -> None:
    assert DbReaderOptions(max_memtable_bytes=U64_MAX).max_memtable_bytes == U64_MAX
    with pytest.raises(InvalidArgumentError, match="max_memtable_bytes must be at most"):
        DbReaderOptions(max_memtable_bytes=U64_MAX + 1)


@pytest.mark.interop
def test_the_official_wheel_draws_the_same_lines(tmp_path) -> None:
    """Each official integer setting at our bound is accepted by the official ``Settings`` and
    one above it refused; the longest duration alike."""
    from tests.interop.official import Official, OfficialUnavailable, ensure_official_venv

    try:
        official = Official(ensure_official_venv())
    except OfficialUnavailable as e:  # pragma: no cover
        pytest.skip(str(e))
    cases = [(n, f.metadata["max"]) for n, f in INTS if not f.metadata["ours"] and n != "default_ttl_millis"]
    cases.append(("flush_interval", "18446744073s"))
    out = official.run_json(
        "def ok(k, v):\n"
        "    s = u.Settings.default()\n"
        "    try:\n"
        "        s.set(k, json.dumps(v)); return True\n"
        "    except u.Error.Invalid:\n"
        "        return False\n"
        "emit([[ok(k, v), ok(k, v + 1 if isinstance(v, int) else '18446744074s')] for k, v in json.loads(sys.argv[1])])\n",
        json.dumps(cases),
    )
    assert out == [[True, False]] * len(cases), list(zip(cases, out))


def test_spark_size_options_are_u64_too() -> None:
    from slatedb.spark.options import parse_options

    assert parse_options({"url": "memory://x", "sst_size_bytes": str(U64_MAX)}, writing=True).sst_size_bytes == U64_MAX
    with pytest.raises(InvalidArgumentError, match="sst_size_bytes"):
        parse_options({"url": "memory://x", "sst_size_bytes": str(U64_MAX + 1)}, writing=True)
    with pytest.raises(InvalidArgumentError, match="batch_rows"):
        parse_options({"url": "memory://x", "batch_rows": str(2**100)})


@pytest.mark.parametrize("poll", [1e-9, 0.0001, 0.000999])
def test_a_reader_poll_interval_below_a_millisecond_is_refused_as_a_db_interval_is(poll) -> None:
    """``DbReaderOptions(manifest_poll_interval_s=1e-9, checkpoint_lifetime_s=1)`` was accepted:
    a managed reader then polled the store without pause (each round a manifest list and read).
    Every interval setting of a Db is at least 1 ms, the official ReaderOptions' unit."""
    with pytest.raises(InvalidArgumentError, match="manifest_poll_interval_s must be at least 0.001"):
        DbReaderOptions(manifest_poll_interval_s=poll, checkpoint_lifetime_s=1)
    assert DbReaderOptions(manifest_poll_interval_s=0.001, checkpoint_lifetime_s=1).manifest_poll_interval_s == 0.001
