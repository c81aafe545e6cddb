"""The object-store interface every backend implements identically.

Protocol code sees only this: whole or ranged ``get``, ``head``, ``put`` with one of three modes,
``list`` in key order, idempotent ``delete``, and ``copy``. Failures are typed (see
:mod:`slatedb.errors`) so that the manifest CAS, WAL fencing and GC can tell "lost the race"
from "try again" on every backend alike.
"""

from __future__ import annotations

import abc
import enum
from typing import Callable

import attrs

from slatedb.errors import InvalidPathError
from slatedb.redact import shown_url

#: The URL resolver (``url -> ObjectStore``, :func:`slatedb.objstore.url.resolve_store`), injected by
#: the package (``slatedb/objstore/__init__.py``) so that this module, which the resolver imports,
#: never imports it back.
_url_resolver: Callable[..., "ObjectStore"] | None = None


def install_url_resolver(resolve: Callable[..., "ObjectStore"]) -> None:
    """Install the function :meth:`ObjectStore.open_url` resolves URLs with."""
    global _url_resolver
    _url_resolver = resolve


def url_resolver() -> Callable[..., "ObjectStore"]:
    """The installed URL resolver (the package installs it on import)."""
    assert _url_resolver is not None, "slatedb.objstore installs the URL resolver on import"
    return _url_resolver

#: Prefix reserved for a backend's own bookkeeping files (temporary files, lock files).
RESERVED_SEGMENT_PREFIX = ".slatedb-"


@attrs.frozen(slots=True)
class ObjectMeta:
    """What a store knows of an object. ``etag`` changes on every successful put of new content."""

    key: str
    size_bytes: int
    last_modified_ms: int
    etag: str


@attrs.frozen(slots=True)
class GetResult:
    """Bytes read (the whole object or the requested range) and the object's metadata."""

    data: bytes
    meta: ObjectMeta


class PutKind(enum.Enum):
    OVERWRITE = "overwrite"
    CREATE_IF_ABSENT = "create-if-absent"
    UPDATE_IF_MATCH = "update-if-match"


@attrs.frozen(slots=True)
class PutMode:
    """How a put treats an existing object.

    - ``OVERWRITE``: unconditional.
    - ``CREATE_IF_ABSENT``: fails with ``ObjectAlreadyExistsError`` if the key exists.
    - ``update_if_match(etag)``: fails with ``PreconditionFailedError`` if the current ETag
      differs, and with ``ObjectNotFoundError`` if the key does not exist.
    """

    kind: PutKind
    etag: str | None = None

    def __attrs_post_init__(self) -> None:
        assert (self.etag is not None) == (self.kind is PutKind.UPDATE_IF_MATCH), self

    @staticmethod
    def update_if_match(etag: str) -> "PutMode":
        return PutMode(PutKind.UPDATE_IF_MATCH, etag)

    def __str__(self) -> str:
        return self.kind.value if self.etag is None else f"{self.kind.value}({self.etag})"


OVERWRITE = PutMode(PutKind.OVERWRITE)
CREATE_IF_ABSENT = PutMode(PutKind.CREATE_IF_ABSENT)


#: Keys that passed :func:`validate_key` (a pure function of the string; a store checks the
#: same manifest, WAL and SST names at every poll). Bounded: emptied when full.
_VALID_KEYS: set[str] = set()
_VALID_KEYS_MAX = 65536


def validate_key(key: object) -> str:
    """Return ``key`` if it is a well-formed object key, else raise ``InvalidPathError``.

    Keys are ``/``-separated relative paths: no leading or trailing ``/``, no empty segment,
    no ``.`` or ``..`` segment, no NUL or backslash, and no segment starting with the prefix
    reserved for backend bookkeeping. Every backend applies the same rule, so a key accepted by
    one is accepted by all.
    """
    if type(key) is str and key in _VALID_KEYS:
        return key
    if not isinstance(key, str):
        raise InvalidPathError(repr(key), f"object key must be str, not {type(key).__name__}")
    if not key:
        raise InvalidPathError(repr(key), "object key is empty")
    if key.startswith("/"):
        raise InvalidPathError(key, "object key must not start with '/'")
    if "\x00" in key or "\\" in key:
        raise InvalidPathError(key, "object key must not contain NUL or backslash")
    for segment in key.split("/"):
        if segment == "":
            raise InvalidPathError(key, "object key has an empty path segment")
        if segment in (".", ".."):
            raise InvalidPathError(key, f"object key has a {segment!r} path segment")
        if segment.startswith(RESERVED_SEGMENT_PREFIX):
            raise InvalidPathError(key, f"segments starting with {RESERVED_SEGMENT_PREFIX!r} are reserved")
    if type(key) is str:
        if len(_VALID_KEYS) >= _VALID_KEYS_MAX:
            _VALID_KEYS.clear()
        _VALID_KEYS.add(key)
    return key


def validate_prefix(prefix: object) -> str:
    """A list prefix: empty, or a key prefix (may end with ``/``) following :func:`validate_key`."""
    if prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise InvalidPathError(repr(prefix), f"prefix must be str, not {type(prefix).__name__}")
    validate_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


def validate_range(key: str, byte_range: tuple[int, int] | None) -> tuple[int, int] | None:
    """A byte range is ``(start, end)``, end exclusive, ``0 <= start <= end``."""
    if byte_range is None:
        return None
    try:
        start, end = byte_range
    except (TypeError, ValueError):
        raise InvalidPathError(key, f"byte_range must be a (start, end) pair, got {byte_range!r}") from None
    if not (isinstance(start, int) and isinstance(end, int)) or start < 0 or end < start:
        raise InvalidPathError(key, f"byte_range must satisfy 0 <= start <= end, got {byte_range!r}")
    return start, end


class ObjectStore(abc.ABC):
    """An object store rooted at some location; keys are relative to that root."""

    #: The URL the store was opened from (for resolving sibling databases; messages show
    #: :attr:`shown_url`).
    url: str

    @property
    def shown_url(self) -> str:
        """:attr:`url` as messages show it: no user-info, no secret parameter value."""
        return shown_url(self.url)

    @abc.abstractmethod
    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        """The object's bytes, or ``data[start:end]`` of them (clipped to the object's size)."""

    @abc.abstractmethod
    async def head(self, key: str) -> ObjectMeta:
        """The object's metadata; ``ObjectNotFoundError`` if absent."""

    @abc.abstractmethod
    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        """Store ``data`` at ``key`` under ``mode``; returns the new object's metadata."""

    @abc.abstractmethod
    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        """Every object whose key starts with ``prefix``, in ascending key order."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Delete ``key``; deleting an absent key succeeds (as on S3)."""

    async def copy(self, src_key: str, dst_key: str) -> ObjectMeta:
        """Copy ``src_key`` to ``dst_key`` (overwriting); ``ObjectNotFoundError`` if src is absent."""
        got = await self.get(src_key)
        return await self.put(dst_key, got.data, OVERWRITE)

    async def check_root(self) -> None:
        """Raise a typed error if the store's root itself is gone (S3: the bucket,
        :class:`~slatedb.errors.BucketNotFoundError`); nothing for stores without one."""

    async def tidy_destroyed_root(self, directories: tuple[str, ...]) -> None:
        """After a destroy deleted the database's objects (destroy.md H5, S5): remove what this
        backend keeps for them beside the objects (the local store: its unheld lock files, those
        of the database's ``directories`` (``"manifest/"``, ...) that hold no file, the root once
        nothing is left in it). Never an object, nor a directory holding one; nothing for object
        stores, which keep nothing else."""

    def open_url(self, url: str) -> "ObjectStore":
        """Another database's store, reached from this one (a clone's parent, RFC 000 "SST Path
        Resolution") through the injected URL resolver (:func:`install_url_resolver`). Backends
        that live in a private world (the in-process memory registry, the simulator) override
        this to stay in it."""
        return url_resolver()(url)

    async def aclose(self) -> None:
        """Release backend resources (connections); the default has none."""
