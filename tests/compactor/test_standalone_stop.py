"""A standalone compactor without ``once`` (``admin.run_compactor``, ``slatedb run-compactor``)
stopped by its caller drops its startup pin, as ``once`` and a writer's close do (CKPT-5).

Found: a user ran ``slatedb run-compactor``, stopped it with Ctrl-C (exit 130), then
``slatedb destroy``: refused, "1 active checkpoint(s)", the compactor's startup pin, for
``checkpoint_lifetime`` (15 min). A cancelled ``admin.run_compactor`` task (trio or asyncio) left
it alike."""

from __future__ import annotations

import asyncio

import trio

import slatedb
from slatedb import admin
from slatedb.objstore import resolve_store


async def _started(store) -> None:
    """Until the compactor's claim (and its startup pin) landed."""
    while (await admin.read_manifest(store)).manifest.compactor_epoch == 0:
        await trio.sleep(0.01)


def _db(url: str) -> None:
    with slatedb.Db.open(url, settings={"compactor_options": None}) as db:
        db.put(b"k", b"v")


async def test_a_cancelled_run_compactor_drops_its_startup_pin_and_a_hard_destroy_goes_through() -> None:
    url = "memory://standalone-stop-trio"
    _db(url)
    store = resolve_store(url)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(admin.run_compactor, store)
        await _started(store)
        assert len(await admin.list_checkpoints(store)) == 1  # the startup pin
        nursery.cancel_scope.cancel()
    assert await admin.list_checkpoints(store) == []
    await admin.destroy(store, False)  # refused while the pin lived
    assert await store.list("") == []
    await store.aclose()


def test_run_compactor_cancelled_under_asyncio_drops_its_startup_pin() -> None:
    url = "memory://standalone-stop-asyncio"
    _db(url)
    store = resolve_store(url)

    async def main() -> None:
        task = asyncio.ensure_future(admin.run_compactor(store))
        while (await admin.read_manifest(store)).manifest.compactor_epoch == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert await admin.list_checkpoints(store) == []

    asyncio.run(main())
    trio.run(store.aclose)


def test_ctrl_c_on_slatedb_run_compactor_drops_its_startup_pin(tmp_path) -> None:
    """The command line: SIGINT (Ctrl-C) ends ``run-compactor`` with status 130, its pin gone."""
    import os
    import signal
    import subprocess
    import sys
    import time

    url = f"file://{tmp_path}/db"
    _db(url)
    # As a terminal's foreground process: SIGINT at its default (a shell starts background jobs,
    # and what they start, with SIGINT ignored: run from ``./just test &`` the child ignored it).
    proc = subprocess.Popen([sys.executable, "-m", "slatedb", "--path", url, "run-compactor"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        store = resolve_store(url)
        while trio.run(admin.read_manifest, store).manifest.compactor_epoch == 0:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, (out, err)
    assert trio.run(admin.list_checkpoints, store) == []
    trio.run(store.aclose)
    # It says what it did, as at its end (found: it printed nothing at all).
    import json

    view = json.loads(out)
    assert view["stopped"] == "SIGINT" and view["epoch"] >= 1 and view["completed"] == 0, out


def test_sigterm_stops_slatedb_run_compactor_as_ctrl_c_does(tmp_path) -> None:
    """A service manager stops ``slatedb run-compactor`` with SIGTERM: found killed outright
    (status -15), its startup pin left for ``checkpoint_lifetime``. Now the same stop as Ctrl-C,
    exit status 143 (128 + SIGTERM); ``run-gc`` goes through the same wrapper
    (``slatedb.cli.SERVICE_COMMANDS``)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    url = f"file://{tmp_path}/db"
    _db(url)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    store = resolve_store(url)
    proc = subprocess.Popen([sys.executable, "-m", "slatedb", "--path", url, "run-compactor"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        while trio.run(admin.read_manifest, store).manifest.compactor_epoch == 0:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 143 and err == "", (proc.returncode, out, err)
    assert trio.run(admin.list_checkpoints, store) == []
    trio.run(store.aclose)
    import json

    assert json.loads(out)["stopped"] == "SIGTERM", out


def test_a_stopped_run_gc_says_what_it_did(tmp_path) -> None:
    """``slatedb run-gc`` stopped by Ctrl-C or SIGTERM printed nothing (found by a user: was it
    doing anything?). It now prints its totals, as a run that ends does, with ``stopped``."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    url = f"file://{tmp_path}/db"
    settings = tmp_path / "gc.json"
    fast = {"interval": "100ms", "min_age": "0s"}
    settings.write_text(json.dumps({"garbage_collector_options": {"manifest_options": fast, "wal_options": fast}}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for sig, flags, code in ((signal.SIGINT, ["--json"], 130), (signal.SIGTERM, [], 143)):
        with slatedb.Db.open(url, settings={"garbage_collector_options": None}) as db:
            for i in range(3):  # old manifests for the collector
                db.put(b"k%d" % i, b"v")
                db.flush(wal=False)
        proc = subprocess.Popen([sys.executable, "-m", "slatedb", "--path", url, *flags, "run-gc", "--settings",
                                 str(settings)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            store = resolve_store(url)
            # Until its first pass deleted something (the old manifests and WAL objects).
            while len(trio.run(admin.list_manifests, store)) > 2:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.05)
            trio.run(store.aclose)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert proc.returncode == code and err == "", (proc.returncode, out, err)
        if flags:
            view = json.loads(out)
            # Its first pass may be the one stopped (passes 0): what it deleted is counted all the same.
            assert view["stopped"] == "SIGINT" and view["passes"] >= 0, out
            assert view["manifests_deleted"] + view["deleted_in_stopped_pass"] >= 1, out
        else:
            assert out.startswith("gc: stopped by SIGTERM after "), out
