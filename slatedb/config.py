"""Database settings, with the official SlateDB 0.17.0 names, nesting and defaults.

The names, the nesting and the defaults below were read from the official wheel
(``slatedb.uniffi.Settings.default().to_json_string()``); a copy of that dump is kept in
``tests/db/data/official_settings_default.json`` and a test compares against it.

Durations are stored as **float seconds** (the attribute names keep the official names, e.g.
``flush_interval``). When loading, a duration may be given as the official string form
(``"100ms"``, ``"1s"``, ``"1h 2m"``, ``"1s+500ms"``, units ns/us/µs/ms/s/m/h/d/w/mon/y and their
long forms) or as a number of seconds. :meth:`Settings.to_dict` writes the official string form
(millisecond precision, like the official serializer: ``"100ms"`` is written ``"100ms"``,
``1.5`` s is written ``"1s+500ms"``).

Our additions -- settings the official ``Settings`` does not have (it takes them through its
builder instead) -- are listed in :data:`OUR_SETTINGS` and left out of
:meth:`Settings.to_official_dict`: ``block_size_bytes``, ``filter_bits_per_key``,
``block_cache_size_bytes``, and nested, ``compactor_options.worker.cut_after_any_row``.

Loading is stricter than the official engine (which silently ignores unknown keys and accepts
e.g. ``l0_max_ssts = 0``): unknown keys, wrong types and out-of-range values raise
:class:`~slatedb.errors.InvalidArgumentError` naming the setting. Missing keys take defaults.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Final

import attrs

from slatedb.errors import InvalidArgumentError
from slatedb.settings_duration import format_duration, parse_duration  # noqa: F401  (re-exported)
from slatedb.settings_scheduler import SizeTieredOptions

KiB: Final = 1024
MiB: Final = 1024 * KiB
GiB: Final = 1024 * MiB

# ---------------------------------------------------------------------------------------------
# Field kinds (metadata on each attrs field drives loading, validation and dumping)
# ---------------------------------------------------------------------------------------------

_DURATION = "duration"
_INT = "int"
_BOOL = "bool"
_STR = "str"
_CODEC = "codec"
_METRIC_LEVEL = "metric_level"
_STR_MAP = "str_map"
_NESTED = "nested"

#: Official spellings of the compression codecs (``None`` means no compression).
COMPRESSION_CODECS: Final = ("Snappy", "Zlib", "Lz4", "Zstd")
#: Official spellings of the metric levels.
METRIC_LEVELS: Final = ("Debug", "Info")


#: The smallest interval a setting accepts (1 ms): 0 would make an idle loop spin (a core burnt).
MIN_INTERVAL_S: Final = 0.001

#: Upper bounds (refused naming the setting, as the official 0.17 ``Settings`` refuses them,
#: probed): an integer setting is a Rust u64 unless its field says u32; a duration at most u64
#: nanoseconds (``"18446744073s"`` is accepted, ``"18446744073s 999ms"`` overflows); bloom bits
#: per key whose probe count (``bits * 0.69``) fits the filter's u16 (more failed the L0 flush).
U32_MAX: Final = 2**32 - 1
U64_MAX: Final = 2**64 - 1
MAX_DURATION_S: Final = U64_MAX / 1e9
MAX_FILTER_BITS_PER_KEY: Final = 94979


def _f(kind: str, default: Any, *, min: float | None = None, max: float | None = None, optional: bool = False,
       ours: bool = False, why: str | None = None) -> Any:
    if max is None and kind in (_INT, _DURATION):  # the official engine's u64 (nanoseconds for a duration)
        max, why = (U64_MAX, "the official engine's u64") if kind == _INT else (MAX_DURATION_S, "the official engine's u64 nanoseconds")
    return attrs.field(default=default, metadata={"kind": kind, "min": min, "max": max, "optional": optional,
                                                  "ours": ours, "why": why})


def _nested(cls: type, *, optional: bool = False, default: Any = None) -> Any:
    factory = attrs.Factory(cls) if default is None else default
    return attrs.field(
        default=factory, metadata={"kind": _NESTED, "cls": cls, "min": None, "optional": optional, "ours": False}
    )


# ---------------------------------------------------------------------------------------------
# The settings classes
# ---------------------------------------------------------------------------------------------


_MODULE_READY = False


class _Validated:
    """Validation at construction: every field goes through the loader's conversion
    (:func:`_convert`), so ``Settings(flush_interval="10ms")``, ``Settings.from_dict(...)`` and
    ``attrs.evolve(...)`` accept and refuse exactly the same values; a nested table may be given
    as a dict. The top-level :class:`Settings` then refuses the official settings this engine
    does not implement unless they hold their default (:data:`NOT_IMPLEMENTED`)."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # An unknown keyword (a typo, ``Settings(flush_intervl="1s")``) is refused as the loader
        # refuses an unknown key, before attrs' ``__init__`` would raise a bare TypeError.
        names = {f.name for f in attrs.fields(cls)}
        unknown = sorted(k for k in kwargs if k not in names)
        if unknown:
            raise InvalidArgumentError(f"unknown setting {unknown[0]} ({cls.__name__} has no such field)")
        return super().__new__(cls)

    def __attrs_post_init__(self) -> None:
        if not _MODULE_READY:  # defaults built while this module loads are known good
            return
        for field in attrs.fields(type(self)):
            value = getattr(self, field.name)
            meta = field.metadata
            if meta["kind"] == _NESTED and isinstance(value, meta["cls"]):
                continue
            converted = _convert(field, value, field.name)
            if converted is not value:
                object.__setattr__(self, field.name, converted)
        if type(self).__name__ == "Settings":
            _check_not_implemented(self)


@attrs.frozen
class CompactorWorkerOptions(_Validated):
    """``compactor_options.worker``."""

    max_concurrent_compactions: int = _f(_INT, 4, min=1)
    compactions_poll_interval: float = _f(_DURATION, 5.0, min=MIN_INTERVAL_S)
    heartbeat_interval: float = _f(_DURATION, 10.0, min=MIN_INTERVAL_S)
    max_sst_size: int = _f(_INT, 256 * MiB, min=1)
    max_fetch_tasks: int = _f(_INT, 4, min=1)
    bytes_to_fetch: int = _f(_INT, 2 * MiB, min=1)
    max_subcompactions: int = _f(_INT, 4, min=1)
    min_filter_keys: int = _f(_INT, 1000, min=0, max=U32_MAX, why="the official engine's u32")
    compression_codec: str | None = _f(_CODEC, None, optional=True)
    metric_level: str | None = _f(_METRIC_LEVEL, None, optional=True)
    #: Ours: cut outputs after any row, as the official compactor does (else only between keys).
    cut_after_any_row: bool = _f(_BOOL, False, ours=True)


@attrs.frozen
class CompactorOptions(_Validated):
    """``compactor_options``."""

    poll_interval: float = _f(_DURATION, 5.0, min=MIN_INTERVAL_S)
    manifest_update_timeout: float = _f(_DURATION, 300.0, min=0)
    max_concurrent_compactions: int = _f(_INT, 4, min=1)
    enable_trivial_move: bool = _f(_BOOL, False)
    scheduler_options: Mapping[str, str] = attrs.field(
        factory=dict, metadata={"kind": _STR_MAP, "min": None, "optional": False, "ours": False}
    )
    worker: CompactorWorkerOptions = _nested(CompactorWorkerOptions)
    metric_level: str | None = _f(_METRIC_LEVEL, None, optional=True)
    commit_compacted_interval: float = _f(_DURATION, 1.0, min=MIN_INTERVAL_S)
    #: At most the u32 seconds a manifest holds an expiry in (the pin's expiry is capped at
    #: 2106, the last it can hold); a longer one was refused by the encoder in the background.
    checkpoint_lifetime: float = _f(_DURATION, 900.0, min=0, max=2**32 - 1, why="u32 seconds, a manifest's expiry")
    worker_heartbeat_timeout: float = _f(_DURATION, 30.0, min=0)
    object_store_max_retries: int | None = _f(_INT, None, min=0, max=U32_MAX, optional=True, why="the official engine's u32")


@attrs.frozen
class ObjectStoreCacheOptions(_Validated):
    """``object_store_cache_options`` (the local-disk object-store cache)."""

    root_folder: str | None = _f(_STR, None, optional=True)
    max_cache_size_bytes: int = _f(_INT, 16 * GiB, min=1)
    part_size_bytes: int = _f(_INT, 4 * MiB, min=1)
    cache_on_flush: bool = _f(_BOOL, False)
    cache_on_compaction: bool = _f(_BOOL, False)
    preload_disk_cache_on_startup: str | None = _f(_STR, None, optional=True)
    scan_interval: float | None = _f(_DURATION, 3600.0, min=MIN_INTERVAL_S, optional=True)
    max_open_file_handles: int = _f(_INT, 1000, min=1)


@attrs.frozen
class GarbageCollectorDirectoryOptions(_Validated):
    """One directory's garbage-collection schedule (``garbage_collector_options.*_options``)."""

    interval: float | None = _f(_DURATION, 600.0, min=MIN_INTERVAL_S, optional=True)
    min_age: float = _f(_DURATION, 300.0, min=0)
    dry_run: bool = _f(_BOOL, False)


@attrs.frozen
class GarbageCollectorDetachOptions(_Validated):
    """``garbage_collector_options.detach_options``."""

    interval: float | None = _f(_DURATION, 600.0, min=MIN_INTERVAL_S, optional=True)


@attrs.frozen
class GarbageCollectorOptions(_Validated):
    """``garbage_collector_options``. A directory's options set to ``None`` disable its GC."""

    manifest_options: GarbageCollectorDirectoryOptions | None = _nested(GarbageCollectorDirectoryOptions, optional=True)
    wal_options: GarbageCollectorDirectoryOptions | None = _nested(GarbageCollectorDirectoryOptions, optional=True)
    wal_fence_options: GarbageCollectorDirectoryOptions | None = _nested(
        GarbageCollectorDirectoryOptions, optional=True, default=GarbageCollectorDirectoryOptions(dry_run=True)
    )
    compacted_options: GarbageCollectorDirectoryOptions | None = _nested(GarbageCollectorDirectoryOptions, optional=True)
    compactions_options: GarbageCollectorDirectoryOptions | None = _nested(
        GarbageCollectorDirectoryOptions, optional=True
    )
    detach_options: GarbageCollectorDetachOptions | None = _nested(GarbageCollectorDetachOptions, optional=True)
    metric_level: str | None = _f(_METRIC_LEVEL, None, optional=True)
    boundary_files_enabled: bool = _f(_BOOL, True)
    object_store_max_retries: int | None = _f(_INT, None, min=0, max=U32_MAX, optional=True, why="the official engine's u32")


@attrs.frozen
class Settings(_Validated):
    """All database settings (official 0.17.0 names; durations in float seconds).

    Build with ``Settings()`` (defaults), :meth:`from_dict`, :meth:`from_file`,
    :meth:`from_env` or :meth:`load`; derive with ``attrs.evolve``.
    """

    flush_interval: float = _f(_DURATION, 0.1, min=MIN_INTERVAL_S)
    wal_enabled: bool = _f(_BOOL, True)
    manifest_poll_interval: float = _f(_DURATION, 1.0, min=MIN_INTERVAL_S)
    manifest_update_timeout: float = _f(_DURATION, 300.0, min=0)
    min_filter_keys: int = _f(_INT, 1000, min=0, max=U32_MAX, why="the official engine's u32")
    l0_sst_size_bytes: int = _f(_INT, 64 * MiB, min=1)
    max_wal_flushes_before_l0_flush: int = _f(_INT, 4096, min=1)
    l0_max_ssts: int = _f(_INT, 8, min=1)
    l0_max_ssts_per_key: int = _f(_INT, 8, min=1)
    l0_flush_parallelism: int = _f(_INT, 4, min=1)
    max_unflushed_bytes: int = _f(_INT, 1 * GiB, min=1)
    compactor_options: CompactorOptions | None = _nested(CompactorOptions, optional=True)
    compression_codec: str | None = _f(_CODEC, None, optional=True)
    object_store_cache_options: ObjectStoreCacheOptions = _nested(ObjectStoreCacheOptions)
    garbage_collector_options: GarbageCollectorOptions | None = _nested(GarbageCollectorOptions, optional=True)
    metric_level: str | None = _f(_METRIC_LEVEL, "Info", optional=True)
    default_ttl_millis: int | None = _f(_INT, None, min=1, max=(2**63 - 1 - 2**53), optional=True, why="a row's i64 expiry ms")
    object_store_max_retries: int | None = _f(_INT, None, min=0, max=U32_MAX, optional=True, why="the official engine's u32")

    # --- ours (not in the official Settings; see OUR_SETTINGS) ---------------------------------
    #: Target size of an SST data block (the official engine's default ``SstBlockSize``: 4096).
    block_size_bytes: int = _f(_INT, 4096, min=64, max=65536, ours=True, why="a block's u16 offsets")
    #: Bloom filter bits per key (the official ``BloomFilterOptions`` default: 10).
    filter_bits_per_key: int = _f(_INT, 10, min=1, max=MAX_FILTER_BITS_PER_KEY, ours=True, why="the filter's u16 probe count")
    #: Capacity of the in-memory block cache (ours; 0 disables it).
    block_cache_size_bytes: int = _f(_INT, 64 * MiB, min=0, ours=True)

    # -----------------------------------------------------------------------------------------

    @classmethod
    def default(cls) -> Settings:
        return cls()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        """Settings from a (possibly partial) dict in the official JSON shape, plus ours."""
        return _build(cls, data, "")

    @classmethod
    def from_json(cls, text: str) -> Settings:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"settings JSON is malformed: {e}") from e
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: str | Path) -> Settings:
        """Settings from a ``.json`` or ``.toml`` file (partial files take defaults)."""
        return cls.from_dict(_read_file(path))

    @classmethod
    def from_env(cls, environ: Mapping[str, str], prefix: str = "SLATEDB_") -> Settings:
        """Settings from environment variables: ``SLATEDB_FLUSH_INTERVAL=50ms``; nested levels
        joined with ``__`` (``SLATEDB_COMPACTOR_OPTIONS__WORKER__MAX_SST_SIZE=1048576``).
        ``null`` (or an empty string) sets an optional setting to ``None``."""
        return cls.from_dict(_env_dict(cls, environ, prefix))

    @classmethod
    def load(
        cls, path: str | Path | None = None, environ: Mapping[str, str] | None = None, prefix: str = "SLATEDB_",
        *, on_unrelated: Callable[[str], None] | None = None,
    ) -> Settings:
        """Defaults, overridden by the file at ``path`` (if given), overridden by the variables
        of ``environ`` starting with ``prefix`` (pass ``os.environ`` to use the process's).

        Variables the project uses for other things (:data:`NON_SETTING_VARIABLES`, e.g. the
        CLI's ``SLATEDB_DEBUG``) are never settings. Another unknown name is an error, unless
        ``on_unrelated`` is given: then a name that is not close to any setting's (so not a
        misspelling) is passed to it (to warn) and skipped."""
        merged: dict[str, Any] = {}
        if path is not None:
            merged = _read_file(path)
        if environ is not None:
            merged = _deep_merge(merged, _env_dict(cls, environ, prefix, on_unrelated))
        return cls.from_dict(merged)

    def to_dict(self, *, include_ours: bool = True) -> dict[str, Any]:
        """The official JSON shape (durations as official strings); ``from_dict`` round-trips it."""
        return _dump(self, include_ours)

    def to_official_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` without our additions: what the official ``Settings`` accepts."""
        return _dump(self, False)

    def to_json(self, *, include_ours: bool = True) -> str:
        return json.dumps(self.to_dict(include_ours=include_ours))


#: Official settings this engine does not implement, with what it does instead. Each is accepted
#: (so a settings file written for the official engine loads) only at the official default; any
#: other value raises :class:`InvalidArgumentError`, never silently ignored. docs/db.md lists them.
NOT_IMPLEMENTED: Final[dict[str, str]] = {
    "manifest_update_timeout": "a manifest update retries until it commits or fails for good, within the object-store retry bound",
    "max_wal_flushes_before_l0_flush": "memtables go to L0 by size (l0_sst_size_bytes) and on flush(wal=False)",
    "l0_max_ssts_per_key": "back-pressure counts L0 SSTs (l0_max_ssts) only",
    "l0_flush_parallelism": "memtables are flushed to L0 one at a time",
    "object_store_cache_options": "there is no local-disk object cache (the in-memory block cache is block_cache_size_bytes)",
    "metric_level": "every metric is recorded whatever the level (db.metrics())",
    "compactor_options.manifest_update_timeout": "see manifest_update_timeout",
    "compactor_options.enable_trivial_move": "every compaction rewrites its sources",
    "compactor_options.metric_level": "every metric is recorded whatever the level (db.metrics())",
    "compactor_options.worker.max_fetch_tasks": "a compaction reads its sources block by block, without prefetch tasks",
    "compactor_options.worker.bytes_to_fetch": "a compaction reads its sources block by block, without prefetch tasks",
    "compactor_options.worker.metric_level": "every metric is recorded whatever the level (db.metrics())",
    "garbage_collector_options.metric_level": "every metric is recorded whatever the level (db.metrics())",
}


def _check_not_implemented(settings: Any) -> None:
    defaults = Settings.__new__(Settings)  # the defaults, without recursing into validation
    for field in attrs.fields(Settings):
        object.__setattr__(defaults, field.name, field.default.factory() if isinstance(field.default, attrs.Factory)
                           else field.default)  # type: ignore[union-attr]
    for path, instead in NOT_IMPLEMENTED.items():
        value, default = settings, defaults
        parts = path.split(".")
        for part in parts[:-1]:  # a disabled table (compactor_options None) holds nothing to check
            value = None if value is None else getattr(value, part)
            default = getattr(default, part)
        if value is None:
            continue
        value, default = getattr(value, parts[-1]), getattr(default, parts[-1])
        if value is not None and value != default:
            raise InvalidArgumentError(
                f"setting {path} = {_show(value)} is not implemented here ({instead}); it is accepted only at the "
                f"official default {_show(default)} (docs/db.md lists the settings)")


def _show(value: Any) -> str:
    if isinstance(value, float):
        return format_duration(value)
    return repr(value)


#: Names of the top-level settings that are ours, not the official engine's.
OUR_SETTINGS: Final = tuple(a.name for a in attrs.fields(Settings) if a.metadata.get("ours"))


# ---------------------------------------------------------------------------------------------
# Loading and dumping
# ---------------------------------------------------------------------------------------------


def _read_file(path: str | Path) -> dict[str, Any]:
    if not isinstance(path, (str, Path)) and not hasattr(path, "__fspath__"):
        raise InvalidArgumentError(f"settings file path must be a str or a path, not {type(path).__name__}")
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InvalidArgumentError(f"cannot read settings file {str(path)!r}: {e}") from e
    try:
        if suffix == ".json":
            data = json.loads(raw)
        elif suffix == ".toml":
            data = tomllib.loads(raw.decode("utf-8"))
        else:
            raise InvalidArgumentError(f"settings file {str(path)!r} must end in .json or .toml")
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f"settings file {str(path)!r} is malformed: {e}") from e
    if not isinstance(data, dict):
        raise InvalidArgumentError(f"settings file {str(path)!r} must hold a table/object at the top")
    return data


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def _convert(field: attrs.Attribute, value: Any, name: str) -> Any:
    meta = field.metadata
    kind = meta["kind"]
    if value is None:
        if meta["optional"]:
            return None
        raise InvalidArgumentError(f"setting {name} cannot be null")
    if kind == _NESTED:
        if not isinstance(value, Mapping):
            raise InvalidArgumentError(f"setting {name} must be a table/object, not {type(value).__name__}")
        return _build(meta["cls"], value, name + ".")
    if kind == _DURATION:
        if isinstance(value, str):
            seconds = parse_duration(value, name=f"setting {name}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
            if not math.isfinite(seconds):
                raise InvalidArgumentError(f"setting {name} must be a finite duration, got {value!r}")
        else:
            raise InvalidArgumentError(
                f"setting {name} must be a duration (e.g. '100ms' or seconds), not {type(value).__name__}"
            )
        _check_min(meta, seconds, name)
        return seconds
    if kind == _INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"setting {name} must be an integer, not {type(value).__name__}")
        _check_min(meta, value, name)
        return value
    if kind == _BOOL:
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"setting {name} must be true or false, not {type(value).__name__}")
        return value
    if kind == _STR:
        if not isinstance(value, str):
            raise InvalidArgumentError(f"setting {name} must be a string, not {type(value).__name__}")
        return value
    if kind == _CODEC:
        return _choice(value, COMPRESSION_CODECS, name)
    if kind == _METRIC_LEVEL:
        return _choice(value, METRIC_LEVELS, name)
    if kind == _STR_MAP:
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise InvalidArgumentError(f"setting {name} must be a table of strings to strings")
        SizeTieredOptions.from_map(value)  # the only string map; refused here, not in the compactor's task
        return dict(value)
    raise AssertionError(f"unknown setting kind {kind!r}")  # pragma: no cover


def _check_min(meta: Mapping[str, Any], value: float, name: str) -> None:
    lo = meta["min"]
    if lo is not None and value < lo:
        raise InvalidArgumentError(f"setting {name} must be at least {lo}, got {value!r}")
    hi = meta.get("max")
    if hi is not None and value > hi:
        why = meta.get("why")
        shown = format_duration(hi) if meta["kind"] == _DURATION else hi
        raise InvalidArgumentError(f"setting {name} must be at most {shown}{f' ({why})' if why else ''}, got {value!r}")


def _choice(value: Any, choices: tuple[str, ...], name: str) -> str:
    if isinstance(value, str):
        for c in choices:
            if c.lower() == value.lower():
                return c
    raise InvalidArgumentError(f"setting {name} must be one of {', '.join(choices)} or null, got {value!r}")


def _build(cls: type, data: Mapping[str, Any], prefix: str) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f"settings{' ' + prefix[:-1] if prefix else ''} must be a table/object")
    fields = attrs.fields_dict(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            raise InvalidArgumentError(f"unknown setting {prefix}{key}{_unknown_hint(fields, key, prefix)}")
        kwargs[key] = _convert(field, value, prefix + key)
    return cls(**kwargs)


def _unknown_hint(fields: Mapping[str, Any], key: Any, prefix: str) -> str:
    """What to write instead of an unknown key: a dotted name of a nested setting (the name the
    docs' table gives) goes in a nested table; a near miss is named."""
    import difflib

    if not isinstance(key, str):
        return ""
    head, dot, rest = key.partition(".")
    if dot and head in fields and fields[head].metadata.get("kind") == _NESTED:
        inner = "".join("{" + repr(part) + ": " for part in rest.split("."))
        return (f" (a nested setting goes in a nested table: {{{head!r}: {inner}...{'}' * (rest.count('.') + 2)}, "
                f"or [{prefix}{'.'.join([head] + rest.split('.')[:-1])}] in TOML)")
    close = difflib.get_close_matches(key, list(fields), 1, 0.8)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def _dump(obj: Any, include_ours: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in attrs.fields(type(obj)):
        meta = field.metadata
        if meta.get("ours") and not include_ours:
            continue
        value = getattr(obj, field.name)
        if value is None:
            out[field.name] = None
        elif meta["kind"] == _NESTED:
            out[field.name] = _dump(value, include_ours)
        elif meta["kind"] == _DURATION:
            out[field.name] = format_duration(value)
        elif meta["kind"] == _STR_MAP:
            out[field.name] = dict(value)
        else:
            out[field.name] = value
    return out


#: ``SLATEDB_*`` environment variables that are not settings (the CLI's traceback switch).
NON_SETTING_VARIABLES: Final = frozenset({"SLATEDB_DEBUG"})


def _env_dict(cls: type, environ: Mapping[str, str], prefix: str,
              on_unrelated: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The typed partial dict that the variables of ``environ`` under ``prefix`` describe."""
    import difflib
    if not isinstance(environ, Mapping):
        raise InvalidArgumentError(f"environ must be a mapping such as os.environ, not {type(environ).__name__}")

    out: dict[str, Any] = {}
    for var, text in sorted(environ.items()):
        if not var.startswith(prefix) or var in NON_SETTING_VARIABLES:
            continue
        path = var[len(prefix) :].lower().split("__")
        target_cls: type = cls
        node = out
        names = list(attrs.fields_dict(cls))
        if path[0] not in names and on_unrelated is not None and not difflib.get_close_matches(path[0], names, 1, 0.8):
            on_unrelated(var)
            continue
        for i, part in enumerate(path):
            field = attrs.fields_dict(target_cls).get(part)
            if field is None:
                close = difflib.get_close_matches(part, list(attrs.fields_dict(target_cls)), 1, 0.8)
                hint = f" (did you mean {prefix}{'__'.join(path[:i] + close).upper()}?)" if close else ""
                if "." in part and not close:  # SLATEDB_COMPACTOR_OPTIONS.POLL_INTERVAL
                    hint = f" (levels are separated by __: {prefix}{'__'.join(path[:i] + part.split('.')).upper()})"
                raise InvalidArgumentError(f"unknown setting {'.'.join(path[: i + 1])} (environment variable {var}){hint}")
            kind = field.metadata["kind"]
            last = i == len(path) - 1
            if kind == _NESTED and not last:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):  # pragma: no cover - "null" then a sub-key
                    raise InvalidArgumentError(f"environment variable {var} conflicts with another")
                target_cls = field.metadata["cls"]
                continue
            if kind == _STR_MAP and i == len(path) - 2:
                node.setdefault(part, {})[path[-1]] = text
                break
            if not last:
                raise InvalidArgumentError(f"setting {'.'.join(path[: i + 1])} has no sub-settings (environment variable {var})")
            node[part] = _env_value(kind, text, field.metadata["optional"], var)
    return out


def _env_value(kind: str, text: str, optional: bool, var: str) -> Any:
    stripped = text.strip()
    if optional and stripped.lower() in ("", "null", "none"):
        return None
    if kind == _INT:
        try:
            return int(stripped.replace("_", ""))
        except ValueError:
            raise InvalidArgumentError(f"environment variable {var} must be an integer, got {text!r}") from None
    if kind == _BOOL:
        low = stripped.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise InvalidArgumentError(f"environment variable {var} must be true or false, got {text!r}")
    if kind == _DURATION:
        try:
            return float(stripped)  # a bare number: seconds
        except ValueError:
            return stripped
    if kind in (_NESTED, _STR_MAP):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            raise InvalidArgumentError(f"environment variable {var} must be a JSON object, got {text!r}") from None
    return text


_MODULE_READY = True
