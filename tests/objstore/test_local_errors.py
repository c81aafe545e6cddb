"""The local store's failures are typed by whether retrying can fix them (spec/objstore.md
STORE-9): a root that is a file is a bad argument at the call; a permission refused, a read-only
mount or a name too long is permanent, raised at once (as the S3 store raises a 403), so a
database opened on a directory it may not write fails at ``open`` instead of retrying for seconds
and then reporting ``ObjectStoreRetriesExhaustedError``; anything else (a full disk, an I/O
error) stays transient and is retried within the bound."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest
import trio

import slatedb
from slatedb.errors import (
    AccessDeniedError,
    InvalidArgumentError,
    InvalidPathError,
    PermanentObjectStoreError,
    TransientObjectStoreError,
)
from slatedb.objstore.base import CREATE_IF_ABSENT
from slatedb.objstore.local import LocalStore, local_error


@pytest.mark.parametrize("below", ["", "/sub", "/sub/db"])
def test_a_root_that_is_a_file_is_refused_at_the_call(tmp_path, below) -> None:
    (tmp_path / "afile").write_bytes(b"x")
    url = f"file://{tmp_path}/afile{below}"
    for open_it in (lambda: LocalStore(f"{tmp_path}/afile{below}"), lambda: slatedb.Db.open(url),
                    lambda: slatedb.DbReader.open(url)):
        with pytest.raises(InvalidPathError, match="is a file, not a directory") as e:
            open_it()
        assert isinstance(e.value, InvalidArgumentError)
    assert (tmp_path / "afile").read_bytes() == b"x"  # left as it was


@pytest.mark.parametrize(
    "code, kind",
    [
        (errno.EACCES, AccessDeniedError),
        (errno.EPERM, AccessDeniedError),
        (errno.EROFS, PermanentObjectStoreError),
        (errno.ENAMETOOLONG, PermanentObjectStoreError),
        (errno.ENOSPC, TransientObjectStoreError),
        (errno.EIO, TransientObjectStoreError),
        (errno.EINTR, TransientObjectStoreError),
    ],
)
def test_each_file_system_error_is_typed_by_whether_a_retry_can_fix_it(code, kind) -> None:
    e = local_error("wal/x.sst", OSError(code, os.strerror(code), "/d/wal/x.sst"), "local I/O error")
    assert type(e) is kind and str(e).startswith("wal/x.sst: local I/O error")
    assert not isinstance(e, TransientObjectStoreError) or kind is TransientObjectStoreError


def test_a_put_refused_by_the_file_system_raises_at_once_without_a_retry(tmp_path, monkeypatch) -> None:
    store = LocalStore(str(tmp_path / "db"))
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise PermissionError(errno.EACCES, "Permission denied", str(args[1]))

    monkeypatch.setattr(os, "link", refuse)

    async def main() -> None:
        from slatedb.objstore.retry import create_if_absent
        from slatedb.runtime.production import default_runtime

        with pytest.raises(AccessDeniedError, match="Permission denied"):
            await create_if_absent(store, default_runtime(), "manifest/00000000000000000001.manifest", b"m")
        with pytest.raises(AccessDeniedError):
            await store.put("a/b", b"1", CREATE_IF_ABSENT)

    trio.run(main)
    assert len(calls) == 2  # one attempt each: never retried


def _dac_override_dropped() -> bool:
    capsh = shutil.which("capsh")
    if capsh is None:
        return False
    probe = subprocess.run([capsh, "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", "true"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(os.geteuid() == 0 and not _dac_override_dropped(),
                    reason="root ignores directory permissions and capsh cannot drop that")
def test_a_database_on_a_directory_it_may_not_write_fails_at_the_call(tmp_path) -> None:
    """A real read-only directory (as root: with CAP_DAC_OVERRIDE dropped by ``capsh``). Open
    fails with ``AccessDeniedError`` naming the object, and so does a durable put once the WAL
    directory turns read-only under an open database (the writer stops: its status says so)."""
    db_dir = tmp_path / "db"
    script = textwrap.dedent(f"""
        import os, slatedb
        from slatedb.errors import AccessDeniedError
        d = {str(db_dir)!r}
        with slatedb.Db.open("file://" + d) as db:
            db.put(b"a", b"1", durable=True)
        for root, dirs, _ in os.walk(d):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o555)
        os.chmod(d, 0o555)
        try:
            slatedb.Db.open("file://" + d)
        except AccessDeniedError as e:
            print("open:", type(e).__name__, "manifest/" in str(e))
        for root, dirs, _ in os.walk(d):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(d, 0o755)
        db = slatedb.Db.open("file://" + d)
        os.chmod(d + "/wal", 0o555)
        try:
            db.put(b"b", b"2", durable=True)
        except AccessDeniedError as e:
            print("put:", type(e).__name__, "wal/" in str(e))
        print("status:", db.status().close_reason)
        print("read:", db.get(b"a"))
        try:
            db.close()  # b was never written: the close says so (tests/db/test_close_after_background_failure.py)
        except AccessDeniedError as e:
            print("close:", type(e).__name__, any("newest writes" in n for n in e.__notes__))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    argv = [sys.executable, "-c", script]
    if os.geteuid() == 0:
        argv = ["capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c",
                " ".join(f"'{a}'" if a != script else "\"$SCRIPT\"" for a in argv)]
        env["SCRIPT"] = script
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    for root, dirs, _ in os.walk(db_dir):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert "open: AccessDeniedError True" in lines, out.stdout
    assert "put: AccessDeniedError True" in lines, out.stdout
    assert "status: CloseReason.PANIC" in lines, out.stdout
    assert "read: b'1'" in lines, out.stdout
    assert "close: AccessDeniedError True" in lines, out.stdout
    assert "retry" not in out.stderr  # raised at once, never retried


@pytest.mark.parametrize("mode", ["create", "overwrite"])
@pytest.mark.parametrize("fail", ["fsync", "publish"])
def test_a_put_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch, mode, fail) -> None:
    """A full disk fails the temporary file's write or sync, or its publishing: the hidden
    temporary file is removed (found as four empty ``.slatedb-tmp.*`` files per WAL object after
    a WAL flush met a full tmpfs: invisible to listings and GC, so never collected)."""
    from slatedb.objstore.base import OVERWRITE

    store = LocalStore(str(tmp_path / "db"))

    real_fsync = os.fsync

    def full(*args, **kwargs):
        if fail == "fsync" and not stat.S_ISREG(os.fstat(args[0]).st_mode):
            return real_fsync(*args)  # a directory's sync (making wal/): passes
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync" if fail == "fsync" else ("link" if mode == "create" else "replace"), full)

    async def main() -> None:
        with pytest.raises(TransientObjectStoreError, match="No space left"):
            await store.put("wal/00000000000000000007.sst", b"rows", CREATE_IF_ABSENT if mode == "create" else OVERWRITE)

    trio.run(main)
    left = [os.path.join(r, f) for r, _, files in os.walk(tmp_path) for f in files if ".slatedb-tmp" in f]
    assert left == [], left
    assert not (tmp_path / "db" / "wal" / "00000000000000000007.sst").exists()


def test_a_read_only_open_of_a_mistyped_path_leaves_no_directory(tmp_path) -> None:
    """Found by trying a typo: ``DbReader.open``, ``WalReader.open`` and
    ``Db.open(create="never")`` on a path holding no database each left an empty directory
    there (the store made its root when built). Now the first write makes it."""
    from slatedb.errors import InvalidDbStateError, NotFoundError
    from slatedb.wal_reader import WalReader

    with pytest.raises(InvalidDbStateError):
        slatedb.DbReader.open(f"file://{tmp_path}/typo1/db")
    with WalReader.open(f"file://{tmp_path}/typo2") as wal:
        assert wal.wal_ids() == []
    with pytest.raises(NotFoundError):
        slatedb.Db.open(f"file://{tmp_path}/typo3", create="never")
    assert sorted(os.listdir(tmp_path)) == []
    with slatedb.Db.open(f"file://{tmp_path}/new/db") as db:  # a writer makes it
        db.put(b"k", b"v", durable=True)
    with slatedb.DbReader.open(f"file://{tmp_path}/new/db") as reader:
        assert reader.get(b"k") == b"v"


@pytest.mark.parametrize("mode", ["create", "create-empty", "overwrite"])
@pytest.mark.parametrize("when", ["before-first-put", "after-a-put"])
def test_a_file_where_a_directory_must_be_fails_a_put_as_permanent(tmp_path, mode, when) -> None:
    """Found by replacing a running writer's ``wal/`` directory (or its root) with a file: the
    WAL put raised a raw ``NotADirectoryError`` (``FileExistsError`` when the store had not made
    the directory yet), which reached the caller as "background task _flush_loop failed"; an
    empty object's create-if-absent reported ``ObjectAlreadyExistsError`` for an object that
    does not exist. It is a :class:`PermanentObjectStoreError` naming the key: no retry fixes it."""
    from slatedb.objstore.base import OVERWRITE

    store = LocalStore(str(tmp_path / "db"))
    put_mode = OVERWRITE if mode == "overwrite" else CREATE_IF_ABSENT
    data = b"" if mode == "create-empty" else b"rows"

    async def main() -> None:
        if when == "after-a-put":
            await store.put("wal/00000000000000000001.sst", b"rows", CREATE_IF_ABSENT)
            shutil.rmtree(tmp_path / "db" / "wal")
        else:
            (tmp_path / "db").mkdir()
        (tmp_path / "db" / "wal").write_bytes(b"not a directory")
        with pytest.raises(PermanentObjectStoreError, match="wal/00000000000000000002.sst: .*Not a directory") as e:
            await store.put("wal/00000000000000000002.sst", data, put_mode)
        assert not isinstance(e.value, TransientObjectStoreError)

    trio.run(main)
    assert (tmp_path / "db" / "wal").read_bytes() == b"not a directory"


def test_a_writer_whose_wal_directory_became_a_file_raises_a_typed_error(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    db = slatedb.Db.open(url, settings={"flush_interval": "10ms"})
    db.put(b"k", b"v", durable=True)
    shutil.rmtree(tmp_path / "db" / "wal")
    (tmp_path / "db" / "wal").write_bytes(b"x")
    for _ in range(2):  # the put's own error, then the stopped database's
        with pytest.raises(PermanentObjectStoreError, match="Not a directory"):
            db.put(b"k2", b"v", durable=True)
    assert db.get(b"k") == b"v"
    with pytest.raises(PermanentObjectStoreError, match="Not a directory"):
        db.close()  # k2 was never written: the close says so (tests/db/test_close_after_background_failure.py)
