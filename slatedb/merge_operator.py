"""Merge operators (spec/protocols/merge.md): what a user gives at open, and how the engine calls it.

A merge operator is a Python callable ``op(key, existing_value, operand) -> bytes`` or an object
with such a ``merge`` method (the official binding's ``MergeOperator`` subclasses fit).
``existing_value`` is ``None`` when the key has no base value (nothing, a tombstone, an expired
value) or when a compaction folds operands without their base (a *partial* merge, which assumes
the operator is associative, as the official engine does).

:func:`merge_operator_of` checks what the user passed, at the call that passed it.
:func:`fold` applies the operator to operands oldest first; any exception it raises, and any
result that is not bytes, becomes :class:`~slatedb.errors.MergeOperatorError` naming the key
(MERGE-7).
"""

from __future__ import annotations

import importlib
import inspect
import threading
from typing import Any, Callable, Protocol, Sequence

from slatedb.errors import InvalidArgumentError, MergeOperatorError, MergeOperatorMissingError

#: The engine's view of an operator: ``fn(key, existing_value, operand) -> bytes``.
MergeFn = Callable[[bytes, "bytes | None", bytes], bytes]


class MergeOperator(Protocol):
    """What :func:`merge_operator_of` accepts besides a plain callable."""

    def merge(self, key: bytes, existing_value: bytes | None, operand: bytes) -> bytes: ...


def merge_operator_of(op: Any) -> MergeFn | None:
    """The function to call for ``op`` (``None`` stays ``None``): ``op.merge`` when ``op`` has a
    callable ``merge`` attribute, else ``op`` itself if callable; anything else is refused."""
    if op is None:
        return None
    if isinstance(op, type) and callable(getattr(op, "merge", None)):
        raise InvalidArgumentError(f"merge_operator must be an instance of {op.__name__}, not the class: pass "
                                   f"{op.__name__}()")
    method = getattr(op, "merge", None)
    if callable(method):
        return _checked_shape(method, f"{type(op).__name__}.merge")
    if callable(op):
        return _checked_shape(op, getattr(op, "__name__", type(op).__name__))
    raise InvalidArgumentError(
        f"merge_operator must be a callable (key, existing_value, operand) -> bytes or an object with such a "
        f"merge method, not {type(op).__name__}")


def _checked_shape(fn: Any, name: str) -> MergeFn:
    """``fn`` if it can be called as ``fn(key, existing_value, operand)`` and returns its result
    (not a coroutine): the engine calls it inside reads, flushes and compactions, where nothing is
    awaited. A callable whose signature cannot be read (some builtins) is taken as it is."""
    call = getattr(fn, "__call__", None)
    if (inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)
            or (not inspect.isroutine(fn) and inspect.iscoroutinefunction(call))):
        raise InvalidArgumentError(
            f"merge_operator {name} is an async function: the engine calls it inside reads and compactions, "
            "where it cannot be awaited; give a plain def (key, existing_value, operand) -> bytes")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    try:
        signature.bind(b"k", None, b"o")
    except TypeError:
        raise InvalidArgumentError(
            f"merge_operator {name}{signature} cannot be called as (key, existing_value, operand)") from None
    return fn


def concat(key: bytes, existing_value: bytes | None, operand: bytes) -> bytes:
    """A ready-made operator: byte concatenation (the official documentation's example; it is
    associative). By name: ``slatedb.merge_operator:concat``."""
    return operand if existing_value is None else existing_value + operand


def load_merge_operator(spec: str) -> MergeFn:
    """The operator named ``"package.module:name"`` (``slatedb run-compactor --merge-operator``):
    a callable, an object with ``merge``, or a class of such objects (instantiated without
    arguments). A name that does not resolve is refused naming it."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidArgumentError(f"merge operator {spec!r} must be given as package.module:name")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as e:
        raise InvalidArgumentError(f"merge operator {spec!r} cannot be loaded: {e}") from None
    if isinstance(found, type):
        found = found()
    op = merge_operator_of(found)
    assert op is not None
    return op


def fold(op: MergeFn | None, key: bytes, base: bytes | None, operands: Sequence[bytes]) -> bytes:
    """``base`` with ``operands`` (oldest first) applied one by one: ``op(key, acc, operand)``."""
    if op is None:
        raise MergeOperatorMissingError(
            f"key {key!r} holds merge operands and no merge operator is configured "
            "(open the database with merge_operator=...)", key)
    acc = base
    for operand in operands:
        try:
            out = op(key, acc, operand)
        except MergeOperatorError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's code: any failure becomes typed
            raise MergeOperatorError(key, f"{type(e).__name__}: {e}") from e
        except BaseException as e:
            # SystemExit, GeneratorExit, or a KeyboardInterrupt the operator raised itself (off the
            # main thread no Ctrl-C arrives): on the runtime thread (a compaction, a flush, a
            # block read) it ended the engine's whole trio run, and the database stopped with
            # a bare "the database was aborted". A Ctrl-C on the main thread still interrupts.
            if isinstance(e, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                raise
            raise MergeOperatorError(key, f"{type(e).__name__}: {e}") from e
        if type(out) is not bytes:
            if isinstance(out, (bytes, bytearray, memoryview)):
                out = bytes(out)  # a bytes subclass (numpy.bytes_, say) too, as the official takes it
            else:
                raise MergeOperatorError(key, f"the operator returned {type(out).__name__}, not bytes")
        acc = out
    assert acc is not None
    return acc
