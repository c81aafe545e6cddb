"""Read and scan options, row metadata and status: the official binding's names (0.17), frozen
values checked at construction. A value this engine does not implement is refused here, at
the call, naming the option and what happens instead; an unknown option name (in a dict, or a
keyword of the constructor) too.

* :class:`ReadOptions` (``get``, ``get_key_value``): ``durability_filter`` MEMORY (default: every
  applied write) or REMOTE (only writes already in a WAL object), ``dirty``, ``cache_blocks``.
* :class:`ScanOptions` (``scan``, ``scan_prefix``): the same plus ``order`` (ASCENDING /
  DESCENDING), ``read_ahead_bytes``, ``max_fetch_tasks``.
* :class:`KeyValue`: what ``get_key_value`` returns (``seq``, ``create_ts``, ``expire_ts`` in Unix
  milliseconds, ``None`` when the row has none).
* :class:`DbStatus`, :class:`CloseReason`: ``Db.status()``.
"""

from __future__ import annotations

import enum
import uuid
from typing import Any, Mapping

import attrs

from slatedb.errors import InvalidArgumentError


class DurabilityLevel(enum.Enum):
    MEMORY = "memory"
    REMOTE = "remote"


class IterationOrder(enum.Enum):
    ASCENDING = "ascending"
    DESCENDING = "descending"


class CloseReason(enum.Enum):
    CLEAN = "clean"
    FENCED = "fenced"
    PANIC = "panic"
    UNKNOWN = "unknown"


def _enum(cls: type[enum.Enum], name: str):
    def convert(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for member in cls:
                if value.lower() in (member.value, member.name.lower()):
                    return member
        raise InvalidArgumentError(f"{name} must be one of {', '.join(m.name for m in cls)}, not {value!r}")
    return convert


def _flag(name: str, allowed: tuple[bool, ...], why: str = ""):
    def check(_inst: Any, _attr: Any, value: Any) -> None:
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{name} must be a bool, not {type(value).__name__}")
        if value not in allowed:
            raise InvalidArgumentError(f"{name}={value} is not supported: {why}")
    return check


def _default_only(name: str, default: Any, why: str):
    def check(_inst: Any, _attr: Any, value: Any) -> None:
        if value is not None and value != default:
            raise InvalidArgumentError(f"{name}={value!r} is not supported: {why}")
    return check


_DIRTY_WHY = ("every write is applied to the memtable and readable at once; durability_filter=REMOTE "
              "is how to read only durable writes")
_CACHE_WHY = "every block read goes through the block cache (block_cache_size_bytes=0 disables it)"


def _known_keywords(cls: Any, kwargs: Mapping[str, Any]) -> Any:
    """``object.__new__(cls)`` once every keyword names a field: a typo such as
    ``ReadOptions(durabilty_filter=...)`` is refused as a dict's unknown key is, not with the bare
    TypeError of attrs' ``__init__``."""
    names = {a.name for a in attrs.fields(cls)}
    unknown = sorted(k for k in kwargs if k not in names)
    if unknown:
        raise InvalidArgumentError(f"unknown {cls.__name__} option: {', '.join(unknown)} (known: {', '.join(sorted(names))})")
    return object.__new__(cls)


@attrs.frozen
class ReadOptions:
    durability_filter: DurabilityLevel = attrs.field(default=DurabilityLevel.MEMORY,
                                                     converter=_enum(DurabilityLevel, "durability_filter"))
    dirty: bool = attrs.field(default=False, validator=_flag("dirty", (False,), _DIRTY_WHY))
    cache_blocks: bool = attrs.field(default=True, validator=_flag("cache_blocks", (True,), _CACHE_WHY))

    def __new__(cls, *args: Any, **kwargs: Any) -> "ReadOptions":
        return _known_keywords(cls, kwargs)  # type: ignore[no-any-return]

    @classmethod
    def of(cls, value: Any) -> "ReadOptions":
        return _coerce(cls, value, "read options")


@attrs.frozen
class ScanOptions:
    durability_filter: DurabilityLevel = attrs.field(default=DurabilityLevel.MEMORY,
                                                     converter=_enum(DurabilityLevel, "durability_filter"))
    dirty: bool = attrs.field(default=False, validator=_flag("dirty", (False,), _DIRTY_WHY))
    read_ahead_bytes: int | None = attrs.field(default=None, validator=_default_only(
        "read_ahead_bytes", 1, "scans fetch consecutive uncached blocks in reads of about 256 KiB"))
    cache_blocks: bool = attrs.field(default=True, validator=_flag("cache_blocks", (True,), _CACHE_WHY))
    max_fetch_tasks: int | None = attrs.field(default=None, validator=_default_only(
        "max_fetch_tasks", 1, "a scan fetches one read at a time"))
    order: IterationOrder = attrs.field(default=IterationOrder.ASCENDING, converter=_enum(IterationOrder, "order"))

    def __new__(cls, *args: Any, **kwargs: Any) -> "ScanOptions":
        return _known_keywords(cls, kwargs)  # type: ignore[no-any-return]

    @classmethod
    def of(cls, value: Any) -> "ScanOptions":
        return _coerce(cls, value, "scan options")


def _coerce(cls: Any, value: Any, what: str) -> Any:
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        names = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise InvalidArgumentError(f"unknown {what}: {', '.join(map(str, unknown))} (known: {', '.join(sorted(names))})")
        return cls(**value)
    raise InvalidArgumentError(f"{what} must be a {cls.__name__} or a dict, not {type(value).__name__}")


@attrs.frozen
class KeyValue:
    """A row with its metadata (``get_key_value``): timestamps in Unix milliseconds."""

    key: bytes
    value: bytes
    seq: int
    create_ts: int | None
    expire_ts: int | None


@attrs.frozen
class DbStatus:
    """``Db.status()``: the newest durable seq, and why the database closed (None while open)."""

    durable_seq: int
    close_reason: CloseReason | None


@attrs.frozen
class DbReaderStatus:
    """``DbReader.status()``: what a reader knows of its view (docs/reader.md). ``durable_seq``
    and ``close_reason`` as :class:`DbStatus`'s (a reader holds durable rows only: its durable
    seq is the newest seq it holds; CLEAN after ``close()``, PANIC once a fatal error stopped
    it, such as its database destroyed); ``manifest_id``: the manifest the view is pinned to;
    ``checkpoint_id``: the checkpoint pinning it (given at the open, or the reader's own);
    ``last_wal_id``: the newest WAL object in the view (0: none since the manifest's)."""

    durable_seq: int
    close_reason: CloseReason | None
    manifest_id: int
    checkpoint_id: uuid.UUID | None
    last_wal_id: int
