"""The official binding's error types (``Error.Transaction``, ``Error.Closed``, ``Error.Unavailable``,
``Error.Invalid``, ``Error.Data``, ``Error.Internal``; ``MergeOperatorCallbackError.Failed``) with
its constructors, fields and ``str``/``repr``, and :func:`translated`, which maps this engine's
typed errors onto them at every call of the drop-in layer."""

from __future__ import annotations

import contextlib
import enum
from typing import Any, Iterator

from slatedb import errors as ours


class CloseReason(enum.Enum):
    CLEAN = 0
    FENCED = 1
    PANIC = 2
    UNKNOWN = 3


class InternalError(Exception):
    """Raised by the official binding when its FFI layer fails; kept for ``except`` clauses."""


def argument_type_error(message: str, cls: type[Exception] = TypeError) -> Exception:
    """An argument the official binding's generated checks refuse before the call: of the wrong
    type (a ``str`` where bytes go, say: a plain ``TypeError``) or outside its integer type or
    enum (``cls`` ``ValueError``), at every call of the drop-in layer; marked so that
    :func:`translated` lets it through rather than make it ``Error.Invalid``."""
    e = cls(message)
    e.slatedb_argument_type = True  # type: ignore[attr-defined]
    return e


#: The official binding's integer types: (low, high) bounds, high excluded.
_INT_RANGES = {"u32": (0, 2**32), "u64": (0, 2**64), "i64": (-(2**63), 2**63)}


def lowered_int(value: Any, kind: str) -> int:
    """An integer argument checked as the official's generated code lowers it: anything without
    ``__index__`` is a ``TypeError``, an int outside ``kind`` (u32, u64, i64) a ``ValueError``,
    with the official messages."""
    try:
        value = value.__index__()
    except Exception:
        raise argument_type_error(f"'{type(value).__name__}' object cannot be interpreted as an integer") from None
    lo, hi = _INT_RANGES[kind]
    if not lo <= value < hi:
        raise argument_type_error(f"{kind} requires {lo} <= value < {hi}", ValueError)
    return value


def _fmt(**fields: Any) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in fields.items())


class Error(Exception):
    """Error type returned by the bindings (variants are nested classes, as in the official)."""

    class Transaction(Exception):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, _fmt(message=message))
            self.message = message

    class Closed(Exception):
        def __init__(self, reason: CloseReason, message: str) -> None:
            Exception.__init__(self, _fmt(reason=reason, message=message))
            self.reason = reason
            self.message = message

    class Unavailable(Exception):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, _fmt(message=message))
            self.message = message

    class Invalid(Exception):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, _fmt(message=message))
            self.message = message

    class Data(Exception):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, _fmt(message=message))
            self.message = message

    class Internal(Exception):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, _fmt(message=message))
            self.message = message


# The variants subclass Error (as the official's do), so ``except Error`` catches them all.
for _name in ("Transaction", "Closed", "Unavailable", "Invalid", "Data", "Internal"):
    _v = getattr(Error, _name)
    _v = type(_name, (Error,), dict(_v.__dict__))
    _v.__qualname__ = f"Error.{_name}"
    _v.__repr__ = lambda self, _n=_name: f"Error.{_n}({self})"  # type: ignore[method-assign]
    setattr(Error, _name, _v)
del _name, _v


class MergeOperatorCallbackError(Exception):
    """What a :class:`MergeOperator` raises to fail a merge (``Failed(message)``)."""

    class Failed(Exception):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, _fmt(message=message))
            self.message = message


_failed = type("Failed", (MergeOperatorCallbackError,), dict(MergeOperatorCallbackError.Failed.__dict__))
_failed.__qualname__ = "MergeOperatorCallbackError.Failed"
_failed.__repr__ = lambda self: f"MergeOperatorCallbackError.Failed({self})"  # type: ignore[method-assign]
MergeOperatorCallbackError.Failed = _failed  # type: ignore[misc]
del _failed


def refused(what: str, why: str) -> Error:
    """The typed error of a call this engine does not honour."""
    return Error.Invalid(f"{what} is not supported by this engine: {why}")


def translate(e: BaseException, closed_reason: CloseReason | None = None) -> BaseException:
    """The official error matching one of ours (or ``e`` itself when it is already official)."""
    if isinstance(e, (Error, MergeOperatorCallbackError)) or getattr(e, "slatedb_argument_type", False):
        return e
    msg = str(e)
    if isinstance(e, ours.TransactionConflictError):
        return Error.Transaction(msg)
    if isinstance(e, ours.TransactionClosedError):
        return Error.Invalid(msg)
    if isinstance(e, ours.FencedError):
        return Error.Closed(CloseReason.FENCED, msg)
    if isinstance(e, ours.ClosedError):
        return Error.Closed(closed_reason or CloseReason.CLEAN, msg)
    if isinstance(e, (ours.InvalidArgumentError, ours.InvalidDeletionError, ValueError, TypeError)):
        return Error.Invalid(msg)  # InvalidDeletionError: a hard destroy refused (active checkpoints)
    if isinstance(e, ours.MergeOperatorError):
        return Error.Invalid(msg)
    if isinstance(e, ours.SegmentsUnsupportedError):
        return Error.Invalid(msg)  # as the official engine refuses a segmented database opened without its extractor
    if isinstance(e, (ours.CorruptionError, ours.NotFoundError, ours.InvalidDbStateError)):
        return Error.Data(msg)
    if isinstance(e, (ours.TransientObjectStoreError, ours.ObjectStoreRetriesExhaustedError)):
        return Error.Unavailable(msg)
    if isinstance(e, ours.ObjectStoreError):
        return Error.Data(msg) if isinstance(e, ours.ObjectNotFoundError) else Error.Unavailable(msg)
    if isinstance(e, ours.SlateDBError):
        return Error.Internal(msg)
    return e


@contextlib.contextmanager
def translated(closed_reason: Any = None) -> Iterator[None]:
    """Run a block, raising the official error for any of ours (the original chained)."""
    try:
        yield
    except Exception as e:
        t = translate(e, closed_reason() if callable(closed_reason) else closed_reason)
        if t is e:
            raise
        raise t from e
