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


def _admin_calls(store):
    return {
        "list_checkpoints": lambda s: admin.list_checkpoints(s),
        "create_checkpoint": lambda s: admin.create_checkpoint(s),
        "delete_checkpoint": lambda s: admin.delete_checkpoint(s, "01740ee5-6459-44af-9a45-85deb6e468e3"),
        "refresh_checkpoint": lambda s: admin.refresh_checkpoint(s, "01740ee5-6459-44af-9a45-85deb6e468e3"),
        "read_manifest": lambda s: admin.read_manifest(s),
        "list_manifests": lambda s: admin.list_manifests(s),
        "read_compactions": lambda s: admin.read_compactions(s),
        "list_compactions": lambda s: admin.list_compactions(s),
        "read_compaction": lambda s: admin.read_compaction(s, "01HZZZZZZZZZZZZZZZZZZZZZZZ"),
        "submit_compaction": lambda s: admin.submit_compaction(s, "Full"),
        "sequence_tracker": lambda s: admin.sequence_tracker(s),
        "get_sequence_for_timestamp": lambda s: admin.get_sequence_for_timestamp(s, 0),
        "get_timestamp_for_sequence": lambda s: admin.get_timestamp_for_sequence(s, 0),
        "run_gc": lambda s: admin.run_gc(s, once=True),
        "run_compactor": lambda s: admin.run_compactor(s, once=True),
        "destroy": lambda s: admin.destroy(s, True),
    }


@pytest.mark.parametrize("name", sorted(_admin_calls(None)))
def test_an_admin_call_given_a_url_or_anything_but_a_store_says_so(tmp_path, name) -> None:
    """Every ``slatedb.admin`` function taking a store refuses anything else with an
    ``InvalidArgumentError`` naming ``store`` (a URL string: pointing to ``resolve_store``), and
    a ``runtime=`` that is not one alike. Before: ``admin.list_checkpoints("file:///d")`` raised
    ``AttributeError: 'str' object has no attribute 'list'``."""
    call = _admin_calls(None)[name]
    with pytest.raises(InvalidArgumentError, match="resolve_store"):
        trio.run(call, f"file://{tmp_path}/db")
    for bad in (None, 5, {}):
        with pytest.raises(InvalidArgumentError, match="store must be an ObjectStore"):
            trio.run(call, bad)


@pytest.mark.parametrize("kwargs", [{"start": "1"}, {"end": 2.5}, {"start": -1}, {"end": True}])
def test_list_bounds_must_be_ids(tmp_path, kwargs) -> None:
    """``list_manifests`` / ``list_compactions`` bounds are ids (ints in [0, 2^64)) or None.
    Before: ``start="1"`` raised ``TypeError: '>=' not supported between 'int' and 'str'``."""
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v")
    store = resolve_store(url)
    for fn in (admin.list_manifests, admin.list_compactions):
        with pytest.raises(InvalidArgumentError, match=next(iter(kwargs))):
            trio.run(lambda: fn(store, **kwargs))


def test_admin_runtime_and_sources_and_compaction_id_are_checked(tmp_path) -> None:
    """``runtime=`` that is not a Runtime, clone ``sources`` that are not a list, and a
    compaction id that is not a string or ULID are ``InvalidArgumentError`` (were
    ``AttributeError`` / ``TypeError`` from inside the call)."""
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v")
    store = resolve_store(url)
    with pytest.raises(InvalidArgumentError, match="runtime"):
        trio.run(lambda: admin.list_checkpoints(store, runtime="admin"))
    with pytest.raises(InvalidArgumentError, match="runtime"):
        trio.run(lambda: admin.create_clone(f"file://{tmp_path}/c", url, runtime=5))
    for fn in (admin.create_clone_from_sources, admin.union):
        with pytest.raises(InvalidArgumentError, match="sources"):
            trio.run(lambda: fn(f"file://{tmp_path}/c", None))
    with pytest.raises(InvalidArgumentError, match="compaction id"):
        trio.run(lambda: admin.read_compaction(store, None))


def test_run_gc_grace_may_be_infinite_but_not_nan_or_a_string(tmp_path) -> None:
    """``db_delete_grace_s=math.inf`` (a destroyed database is never deleted) is taken; NaN, a
    negative number or a string is refused at the call."""
    import math

    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v")
    store = resolve_store(url)
    assert trio.run(lambda: admin.run_gc(store, once=True, db_delete_grace_s=math.inf)) is not None
    for bad in (math.nan, -1, "1h"):
        with pytest.raises(InvalidArgumentError, match="db_delete_grace_s"):
            trio.run(lambda: admin.run_gc(store, once=True, db_delete_grace_s=bad))


@pytest.mark.parametrize("name", [5, b"nightly", ["nightly"]])
def test_list_checkpoints_name_must_be_a_string(tmp_path, name) -> None:
    """``list_checkpoints(store, name=5)`` (or ``b"nightly"``) returned ``[]``, as if no
    checkpoint had that name, where a checkpoint named "nightly" existed: a wrong type is an
    ``InvalidArgumentError`` at the call."""
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v")
    store = resolve_store(url)
    trio.run(lambda: admin.create_checkpoint(store, {"name": "nightly"}))
    assert len(trio.run(lambda: admin.list_checkpoints(store, "nightly"))) == 1
    with pytest.raises(InvalidArgumentError, match="checkpoint name"):
        trio.run(lambda: admin.list_checkpoints(store, name))
