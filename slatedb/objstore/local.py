"""An object store in a local directory, with the atomicity the protocols need.

- A put writes a temporary file in the target directory, fsyncs it, then publishes it with
  ``os.link`` (create-if-absent: fails if the name exists, atomically) or ``os.replace``
  (overwrite), and fsyncs the directory. A partially written object is never visible under its
  key. An empty object's create-if-absent (a WAL fence) is an ``O_EXCL`` create of the file
  itself and the directory's fsync: there are no bytes to tear or to sync.
- Update-if-match, overwrite and delete hold an exclusive ``flock`` on a per-key lock file, so
  that check-then-replace is atomic across threads and processes.
- The ETag is the file's inode, mtime and size: every publish makes a new inode, so a new ETag.
- ``fsync=False`` (``file:///dir?fsync=false``, or the store option ``fsync``) leaves out every
  sync: a put that returned is in the page cache, which survives a crash of the process but not
  of the machine. That is the promise of the official engine's local store (the Rust
  ``object_store`` crate's ``LocalFileSystem`` writes a staging file and renames or hard-links it,
  syncing nothing). Atomicity (STORE-1..3) is the same either way. Default: ``True``.

File I/O runs in a worker thread (``trio.to_thread``), except what costs less than the hand-off:
small reads, a stat, a small listing and, with ``fsync`` off, a small create-if-absent (see the
``INLINE_*`` limits). This backend is for production and tests, never for simulation.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import mmap
import os
import stat
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import trio

from slatedb.errors import (
    AccessDeniedError,
    InvalidArgumentError,
    InvalidPathError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    PermanentObjectStoreError,
    PreconditionFailedError,
    TransientObjectStoreError,
)

from .base import (
    OVERWRITE,
    RESERVED_SEGMENT_PREFIX,
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutKind,
    PutMode,
    validate_key,
    validate_prefix,
    validate_range,
)

T = TypeVar("T")

_LOCK_DIR = RESERVED_SEGMENT_PREFIX + "locks"
_TMP_PREFIX = RESERVED_SEGMENT_PREFIX + "tmp."
_tmp_counter = itertools.count()


def _meta(key: str, st: os.stat_result) -> ObjectMeta:
    etag = f'"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"'
    return ObjectMeta(key, st.st_size, st.st_mtime_ns // 1_000_000, etag)


#: Reads up to this size (ranged, or of a whole object this small) run on the event loop
#: instead of a worker thread.
INLINE_READ_MAX_BYTES = 256 * 1024
#: Files :meth:`LocalStore.read_range_now` keeps mapped (least recently used unmapped first).
MAPPED_FILES_MAX = 64
#: ``[n]``: reads :meth:`LocalStore.read_range_now` made, any thread (not atomic: a changed value
#: tells an async get that its thread read a block and should yield to its loop, as a scan does).
DIRECT_READS: list[int] = [0]
#: With ``fsync`` off, a create-if-absent of up to this many bytes (a manifest, a WAL fence, a
#: small WAL object) runs on the event loop too: unsynced, it is a page-cache write, a link and
#: an unlink, as cheap as a small read and cheaper than the thread hand-off. Overwrites and
#: updates never do (they wait for a key's ``flock``, which another process may hold), nor does
#: any put while syncs are on (a sync waits for the disk).
INLINE_CREATE_MAX_BYTES = 256 * 1024
#: A listing runs on the event loop when the previous listing of its prefix found at most this many.
INLINE_LIST_MAX_OBJECTS = 64
#: ... and a first listing of a prefix when its directory's size is at most this (one ext4 block:
#: a few dozen names; a directory's size grows with the names it holds on common filesystems).
INLINE_LIST_DIR_MAX_BYTES = 4096


def _clear_locks(lock_dir: str) -> None:
    """Remove the lock files of ``lock_dir`` no process holds, then the directory if empty: each
    under its ``flock`` taken without waiting, and only while the path still names the file
    locked (the protocol of :meth:`LocalStore._locked`)."""
    try:
        names = os.listdir(lock_dir)
    except OSError:
        return
    for name in names:
        lock = os.path.join(lock_dir, name)
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                os.unlink(lock)
        except OSError:
            pass  # held (a put or delete under way), or gone: left to its holder
        finally:
            os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(lock_dir)


def _holds_files(directory: str) -> bool:
    """Does the tree at ``directory`` hold a file other than lock files (an object, another
    database's, a user's, a put's temporary file)? An unreadable directory counts as holding."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return False
    except OSError:
        return True
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            return True
        if entry.name != _LOCK_DIR and _holds_files(entry.path):
            return True
    return False


def _remove_tree(directory: str) -> None:
    """``rmdir`` the tree at ``directory`` deepest first, its unheld lock files removed first;
    anything that appeared meanwhile (or a held lock file) keeps its directories."""
    try:
        entries = [e for e in os.scandir(directory) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for entry in entries:
        if entry.name == _LOCK_DIR:
            _clear_locks(entry.path)
        else:
            _remove_tree(entry.path)
    with contextlib.suppress(OSError):
        os.rmdir(directory)


def _missing_dirs(directory: str) -> list[str]:
    """``directory`` and those of its parents that do not exist, outermost first."""
    missing: list[str] = []
    d = directory
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return missing[::-1]


def _check_root(url: str, root: str) -> None:
    """Refuse a root that is a file or lies under one (:class:`InvalidPathError`), without
    creating anything: the nearest existing path at or above ``root`` must be a directory."""
    d = root
    while True:
        try:
            st = os.stat(d)
        except FileNotFoundError:
            parent = os.path.dirname(d)
            if parent == d:
                return
            d = parent
            continue
        except NotADirectoryError:
            raise InvalidPathError(url, f"{root} (or a directory above it) is a file, not a directory") from None
        except OSError:
            return  # not readable here: the first call that needs it names the problem
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidPathError(url, f"{root} (or a directory above it) is a file, not a directory")
        return


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


#: File-system errors that retrying cannot fix: raised at once, as the S3 store raises a 403
#: (a permission, a read-only mount, a name too long). Anything else (a full disk, an I/O error,
#: an interrupted call) may pass and is transient: retried within the bound.
_PERMANENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENAMETOOLONG})


def local_error(key: str, e: OSError, what: str) -> Exception:
    """The typed error of a failed file-system call on ``key``: :class:`AccessDeniedError` for a
    permission, :class:`PermanentObjectStoreError` for another failure that retrying cannot fix,
    else :class:`TransientObjectStoreError`."""
    if e.errno in (errno.EACCES, errno.EPERM):
        return AccessDeniedError(key, f"{what}: {e}")
    if e.errno in _PERMANENT_ERRNOS:
        return PermanentObjectStoreError(key, f"{what}: {e}")
    return TransientObjectStoreError(key, f"{what}: {e}")


class LocalStore(ObjectStore):
    """Objects are files under ``root``; ``a/b/c`` is ``root/a/b/c``."""

    def __init__(self, root: str, *, url: str | None = None, fsync: bool = True) -> None:
        if not os.path.isabs(root):
            raise InvalidPathError(root, "local store root must be an absolute path")
        self.root = os.path.normpath(root)
        self.url = url or f"file://{self.root}"
        if not isinstance(fsync, bool):
            raise InvalidArgumentError(f"LocalStore fsync must be a bool, got {fsync!r}")
        #: Sync each object's bytes and its directory before a put returns (STORE-7).
        self.fsync = fsync
        #: Objects the last listing of each prefix found: a listing whose previous one found few
        #: runs on the event loop (a few stat calls, less than a thread hand-off).
        self._listed: dict[str, int] = {}
        #: Directories made before a put syncs them into their parents (STORE-7): none, since
        #: the constructor creates nothing. The root and its missing parents are made by the
        #: first write (:meth:`_make_dirs`), so a reader, a ``create="never"`` open or a CLI
        #: read on a mistyped path leaves no empty directory behind (STORE-9).
        self._unsynced_dirs: list[str] = []
        _check_root(self.url, self.root)
        #: Directories a put has made ready (created and synced into their parents, or found).
        self._ready_dirs: set[str] = set()
        self._dirs_lock = threading.Lock()
        self._maps: OrderedDict[str, mmap.mmap] = OrderedDict()
        self._maps_lock = threading.Lock()
        if type(self).get is not LocalStore.get:
            # A subclass that changes how objects are read (faults, refusals) gets no reads
            # that would bypass its ``get``.
            self.read_range_now = None  # type: ignore[method-assign,assignment]

    # -- helpers ------------------------------------------------------------------------------

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *validate_key(key).split("/"))

    @contextmanager
    def _locked(self, key: str) -> Iterator[str]:
        """Hold ``key``'s lock file (an flock shared by every process on this root); yields its
        path. The holder may unlink the lock file before it lets go (a deleted object leaves no
        lock file behind): whoever then wins the flock of the unlinked file sees that the path
        no longer names the file it locked, and locks the path afresh."""
        lock_dir = os.path.join(self.root, _LOCK_DIR)
        lock = os.path.join(lock_dir, hashlib.sha1(key.encode()).hexdigest() + ".lock")
        self._make_dirs(self.root)  # a first write may be an overwrite: the root made and synced
        while True:
            os.makedirs(lock_dir, exist_ok=True)
            try:
                fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
            except FileNotFoundError:  # the lock directory removed meanwhile (a destroy's tidy): make it again
                continue
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(lock).st_ino
            except FileNotFoundError:
                current = None
            if current == os.fstat(fd).st_ino:
                break
            os.close(fd)  # unlinked by the holder we waited for: lock the new file
        try:
            yield lock
        finally:
            os.close(fd)  # closing releases the flock

    def _make_dirs(self, directory: str) -> None:
        """Create ``directory`` and its missing parents. With syncs on, each directory created
        (and any the constructor created) is synced into its parent, parents first, before an
        object is put in it: an object's own directory sync makes its name durable, not the
        name of the directory that holds it (STORE-7). The first put into a directory does this
        under a lock; a concurrent first put into the same directory waits for it."""
        if directory in self._ready_dirs:
            return
        with self._dirs_lock:
            if directory in self._ready_dirs:
                return
            created = _missing_dirs(directory)
            if created:
                try:
                    os.makedirs(directory, exist_ok=True)
                except FileExistsError:  # a file by that name: not an object that exists (create-if-absent)
                    raise NotADirectoryError(errno.ENOTDIR, "Not a directory", directory) from None
            if self.fsync:
                for d in self._unsynced_dirs + created:
                    self._sync_dir(d)  # d's name, in its parent
            self._unsynced_dirs = []
            self._ready_dirs.add(directory)

    def _in_dir(self, directory: str, create: Callable[[], T]) -> T:
        """``create`` (which makes a file in ``directory``) once the directory is ready; if the
        directory vanished since a put made it ready -- a destroy, in this process or another,
        removed it empty (:meth:`tidy_destroyed_root`), or a user did -- it is made (and synced)
        again and ``create`` runs once more."""
        self._make_dirs(directory)
        try:
            return create()
        except FileNotFoundError:
            if os.path.isdir(directory):
                raise
        with self._dirs_lock:
            self._ready_dirs.clear()
            self._unsynced_dirs.append(self.root)  # made again (maybe by a lock's makedirs): its name synced too
        self._make_dirs(directory)
        return create()

    def _write_temp(self, path: str, data: bytes) -> str:
        directory = os.path.dirname(path)
        tmp = os.path.join(
            directory,
            f"{_TMP_PREFIX}{os.getpid()}.{threading.get_ident()}.{next(_tmp_counter)}",
        )
        try:
            with self._in_dir(directory, lambda: open(tmp, "xb")) as f:
                f.write(data)
                if self.fsync:
                    f.flush()
                    os.fsync(f.fileno())
        except BaseException:
            _unlink_quietly(tmp)  # a write that failed (a full disk) leaves no hidden file behind
            raise
        return tmp

    def _sync_dir(self, path: str) -> None:
        if not self.fsync:
            return
        fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    async def _run(self, key: str, fn: Callable[[], T], *, inline: bool = False) -> T:
        """Run blocking file I/O ``fn`` in a worker thread, or on the event loop itself when
        ``inline`` (small ranged reads: a page-cache read takes microseconds, less than the
        thread hand-off would; the loop yields once so that callers still checkpoint)."""
        try:
            if inline:
                await trio.lowlevel.checkpoint()
                return fn()
            return await trio.to_thread.run_sync(fn)
        except OSError as e:
            if isinstance(e, (FileNotFoundError, FileExistsError)) or e.errno in (errno.ENOTDIR, errno.EISDIR):
                raise
            raise local_error(key, e, "local I/O error") from e

    # -- operations ---------------------------------------------------------------------------

    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        path = self._path(key)
        byte_range = validate_range(key, byte_range)

        def read() -> GetResult:
            try:
                with open(path, "rb") as f:
                    st = os.fstat(f.fileno())
                    if byte_range is None:
                        data = f.read()
                    else:
                        f.seek(byte_range[0])
                        data = f.read(max(0, byte_range[1] - byte_range[0]))
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                raise ObjectNotFoundError(key, "no such object") from None
            return GetResult(data, _meta(key, st))

        if byte_range is None:
            # A whole object read inline when it is small (a manifest, a WAL object: the open
            # path reads several), else in a worker thread: one fstat tells which.
            await trio.lowlevel.checkpoint()
            try:
                small = os.stat(path).st_size <= INLINE_READ_MAX_BYTES
            except OSError:
                small = False  # read() names the problem
            return await self._run(key, read, inline=small)
        small = byte_range[1] - byte_range[0] <= INLINE_READ_MAX_BYTES
        return await self._run(key, read, inline=small)

    def read_range_now(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of an object that is never overwritten (an SST), read on the
        calling thread from a memory map of its file: no event loop, and the GIL is kept (a
        page-cache copy), so a reader thread is not queued behind a busy loop thread (the
        in-process compactor) for each read. Fewer bytes than asked mean the object is shorter.
        Raises :class:`ObjectNotFoundError`, or ``OSError`` (the caller then takes the event
        loop's path, with its retries). Up to :data:`MAPPED_FILES_MAX` files stay mapped;
        :meth:`delete` unmaps its object."""
        with self._maps_lock:  # keyed by the object key: no path to build for a mapped file
            m = self._maps.get(key)
            if m is not None:
                self._maps.move_to_end(key)
        if m is None:
            path = self._path(key)
            try:
                with open(path, "rb") as f:
                    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else None
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                raise ObjectNotFoundError(key, "no such object") from None
            if m is None:
                return b""
            with self._maps_lock:
                self._maps[key] = m
                while len(self._maps) > MAPPED_FILES_MAX:
                    self._maps.popitem(last=False)[1].close()
        DIRECT_READS[0] += 1
        try:
            return m[start:end]
        except ValueError:  # unmapped by another thread (delete, eviction) since we took it
            raise OSError(f"mapping of {key} closed during a read") from None

    def _unmap(self, key: str) -> None:
        with self._maps_lock:
            m = self._maps.pop(key, None)
        if m is not None:
            m.close()

    async def aclose(self) -> None:
        with self._maps_lock:
            maps, self._maps = list(self._maps.values()), OrderedDict()
        for m in maps:
            m.close()
        await super().aclose()

    async def head(self, key: str) -> ObjectMeta:
        path = self._path(key)

        def stat() -> ObjectMeta:
            try:
                st = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                raise ObjectNotFoundError(key, "no such object") from None
            if not os.path.isfile(path):
                raise ObjectNotFoundError(key, "no such object (a directory)")
            return _meta(key, st)

        return await self._run(key, stat, inline=True)  # one stat: microseconds, less than a thread hand-off

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        path = self._path(key)
        data = bytes(data)

        def create() -> ObjectMeta:
            if not data:
                return create_empty()
            if os.path.lexists(path):
                # Taken already (a writer's manifest commit racing the in-process compactor's):
                # refused without writing and syncing a temporary file first. The link below
                # stays the create's atomic check.
                raise ObjectAlreadyExistsError(key, "object already exists (create-if-absent)")
            tmp = self._write_temp(path, data)
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise ObjectAlreadyExistsError(key, "object already exists (create-if-absent)") from None
            finally:
                os.unlink(tmp)
            self._sync_dir(path)
            return _meta(key, os.stat(path))

        def create_empty() -> ObjectMeta:
            # Nothing to tear (STORE-1 holds for an empty file as it is created) and no data to
            # sync: the object is created in place, ``O_EXCL`` being the create-if-absent, and
            # the directory's fsync makes its name and its (empty) inode durable. Half the
            # syncs of a temporary file's create; a WAL fence is such an object (spec STORE-7).
            try:
                fd = self._in_dir(os.path.dirname(path), lambda: os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            except FileExistsError:
                raise ObjectAlreadyExistsError(key, "object already exists (create-if-absent)") from None
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            self._sync_dir(path)
            return _meta(key, st)

        def replace() -> ObjectMeta:
            with self._locked(key):
                if mode.kind is PutKind.UPDATE_IF_MATCH:
                    try:
                        current = _meta(key, os.stat(path))
                    except (FileNotFoundError, NotADirectoryError):
                        raise ObjectNotFoundError(key, "no such object (update-if-match)") from None
                    if current.etag != mode.etag:
                        raise PreconditionFailedError(key, f"etag is {current.etag}, expected {mode.etag}")
                tmp = self._write_temp(path, data)
                try:
                    os.replace(tmp, path)
                except BaseException:
                    _unlink_quietly(tmp)
                    raise
                self._sync_dir(path)
                return _meta(key, os.stat(path))

        try:
            if mode.kind is PutKind.CREATE_IF_ABSENT:
                return await self._run(key, create, inline=not self.fsync and len(data) <= INLINE_CREATE_MAX_BYTES)
            return await self._run(key, replace)
        except (NotADirectoryError, IsADirectoryError) as e:
            # A file stands where the key's directory (or the root) must be, or a directory where
            # the object must be -- put there by someone else while the store was open: no retry
            # fixes that, and a raw OSError would reach the caller (a writer's flush) untyped.
            raise PermanentObjectStoreError(key, f"local I/O error: {e} (a file where a directory must be, "
                                                 "or a directory where the object must be)") from e

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        prefix = validate_prefix(prefix)
        base_dir = os.path.join(self.root, *prefix.rsplit("/", 1)[0].split("/")) if "/" in prefix else self.root

        def walk() -> list[ObjectMeta]:
            out: list[ObjectMeta] = []
            for dirpath, dirnames, filenames in os.walk(base_dir):
                dirnames[:] = [d for d in dirnames if not d.startswith(RESERVED_SEGMENT_PREFIX)]
                rel_dir = os.path.relpath(dirpath, self.root)
                for name in filenames:
                    if name.startswith(RESERVED_SEGMENT_PREFIX):
                        continue
                    key = name if rel_dir == "." else f"{rel_dir.replace(os.sep, '/')}/{name}"
                    if not key.startswith(prefix):
                        continue
                    try:
                        st = os.stat(os.path.join(dirpath, name))
                    except FileNotFoundError:
                        continue  # deleted while we listed
                    out.append(_meta(key, st))
            out.sort(key=lambda m: m.key)
            self._listed[prefix] = len(out)
            return out

        listed = self._listed.get(prefix)
        if listed is None:  # a first listing (an open's): inline when the directory is small
            try:
                st = os.stat(base_dir)  # no subdirectory (a walk of one level) holding few names
                small = st.st_nlink == 2 and st.st_size <= INLINE_LIST_DIR_MAX_BYTES
            except OSError:
                small = True  # nothing there: walk() finds nothing, at once
        else:
            small = listed <= INLINE_LIST_MAX_OBJECTS
        return await self._run(prefix, walk, inline=small)

    async def tidy_destroyed_root(self, directories: tuple[str, ...]) -> None:
        """After a destroy deleted the database's objects (destroy.md "What a destroy leaves"):
        the lock files no process holds, each of the database's ``directories`` (``manifest/``,
        ..., ``shards/``) whose tree holds no file but lock files (the empty shard databases in
        ``shards/`` with it, their own unheld lock files too), then the lock directory and the
        root itself if nothing else is left -- ``rm -r`` of the path leaves nothing either. A
        directory whose tree holds a file (an object kept, another database nested below, a
        user's file) is not touched at all, nor anything else under the root; only ``rmdir``
        removes a directory, so one that gained a file meanwhile stays. A lock file is removed as
        :meth:`delete` removes one: under its ``flock`` (taken without waiting: one held is
        left), so a process waiting for it locks the path afresh (:meth:`_locked`); a put
        whose directory vanished makes it again (:meth:`_in_dir`). Best effort: an error
        leaves what it could not remove."""
        await self._run("", lambda: self._tidy(directories), inline=False)
        with self._dirs_lock:
            self._ready_dirs.clear()  # made again by the next put that needs them

    def _tidy(self, directories: tuple[str, ...]) -> None:
        for name in directories:
            path = os.path.join(self.root, *validate_prefix(name).strip("/").split("/"))
            if not _holds_files(path):
                _remove_tree(path)
        _clear_locks(os.path.join(self.root, _LOCK_DIR))
        with contextlib.suppress(OSError):
            if not os.listdir(self.root):
                os.rmdir(self.root)

    async def delete(self, key: str) -> None:
        path = self._path(key)
        self._unmap(key)

        def unlink() -> None:
            with self._locked(key) as lock:
                try:
                    os.unlink(path)
                except (FileNotFoundError, NotADirectoryError):
                    pass
                # The object is gone: so is its lock file (else one per key ever written, for
                # ever -- a database whose GC deleted its objects kept every lock file).
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)

        await self._run(key, unlink)
