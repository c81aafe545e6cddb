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


def argument_type_error(message: str) -> TypeError:
    """An argument of the wrong type (a ``str`` where bytes go, say): a plain ``TypeError``, as
    the official binding's generated checks raise, at every call of the drop-in layer; marked
    so that :func:`translated` lets it through rather than make it ``Error.Invalid``."""
    e = TypeError(message)
    e.slatedb_argument_type = True  # type: ignore[attr-defined]
    return e


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
