"""``slatedb.admin.run_gc`` / ``run_compactor`` take settings as ``Db.open`` does (a
``Settings``, a dict or a JSON/TOML path) and refuse anything else at the call. Found by trying
``admin.run_gc(store, {"garbage_collector_options": ...}, once=True)``: an AttributeError
('dict' object has no attribute 'garbage_collector_options') from inside the call."""

from __future__ import annotations

import json

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.errors import InvalidArgumentError
from slatedb.objstore import resolve_store

GC = {"garbage_collector_options": {"wal_options": {"interval": "1s", "min_age": "1s"}}}


def test_settings_as_a_dict_a_file_or_settings(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, {"compactor_options": None, "l0_sst_size_bytes": 4096}) as db:
        for i in range(2000):
            db.put(b"k%04d" % i, b"v" * 20)
    store = resolve_store(url)
    path = tmp_path / "gc.json"
    path.write_text(json.dumps(GC))
    for settings in (GC, str(path), slatedb.Settings.from_dict(GC), None):
        stats = trio.run(lambda: admin.run_gc(store, settings, once=True))
        assert stats is not None
    compactor = trio.run(lambda: admin.run_compactor(store, {"compactor_options": {"poll_interval": "100ms"}}, once=True))
    assert compactor is not None
    with slatedb.Db.open(url) as db:
        assert sum(1 for _ in db.scan()) == 2000


@pytest.mark.parametrize("call", ["gc", "compactor"])
@pytest.mark.parametrize("settings, once, words", [
    (42, True, "settings must be a Settings, a dict or a path"),
    ({"garbage_collector_options": {"wal_options": {"min_age": "-1s"}}}, True, "min_age"),
    ({"no_such_setting": 1}, True, "unknown setting"),
    (None, "yes", "once must be a bool"),
])
def test_bad_settings_or_flags_are_refused_at_the_call(tmp_path, call, settings, once, words) -> None:
    store = resolve_store(f"file://{tmp_path}/db")
    run = admin.run_gc if call == "gc" else admin.run_compactor
    with pytest.raises(InvalidArgumentError, match=words):
        trio.run(lambda: run(store, settings, once=once))


@pytest.mark.parametrize("flag", [None, 0, "", "false", "yes", 1])
def test_destroy_takes_soft_as_a_bool_only_and_a_refused_call_destroys_nothing(tmp_path, flag) -> None:
    """``soft`` decides between marking the database destroyed and deleting every object now:
    anything but True or False is refused at the call. Before: ``bool(soft)``, so
    ``admin.destroy(store, None)`` (say ``soft=os.environ.get("SOFT")``) or ``soft=0`` was a
    hard destroy, deleting the database, and ``soft="false"`` a soft one."""
    from slatedb.destroy import destroy_url

    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v")
    store = resolve_store(url)
    for call in (lambda: admin.destroy(store, flag), lambda: destroy_url(url, soft=flag)):
        with pytest.raises(InvalidArgumentError, match="soft must be True or False"):
            trio.run(call)
    latest = trio.run(admin.read_manifest, store)
    assert latest.manifest.destroyed_at_s == 0
    with slatedb.Db.open(url) as db:
        assert db.get(b"k") == b"v"
