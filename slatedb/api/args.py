"""Argument handling shared by every front-end (``Db``, ``aio.Db``, ``DbReader``): settings in any
accepted form, ``store=`` and ``runtime=`` of an open, the ``create`` mode, scan bounds. Each raises
:class:`InvalidArgumentError` naming the argument at the call."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

from slatedb.batch import validate_key
from slatedb.config import Settings
from slatedb.errors import InvalidArgumentError
from slatedb.lsm.view import KeyBounds
from slatedb.manifest.missing import CREATE_MODES
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import check_url_type
from slatedb.runtime import Runtime


def coerce_settings(settings: Settings | Mapping[str, Any] | str | Path | None) -> Settings:
    """``None``: defaults; a dict: :meth:`Settings.from_dict`; a path: a JSON or TOML file."""
    if settings is None:
        return Settings.default()
    if isinstance(settings, Settings):
        return settings
    if isinstance(settings, Mapping):
        return Settings.from_dict(settings)
    if isinstance(settings, (str, Path)):
        return Settings.from_file(settings)
    raise InvalidArgumentError(
        f"settings must be a Settings, a dict or a path to a JSON/TOML file, not {type(settings).__name__}"
    )


#: What an object given as ``store=`` must offer (an ObjectStore, or an object of its shape).
STORE_METHODS = ("get", "put", "list", "delete", "head")


def check_open_args(store: Any, runtime: Any, url: Any) -> None:
    """``store=`` and ``runtime=`` of an ``open``, checked at the call (InvalidArgumentError), and
    its ``url`` a string (InvalidUrlError: before the url keys anything, ``Db.open({...})`` with
    the URL forgotten names it)."""
    check_url_type(url)
    if store is not None and not isinstance(store, ObjectStore):
        missing = [m for m in STORE_METHODS if not callable(getattr(store, m, None))]
        if missing:
            raise InvalidArgumentError(f"store must be an ObjectStore (slatedb.objstore), not {type(store).__name__} "
                                       f"(no {', '.join(missing)})")
    check_runtime_arg(runtime)


def check_runtime_arg(runtime: Any) -> None:
    if runtime is not None and not isinstance(runtime, Runtime) and not callable(runtime):
        raise InvalidArgumentError(f"runtime must be a Runtime, a factory of one, or None, not {type(runtime).__name__}")


def check_create_mode(create: object) -> str:
    """``Db.open(create=...)``: ``"if_missing"`` (default) creates a database where the path holds
    nothing of one; ``"never"`` opens an existing database only; ``"force"`` also creates one
    where a database's data is left without its manifests (slatedb/manifest/missing.py)."""
    if create not in CREATE_MODES:
        raise InvalidArgumentError(f"create must be one of {', '.join(map(repr, CREATE_MODES))}, not {create!r}")
    return create  # type: ignore[return-value]


def _bound(value: object, name: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    if not isinstance(value, bytes):
        raise InvalidArgumentError(f"scan {name} must be bytes or None, not {type(value).__name__}")
    return value


def scan_bounds(start: object, end: object) -> KeyBounds:
    """``[start, end)``; ``None`` leaves a side open. A range with no key in it, ``start`` above
    ``end`` or equal to it, is refused at the call (as the official binding refuses it: "range
    start must not be greater than range end", "range must be non-empty"): it is a mistake,
    not a question whose answer is "nothing"."""
    lo, hi = _bound(start, "start"), _bound(end, "end")
    if lo is not None and hi is not None and lo >= hi:
        if lo == hi:
            raise InvalidArgumentError(f"scan range is empty: start == end == {lo!r} (the end is exclusive)")
        raise InvalidArgumentError(f"scan start {lo!r} is greater than end {hi!r}")
    return KeyBounds(lo, True, hi, False)


def prefix_bounds(prefix: object) -> KeyBounds:
    """The keys starting with ``prefix`` (bytes; ``b""`` is every key, as any prefix of them)."""
    if isinstance(prefix, (bytearray, memoryview)):
        prefix = bytes(prefix)
    if not isinstance(prefix, bytes):
        raise InvalidArgumentError(f"scan prefix must be bytes, not {type(prefix).__name__}")
    if not prefix:
        return KeyBounds(None, True, None, False)
    prefix = validate_key(prefix)
    end = prefix_successor(prefix)
    return KeyBounds(prefix, True, end, False)


def prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None if there is none)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def check_batch_size(n: object) -> int:
    """``next_batch(n)``: a non-negative int (a negative one sliced the buffered rows from the
    end and returned some of them; a string failed deep inside with a TypeError)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidArgumentError(f"next_batch needs a non-negative int, not {n!r}")
    return min(n, sys.maxsize)  # "up to n rows": a larger n is every row left (islice refuses it)
