"""Issue 16 item 4: ``Settings`` validates at construction exactly like the dict/file loader
(human durations parsed, negative intervals and string sizes refused), and every setting is
honoured or rejected: the official settings this engine does not implement are accepted only at
their official default (so the official engine's own dump still loads)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import pytest

import slatedb
from slatedb.config import NOT_IMPLEMENTED, CompactorOptions, GarbageCollectorOptions, Settings
from slatedb.errors import InvalidArgumentError

OFFICIAL_DUMP = Path(__file__).resolve().parents[1] / "db" / "data" / "official_settings_default.json"


def test_constructor_parses_human_durations_like_the_loader() -> None:
    s = Settings(flush_interval="10ms", manifest_poll_interval="1s+500ms")
    assert s.flush_interval == pytest.approx(0.01) and s.manifest_poll_interval == pytest.approx(1.5)
    assert s == Settings.from_dict({"flush_interval": "10ms", "manifest_poll_interval": "1s+500ms"})
    assert attrs.evolve(s, flush_interval="5ms").flush_interval == pytest.approx(0.005)


@pytest.mark.parametrize("kwargs, match", [
    ({"flush_interval": -1}, "flush_interval must be at least 0"),
    ({"flush_interval": "-5ms"}, "flush_interval"),
    ({"flush_interval": "soon"}, "flush_interval"),
    ({"l0_sst_size_bytes": "64MiB"}, "l0_sst_size_bytes must be an integer"),
    ({"l0_max_ssts": 0}, "l0_max_ssts must be at least 1"),
    # the block's u16 restart offsets bound it; before, the setting said "at least 64" and a
    # larger value was refused later by the SST writer as "must be in 1..65536"
    ({"block_size_bytes": 63}, "setting block_size_bytes must be at least 64, got 63"),
    ({"block_size_bytes": 65537}, "setting block_size_bytes must be at most 65536 \\(a block's u16 offsets\\), got 65537"),
    ({"wal_enabled": "yes"}, "wal_enabled must be true or false"),
    ({"compression_codec": "gzip"}, "compression_codec must be one of"),
    ({"compactor_options": {"poll_interval": -2}}, "compactor_options.poll_interval must be at least 0"),
    ({"compactor_options": "fast"}, "compactor_options must be a table"),
])
def test_constructor_rejects_what_the_loader_rejects(kwargs, match) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        Settings(**kwargs)
    with pytest.raises(InvalidArgumentError, match=match):
        Settings.from_dict(kwargs)


def test_nested_classes_validate_too() -> None:
    assert CompactorOptions(poll_interval="250ms").poll_interval == pytest.approx(0.25)
    with pytest.raises(InvalidArgumentError, match="poll_interval"):
        CompactorOptions(poll_interval=-1.0)
    assert Settings(compactor_options={"poll_interval": "2s"}).compactor_options.poll_interval == 2.0
    assert Settings(garbage_collector_options=GarbageCollectorOptions()).garbage_collector_options is not None


@pytest.mark.parametrize("options, match", [
    ({"min_compaction_sources": "0"}, r"scheduler_options: min_compaction_sources must be >= 1, got 0"),
    ({"max_compaction_sources": "2"}, r"max_compaction_sources \(2\) must be >= min_compaction_sources"),
    ({"include_size_threshold": "0.5"}, r"include_size_threshold must be >= 1.0"),
    ({"max_compaction_sources": "x"}, r"scheduler_options.max_compaction_sources: 'x' is not a int"),
    ({"bogus": "1"}, r"unknown scheduler option compactor_options.scheduler_options.bogus"),
])
def test_scheduler_options_are_checked_at_the_call(options, match, tmp_path, monkeypatch) -> None:
    """Found by opening a Db with ``scheduler_options={"min_compaction_sources": "0"}``: before,
    ``Settings``, ``CompactorOptions`` and ``Db.open`` accepted any string map; the in-process
    compactor's task then raised while building its scheduler, the runtime thread died with a
    traceback on stderr, ``Db.open`` had returned and the first write raised ``ClosedError: the
    database was aborted``, naming nothing. Now the map is checked with the other settings."""
    with pytest.raises(InvalidArgumentError, match=match):
        Settings(compactor_options={"scheduler_options": options})
    with pytest.raises(InvalidArgumentError, match=match):
        Settings.from_dict({"compactor_options": {"scheduler_options": options}})
    with pytest.raises(InvalidArgumentError, match=match):
        CompactorOptions(scheduler_options=options)
    with pytest.raises(InvalidArgumentError, match=match):
        attrs.evolve(CompactorOptions(), scheduler_options=options)
    ((name, text),) = options.items()
    monkeypatch.setenv(f"SLATEDB_COMPACTOR_OPTIONS__SCHEDULER_OPTIONS__{name.upper()}", text)
    with pytest.raises(InvalidArgumentError, match=match):
        Settings.load(None, dict(os.environ))
    with pytest.raises(InvalidArgumentError, match=match):
        slatedb.Db.open(f"file://{tmp_path}", settings={"compactor_options": {"scheduler_options": options}})
    good = {"min_compaction_sources": "2", "max_compaction_sources": "3", "include_size_threshold": "1.5"}
    assert Settings(compactor_options={"scheduler_options": good}).compactor_options.scheduler_options == good


def test_a_string_duration_no_longer_crashes_the_flusher(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", Settings(flush_interval="10ms", compactor_options=None)) as db:
        db.put(b"k", b"v").wait_durable()
        assert db.get(b"k") == b"v"


@pytest.mark.parametrize("path", sorted(NOT_IMPLEMENTED))
def test_unimplemented_official_settings_are_refused_unless_default(path: str) -> None:
    default = Settings().to_dict()
    node = default
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[p]
    value = node[parts[-1]]
    bumped = _bump(path, value)
    data: dict = {}
    cur = data
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = bumped
    with pytest.raises(InvalidArgumentError, match=f"setting {path} .*not implemented"):
        Settings.from_dict(data)


def _bump(path: str, value):
    """A valid value other than the default ``value`` (in the official JSON shape)."""
    if "metric_level" in path:
        return "Debug" if value != "Debug" else "Info"
    if isinstance(value, dict):
        return {**value, "max_open_file_handles": 7}
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):  # a duration
        return "123s"
    raise AssertionError((path, value))


def test_the_official_default_dump_still_loads() -> None:
    data = json.loads(OFFICIAL_DUMP.read_text())
    assert Settings.from_dict(data) == Settings()


def test_docs_list_every_official_setting() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "db.md").read_text()
    for path in _official_paths(Settings().to_official_dict()):
        assert f"`{path}`" in text, f"docs/db.md does not list {path}"


def _official_paths(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and k != "scheduler_options":
            out += _official_paths(v, prefix + k + ".")
        else:
            out.append(prefix + k)
    return out
