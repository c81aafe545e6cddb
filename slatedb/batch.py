"""Write batches and the validation of keys and values.

:func:`validate_key` / :func:`validate_value` are what ``Db.put`` calls on its hot path: a
``bytes`` argument within bounds costs one type check and one length check. ``bytearray`` and
``memoryview`` are accepted and copied to ``bytes``. Anything else, an empty key, or a size
above the limits raises :class:`~slatedb.errors.InvalidArgumentError` naming the problem.

Size limits. The official engine (0.17.0) rejects an empty key ("key cannot be empty") but no
longer caps keys at ``u16::MAX``: trying it, a 65,536-byte, a 1 MiB and a 16 MiB key were all
accepted by ``put``, flushed and read back after reopening. Its row codec (V2) stores key and
value lengths as LEB128 u32, so the hard limit of the format is ``u32::MAX`` for both; that is
the limit we enforce, for keys and values alike.

A :class:`WriteBatch` records operations in call order; the engine applies them atomically
with consecutive seqs. TTLs are in seconds (``ttl_s``): ``None`` means "the database default"
(``Settings.default_ttl_millis``), :data:`NO_EXPIRY` means "never expires", a positive number
means "expires ``ttl_s`` seconds after the write". :func:`expire_ts_ms` turns that into the
row's ``expire_ts_ms`` given the write time.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator
from typing import Any, Final, NamedTuple


from slatedb.errors import InvalidArgumentError
from slatedb.row import RowKind

#: Largest key the row format can hold (LEB128 u32 length); the official 0.17.0 engine
#: accepts keys above u16::MAX (see the module docstring).
MAX_KEY_SIZE_BYTES: Final = 2**32 - 1
#: Largest value the row format can hold (LEB128 u32 length).
MAX_VALUE_SIZE_BYTES: Final = 2**32 - 1
#: ``ttl_s`` meaning "this row never expires, whatever the database default".
NO_EXPIRY: Final = math.inf
#: The row format stores ``expire_ts`` as an i64 of Unix milliseconds.
MAX_EXPIRE_TS_MS: Final = 2**63 - 1
#: The longest TTL accepted at the call: ``now + ttl`` stays in the i64 range for any clock
#: before the year 285,000 (``now_ms < 2**53``); a longer one would kill the WAL encoder later.
MAX_TTL_S: Final = (MAX_EXPIRE_TS_MS - 2**53) // 1000


def _describe(obj: object) -> str:
    return type(obj).__name__


def _validate_key_slow(key: object) -> bytes:
    if isinstance(key, (bytearray, memoryview)):
        key = bytes(key)
    elif not isinstance(key, bytes):
        raise InvalidArgumentError(f"key must be bytes, bytearray or memoryview, not {_describe(key)}")
    n = len(key)  # type: ignore[arg-type]
    if n == 0:
        raise InvalidArgumentError("key cannot be empty")
    if n > MAX_KEY_SIZE_BYTES:
        raise InvalidArgumentError(f"key is {n} bytes, above the limit of {MAX_KEY_SIZE_BYTES} bytes")
    return bytes(key)  # type: ignore[arg-type]


def validate_key(key: object) -> bytes:
    """``key`` as ``bytes`` if acceptable, else :class:`InvalidArgumentError`."""
    if type(key) is bytes and 0 < len(key) <= MAX_KEY_SIZE_BYTES:
        return key
    return _validate_key_slow(key)


def _validate_value_slow(value: object) -> bytes:
    if isinstance(value, (bytearray, memoryview)):
        value = bytes(value)
    elif not isinstance(value, bytes):
        raise InvalidArgumentError(f"value must be bytes, bytearray or memoryview, not {_describe(value)}")
    n = len(value)  # type: ignore[arg-type]
    if n > MAX_VALUE_SIZE_BYTES:
        raise InvalidArgumentError(f"value is {n} bytes, above the limit of {MAX_VALUE_SIZE_BYTES} bytes")
    return bytes(value)  # type: ignore[arg-type]


def validate_value(value: object) -> bytes:
    """``value`` as ``bytes`` if acceptable (the empty value is), else :class:`InvalidArgumentError`."""
    if type(value) is bytes and len(value) <= MAX_VALUE_SIZE_BYTES:
        return value
    return _validate_value_slow(value)


def validate_ttl_s(ttl_s: object) -> float | None:
    """``ttl_s`` if acceptable: ``None``, :data:`NO_EXPIRY`, or a finite number > 0 (seconds)."""
    if ttl_s is None:
        return None
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)):
        raise InvalidArgumentError(f"ttl must be a number of seconds or None, not {_describe(ttl_s)}")
    if math.isnan(ttl_s) or ttl_s <= 0:
        raise InvalidArgumentError(f"ttl must be positive (seconds), got {ttl_s!r}")
    if ttl_s != NO_EXPIRY and ttl_s > MAX_TTL_S:
        raise InvalidArgumentError(f"ttl {ttl_s!r} s ends past the row format's expiry range (i64 Unix ms): at most "
                                   f"{MAX_TTL_S:g} s; use NO_EXPIRY for a row that never expires")
    return float(ttl_s)


def validate_flag(name: str, value: object) -> bool:
    """``value`` if it is a bool (``durable=``, ``wal=``); anything else, even truthy, is refused:
    ``durable="no"`` must not silently mean yes."""
    if type(value) is not bool:
        raise InvalidArgumentError(f"{name} must be True or False, not {_describe(value)}")
    return value


def validate_expire_at_ms(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"expire_at_ms must be an int (Unix milliseconds), not {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(f"expire_at_ms must be >= 0, got {value}")
    if value > MAX_EXPIRE_TS_MS:
        raise InvalidArgumentError(f"expire_at_ms {value} is above the row format's i64 range ({MAX_EXPIRE_TS_MS})")
    return value


def expire_ts_ms(now_ms: int, ttl_s: float | None, default_ttl_ms: int | None) -> int | None:
    """The ``expire_ts_ms`` of a row written at ``now_ms`` with ``ttl_s`` (see module docstring).

    ``default_ttl_ms`` is the database's ``default_ttl_millis`` (``None``: no default expiry).
    """
    if ttl_s is None:
        return None if default_ttl_ms is None else now_ms + default_ttl_ms
    if ttl_s == NO_EXPIRY:
        return None
    # Rows expire in whole milliseconds: a positive TTL lives at least one, never "already
    # expired" when written (a ttl below half a millisecond rounded to 0 did).
    return now_ms + max(1, round(ttl_s * 1000))


class OpKind(enum.IntEnum):
    """What a batch operation writes; the values match :class:`~slatedb.row.RowKind`."""

    PUT = RowKind.VALUE
    DELETE = RowKind.TOMBSTONE
    MERGE = RowKind.MERGE_OPERAND


class BatchOp(NamedTuple):
    """One operation of a batch. ``value`` is ``b""`` for a delete; ``ttl_s`` as in the module
    docstring (always ``None`` for a delete). A ``NamedTuple`` for the same reason as
    :class:`~slatedb.row.Row`: batches are built one op per call on the write path."""

    kind: OpKind
    key: bytes
    value: bytes = b""
    ttl_s: float | None = None


_PUT = OpKind.PUT
_DELETE = OpKind.DELETE
_MERGE = OpKind.MERGE
#: ``tuple.__new__``: builds a :class:`BatchOp` without the Python-level ``NamedTuple.__new__``
#: frame (the same object ``BatchOp(...)`` returns; one op per batched put, hot path).
_new = tuple.__new__


def _one_ttl(ttl: Any, ttl_s: Any) -> Any:
    if ttl is not None and ttl_s is not None:
        raise InvalidArgumentError("give the TTL once: ttl (seconds) or ttl_s, its older name, not both")
    return ttl if ttl is not None else ttl_s


class WriteBatch:
    """An ordered list of puts, deletes and merge operands, validated as they are added.

    A rejected call raises :class:`InvalidArgumentError` and leaves the batch unchanged.
    ``_plain`` is True while every operation is a put without a TTL (the engine's batch fast
    path builds those rows in one comprehension).

    A batch is written once: the write that applies its rows consumes it, and writing it again
    or adding to it afterwards raises :class:`InvalidArgumentError` ("write batch has already
    been consumed", as the official binding's ``Error.Invalid``) instead of writing its rows a
    second time. A write that raised before applying anything (closed, fenced, no merge
    operator) leaves the batch as it was. :meth:`clear` empties a batch, consumed or not, for
    reuse.
    """

    __slots__ = ("_ops", "_plain", "_consumed")

    def __init__(self) -> None:
        self._ops: list[BatchOp] = []
        self._plain = True
        self._consumed = False

    def _refuse_consumed(self) -> None:
        raise InvalidArgumentError("write batch has already been consumed (written once; clear() it to reuse it)")

    def put(self, key: bytes, value: bytes, ttl: float | None = None, *, ttl_s: float | None = None) -> None:
        """Add a put; ``ttl`` in seconds (as ``Db.put``'s; ``ttl_s`` is the same, its older name)."""
        if self._consumed:
            self._refuse_consumed()
        # validate_key / validate_value inlined for the common case (one call per batched put).
        if type(key) is not bytes or not key or len(key) > MAX_KEY_SIZE_BYTES:
            key = validate_key(key)
        if type(value) is not bytes or len(value) > MAX_VALUE_SIZE_BYTES:
            value = validate_value(value)
        if ttl is not None or ttl_s is not None:
            ttl_s = validate_ttl_s(_one_ttl(ttl, ttl_s))
            self._plain = False
        self._ops.append(_new(BatchOp, (_PUT, key, value, ttl_s)))

    def delete(self, key: bytes) -> None:
        if self._consumed:
            self._refuse_consumed()
        key = validate_key(key)
        self._ops.append(_new(BatchOp, (_DELETE, key, b"", None)))
        self._plain = False

    def merge(self, key: bytes, operand: bytes, ttl: float | None = None, *, ttl_s: float | None = None) -> None:
        """Add a merge operand for ``key`` (folded by the database's merge operator on reads,
        spec/protocols/merge.md); ``ttl`` as :meth:`put`'s. Writing the batch to a database
        opened without a merge operator raises
        :class:`~slatedb.errors.MergeOperatorMissingError` and writes nothing."""
        if self._consumed:
            self._refuse_consumed()
        key = validate_key(key)
        operand = validate_value(operand)
        if ttl is not None or ttl_s is not None:
            ttl_s = validate_ttl_s(_one_ttl(ttl, ttl_s))
        self._ops.append(_new(BatchOp, (_MERGE, key, operand, ttl_s)))
        self._plain = False

    @property
    def ops(self) -> tuple[BatchOp, ...]:
        """The operations in call order (a snapshot)."""
        return tuple(self._ops)

    @property
    def size_bytes(self) -> int:
        """Sum of key and value lengths of the operations."""
        return sum(len(op[1]) + len(op[2]) for op in self._ops)

    def __iter__(self) -> Iterator[BatchOp]:
        return iter(tuple(self._ops))

    def __len__(self) -> int:
        return len(self._ops)

    def __bool__(self) -> bool:
        return bool(self._ops)

    def clear(self) -> None:
        """Remove every operation; a consumed batch becomes writable again."""
        self._ops.clear()
        self._plain = True
        self._consumed = False

    def __repr__(self) -> str:
        consumed = ", consumed" if self._consumed else ""
        return f"WriteBatch(ops={len(self._ops)}, size_bytes={self.size_bytes}{consumed})"
