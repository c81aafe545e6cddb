"""Settings: official names/defaults, loading from dict/file/env, validation, round trips."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from slatedb.config import OUR_SETTINGS, Settings, format_duration, parse_duration
from slatedb.errors import InvalidArgumentError

OFFICIAL_DEFAULT = Path(__file__).parent / "data" / "official_settings_default.json"


def test_defaults_match_the_official_wheels_dump():
    # tests/db/data/official_settings_default.json = Settings.default().to_json_string() of 0.17.0
    official = json.loads(OFFICIAL_DEFAULT.read_text())
    s = Settings()
    assert s.to_official_dict() == official
    assert Settings.from_dict(official) == s


def test_headline_defaults():
    s = Settings.default()
    assert s.flush_interval == 0.1 and s.manifest_poll_interval == 1.0
    assert s.manifest_update_timeout == 300.0
    assert s.min_filter_keys == 1000 and s.l0_sst_size_bytes == 64 * 2**20 and s.l0_max_ssts == 8
    assert s.max_unflushed_bytes == 2**30 and s.compression_codec is None and s.default_ttl_millis is None
    assert s.compactor_options.poll_interval == 5.0
    assert s.compactor_options.max_concurrent_compactions == 4
    assert s.compactor_options.worker.max_sst_size == 256 * 2**20
    gc = s.garbage_collector_options
    for d in (gc.manifest_options, gc.wal_options, gc.compacted_options, gc.compactions_options):
        assert (d.interval, d.min_age, d.dry_run) == (600.0, 300.0, False)
    assert gc.wal_fence_options.dry_run is True
    assert (s.block_size_bytes, s.filter_bits_per_key) == (4096, 10)
    assert set(OUR_SETTINGS) == {"block_size_bytes", "filter_bits_per_key", "block_cache_size_bytes"}
    assert not set(OUR_SETTINGS) & set(s.to_official_dict())


@pytest.mark.parametrize(
    "text, seconds",
    [("100ms", 0.1), ("1s", 1), ("300s", 300), ("050ms", 0.05), ("1s+500ms", 1.5), ("1h 2m", 3720),
     ("1m30s", 90), ("5us", 5e-6), ("7ns", 7e-9), ("1mon", 2592000), ("1y", 31536000), ("2 days", 172800)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "1.5s", "10", "ms", "1 parsec", "-1s"])
def test_parse_duration_rejects(bad):
    with pytest.raises(InvalidArgumentError):
        parse_duration(bad)


@pytest.mark.parametrize(
    "seconds, text", [(0.1, "100ms"), (1, "1s"), (0, "0s"), (0.05, "050ms"), (1.5, "1s+500ms"), (1.0015, "1s+001ms"), (5e-6, "0s")]
)
def test_format_duration_like_the_official_serializer(seconds, text):
    assert format_duration(seconds) == text


def test_from_dict_partial_numbers_and_strings():
    s = Settings.from_dict({"flush_interval": "50ms", "manifest_poll_interval": 2, "compactor_options": {"worker": {"max_sst_size": 1000}}})
    assert s.flush_interval == 0.05 and s.manifest_poll_interval == 2.0
    assert s.compactor_options.worker.max_sst_size == 1000
    assert s.compactor_options.poll_interval == 5.0
    assert Settings.from_dict({"compression_codec": "zstd"}).compression_codec == "Zstd"
    assert Settings.from_dict({"garbage_collector_options": {"wal_options": None}}).garbage_collector_options.wal_options is None
    assert Settings.from_dict({"default_ttl_millis": 42}).default_ttl_millis == 42


@pytest.mark.parametrize(
    "data, match",
    [
        ({"bogus": 1}, "unknown setting bogus"),
        ({"compactor_options": {"worker": {"nope": 1}}}, "unknown setting compactor_options.worker.nope"),
        ({"l0_max_ssts": 0}, "l0_max_ssts must be at least 1"),
        ({"l0_max_ssts": "8"}, "l0_max_ssts must be an integer"),
        ({"l0_max_ssts": True}, "l0_max_ssts must be an integer"),
        ({"wal_enabled": 1}, "wal_enabled must be true or false"),
        ({"flush_interval": "fast"}, "flush_interval"),
        ({"flush_interval": -1}, "flush_interval must be at least 0"),
        ({"flush_interval": None}, "flush_interval cannot be null"),
        ({"compression_codec": "brotli"}, "compression_codec must be one of"),
        ({"metric_level": "Trace"}, "metric_level must be one of"),
        ({"compactor_options": 3}, "compactor_options must be a table"),
        ({"compactor_options": {"scheduler_options": {"a": 1}}}, "scheduler_options"),
        ({"block_size_bytes": 0}, "block_size_bytes must be at least"),
    ],
)
def test_from_dict_rejects(data, match):
    with pytest.raises(InvalidArgumentError, match=match):
        Settings.from_dict(data)


def test_round_trips():
    s = attrs.evolve(Settings(), flush_interval=1.5, compression_codec="Lz4", block_size_bytes=8192)
    assert Settings.from_dict(s.to_dict()) == s
    assert Settings.from_json(s.to_json()) == s
    assert "block_size_bytes" not in s.to_official_dict()


def test_from_file_json_and_toml(tmp_path):
    j = tmp_path / "s.json"
    j.write_text(json.dumps({"flush_interval": "20ms", "l0_max_ssts": 3}))
    assert Settings.from_file(j).l0_max_ssts == 3
    t = tmp_path / "s.toml"
    t.write_text('flush_interval = "1m"\nblock_size_bytes = 8192\n[garbage_collector_options.wal_options]\nmin_age = "10s"\n')
    s = Settings.from_file(t)
    assert s.flush_interval == 60 and s.block_size_bytes == 8192
    assert s.garbage_collector_options.wal_options.min_age == 10
    assert s.garbage_collector_options.wal_options.interval == 600
    bad = tmp_path / "s.yaml"
    bad.write_text("x: 1")
    with pytest.raises(InvalidArgumentError, match=r"\.json or \.toml"):
        Settings.from_file(bad)
    broken = tmp_path / "b.json"
    broken.write_text("{")
    with pytest.raises(InvalidArgumentError, match="malformed"):
        Settings.from_file(broken)
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        Settings.from_file(tmp_path / "missing.json")


def test_from_env():
    env = {
        "SLATEDB_FLUSH_INTERVAL": "50ms",
        "SLATEDB_COMPACTOR_OPTIONS__WORKER__MAX_SST_SIZE": "1048576",
        "SLATEDB_COMPACTOR_OPTIONS__SCHEDULER_OPTIONS__MIN_COMPACTION_SOURCES": "4",
        "SLATEDB_WAL_ENABLED": "false",
        "SLATEDB_DEFAULT_TTL_MILLIS": "null",
        "SLATEDB_MANIFEST_POLL_INTERVAL": "2.5",
        "SLATEDB_COMPRESSION_CODEC": "Snappy",
        "OTHER": "ignored",
    }
    s = Settings.from_env(env)
    assert s.flush_interval == 0.05 and s.wal_enabled is False and s.manifest_poll_interval == 2.5
    assert s.compactor_options.worker.max_sst_size == 2**20
    assert s.compactor_options.scheduler_options == {"min_compaction_sources": "4"}
    assert s.compression_codec == "Snappy" and s.default_ttl_millis is None
    with pytest.raises(InvalidArgumentError, match="SLATEDB_BOGUS"):
        Settings.from_env({"SLATEDB_BOGUS": "1"})
    with pytest.raises(InvalidArgumentError, match="SLATEDB_L0_MAX_SSTS must be an integer"):
        Settings.from_env({"SLATEDB_L0_MAX_SSTS": "many"})
    with pytest.raises(InvalidArgumentError, match="l0_max_ssts must be at least 1"):
        Settings.from_env({"SLATEDB_L0_MAX_SSTS": "0"})
    with pytest.raises(InvalidArgumentError, match="has no sub-settings"):
        Settings.from_env({"SLATEDB_FLUSH_INTERVAL__X": "1"})
    assert Settings.from_env({"APP_L0_MAX_SSTS": "2"}, prefix="APP_").l0_max_ssts == 2


def test_load_precedence(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('flush_interval = "20ms"\nl0_max_ssts = 3\n[compactor_options]\npoll_interval = "7s"\n')
    env = {"SLATEDB_L0_MAX_SSTS": "5", "SLATEDB_COMPACTOR_OPTIONS__MAX_CONCURRENT_COMPACTIONS": "2"}
    s = Settings.load(f, env)
    assert s.flush_interval == 0.02  # file
    assert s.l0_max_ssts == 5  # env over file
    assert s.compactor_options.poll_interval == 7  # file, kept under env's nested override
    assert s.compactor_options.max_concurrent_compactions == 2
    assert s.manifest_poll_interval == 1.0  # default
    assert Settings.load() == Settings()


@pytest.mark.interop
def test_official_wheel_accepts_our_dump_and_agrees_on_defaults(tmp_path):
    from tests.interop.official import Official, OfficialUnavailable, ensure_official_venv

    try:
        official = Official(ensure_official_venv())
    except OfficialUnavailable as e:  # pragma: no cover
        pytest.skip(str(e))
    ours = attrs.evolve(Settings(), flush_interval=0.25, l0_max_ssts=3, compression_codec="Zstd")
    out = official.run_json(
        "s = u.Settings.from_json_string(sys.argv[1])\n"
        "emit([json.loads(u.Settings.default().to_json_string()), json.loads(s.to_json_string())])\n",
        json.dumps(ours.to_official_dict()),
    )
    default, echoed = out
    assert Settings.from_dict(default) == Settings()
    assert Settings.from_dict(echoed) == ours


@pytest.mark.parametrize("sub", ["compactor_options", "garbage_collector_options"])
def test_an_in_process_retry_bound_other_than_the_writers_is_refused_at_open(sub):
    """``<sub>.object_store_max_retries`` is a standalone process's setting: in-process, the
    compactor and GC share the writer's retry policy, so a different bound is refused at the call
    (design rule 5), and the same bound, or none, is accepted."""
    import slatedb

    with pytest.raises(InvalidArgumentError, match=f"{sub}.object_store_max_retries=3 applies to a standalone"):
        slatedb.Db.open("memory://retries-refused", settings={"object_store_max_retries": 5, sub: {"object_store_max_retries": 3}})
    for same in (5, None):
        with slatedb.Db.open(f"memory://retries-{same}", settings={"object_store_max_retries": 5,
                                                                   sub: {"object_store_max_retries": same}}):
            pass


@pytest.mark.parametrize("settings", [
    {"max_unflushed_bytes": 1},
    {"max_unflushed_bytes": 64 * 2**20},  # equal to the default l0_sst_size_bytes
    {"l0_sst_size_bytes": 1000, "max_unflushed_bytes": 1000},
])
def test_max_unflushed_bytes_not_above_l0_sst_size_bytes_is_refused_at_open(settings):
    """Found by trying settings at their bounds: ``max_unflushed_bytes=1`` was accepted and the
    first put then waited for good (writes wait while more than max_unflushed_bytes are
    unflushed; a memtable goes to L0 only once it holds l0_sst_size_bytes, so nothing ever made
    room). The official 0.17 builder refuses it with these words; so does ours, at the call
    (sync, asyncio, trio and the drop-in), before anything is started. A reader writes nothing
    and does not check it."""
    import trio

    import slatedb
    import slatedb.aio as aio

    words = (f"max_unflushed_bytes \\({settings['max_unflushed_bytes']}\\) must be greater than "
             f"l0_sst_size_bytes \\({settings.get('l0_sst_size_bytes', 64 * 2**20)}\\)")
    with pytest.raises(InvalidArgumentError, match=words):
        slatedb.Db.open("memory://unflushed-refused", settings)
    with pytest.raises(InvalidArgumentError, match=words):
        aio.Db.open("memory://unflushed-refused", settings)  # at the call, before any await

    async def under_trio() -> None:
        with pytest.raises(InvalidArgumentError, match=words):
            async with aio.Db.open("memory://unflushed-refused-trio", settings):
                pass

    trio.run(under_trio)


def test_max_unflushed_bytes_just_above_l0_sst_size_bytes_writes_past_it():
    """The smallest accepted pair, with rows far larger than either: every put returns (a
    memtable over l0_sst_size_bytes is cut and flushed, which makes room)."""
    import slatedb

    with slatedb.Db.open("memory://unflushed-just-above", {"l0_sst_size_bytes": 1000, "max_unflushed_bytes": 1001,
                                                           "flush_interval": "10ms"}) as db:
        for i in range(20):
            db.put(b"big%02d" % i, b"v" * 10_000)
            db.put(b"small%02d" % i, b"v")
        db.put(b"last", b"x", durable=True)
        assert sum(1 for _ in db.scan()) == 41


def test_an_unknown_keyword_of_settings_is_refused_like_an_unknown_key():
    """docs/db.md: ``Settings(...)`` refuses an unknown name with InvalidArgumentError, as the
    dict loader does. Found by a typo: ``Settings(flush_intervl="1s")`` raised attrs' bare
    TypeError, so a service catching ``slatedb.SlateDBError`` around its config did not catch it."""
    from slatedb.config import CompactorOptions

    with pytest.raises(InvalidArgumentError, match="unknown setting flush_intervl"):
        Settings(flush_intervl="1s")
    with pytest.raises(InvalidArgumentError, match="unknown setting poll_intervl"):
        CompactorOptions(poll_intervl=1.0)
    with pytest.raises(InvalidArgumentError, match="unknown setting flush_intervl"):
        attrs.evolve(Settings(), flush_intervl=0.5)
    assert Settings(flush_interval="10ms").flush_interval == 0.01  # known names as before
    assert attrs.evolve(Settings(), flush_interval=0.5).flush_interval == 0.5


def test_a_dotted_name_from_the_docs_table_says_how_to_nest_it():
    """A user copied ``compactor_options.poll_interval`` from docs/db.md's settings table into
    ``settings={...}`` (or ``SLATEDB_COMPACTOR_OPTIONS.POLL_INTERVAL`` into the environment) and
    got "unknown setting compactor_options.poll_interval", a name the table lists. The refusal
    stands (one spelling per setting, as the official loader's) and now says what to write; a
    near miss of a name is named, as for environment variables."""
    msg = r"unknown setting compactor_options\.poll_interval \(a nested setting goes in a nested table: " \
          r"\{'compactor_options': \{'poll_interval': \.\.\.\}\}, or \[compactor_options\] in TOML\)"
    with pytest.raises(InvalidArgumentError, match=msg):
        Settings.from_dict({"compactor_options.poll_interval": "1s"})
    with pytest.raises(InvalidArgumentError, match=r"\{'worker': \{'max_sst_size': \.\.\.\}\}\}, or \[compactor_options\.worker\]"):
        Settings.from_dict({"compactor_options.worker.max_sst_size": 1})
    with pytest.raises(InvalidArgumentError, match=r"unknown setting flush_intervall \(did you mean flush_interval\?\)"):
        Settings.from_dict({"flush_intervall": "1s"})
    with pytest.raises(InvalidArgumentError, match=r"did you mean compactor_options\.poll_interval\?"):
        Settings.from_dict({"compactor_options": {"poll_intervl": "1s"}})
    with pytest.raises(InvalidArgumentError, match=r"levels are separated by __: SLATEDB_COMPACTOR_OPTIONS__POLL_INTERVAL"):
        Settings.load(None, {"SLATEDB_COMPACTOR_OPTIONS.POLL_INTERVAL": "3s"})


@pytest.mark.parametrize("call", [
    lambda: Settings.from_file(5), lambda: Settings.from_file(None), lambda: Settings.load(5, {}),
    lambda: Settings.load(None, ["SLATEDB_FLUSH_INTERVAL=1s"]), lambda: Settings.from_env("SLATEDB_X=1"),
])
def test_a_path_or_environment_of_the_wrong_type_is_refused_naming_it(call):
    """Found trying wrong types: ``Settings.from_file(5)`` raised a bare ``TypeError`` from
    ``pathlib`` and ``Settings.load(None, ["..."])`` an ``AttributeError`` ('list' object has no
    attribute 'items'); both are ``InvalidArgumentError`` naming the argument now."""
    with pytest.raises(InvalidArgumentError, match="path|environ"):
        call()


def test_cut_after_any_row_is_ours_a_bool_left_out_of_the_official_settings():
    """``compactor_options.worker.cut_after_any_row`` (ours; compaction.md step 6): loaded and
    dumped like any setting, never written into the official shape, refused when not a bool."""
    s = Settings.from_dict({"compactor_options": {"worker": {"cut_after_any_row": True}}})
    assert s.compactor_options.worker.cut_after_any_row is True
    assert Settings().compactor_options.worker.cut_after_any_row is False
    assert Settings.from_dict(s.to_dict()) == s
    assert "cut_after_any_row" not in s.to_official_dict()["compactor_options"]["worker"]
    for bad in ("yes", 1, None):
        with pytest.raises(InvalidArgumentError, match="cut_after_any_row"):
            Settings.from_dict({"compactor_options": {"worker": {"cut_after_any_row": bad}}})
