"""A merge operator that cannot be called as ``op(key, existing_value, operand) -> bytes`` is
refused at the open that passes it (``InvalidArgumentError`` naming what is wrong), not at every
read of a merged key afterwards.

Found by trying an ``async def`` operator with ``slatedb.aio`` (a natural thing to write in an
async program): the open, and every ``merge``, succeeded; every read of the key then raised
``MergeOperatorError: the operator returned coroutine, not bytes`` (with a "coroutine was never
awaited" warning), and a compaction failed the same way. An operator of the wrong arity (a
two-argument lambda) and a class passed instead of an instance went the same way.
"""

from __future__ import annotations

import asyncio
import functools

import pytest

import slatedb
import slatedb.aio as aio
from slatedb.errors import InvalidArgumentError
from slatedb.merge_operator import merge_operator_of


async def async_concat(key, existing, operand):
    return (existing or b"") + operand


class AsyncMerge:
    async def merge(self, key, existing, operand):
        return (existing or b"") + operand


class SyncMerge:
    def merge(self, key, existing_value, operand):
        return (existing_value or b"") + operand


class CallableAsync:
    async def __call__(self, key, existing, operand):
        return operand


BAD = [
    (async_concat, "async"),
    (AsyncMerge(), "async"),
    (CallableAsync(), "async"),
    (lambda key, operand: operand, "(key, existing_value, operand)"),
    (lambda key, existing, operand, extra: operand, "(key, existing_value, operand)"),
    (SyncMerge, "an instance"),
]


@pytest.mark.parametrize("op, words", BAD)
def test_an_operator_of_the_wrong_shape_is_refused_at_once(op, words) -> None:
    with pytest.raises(InvalidArgumentError, match="merge_operator") as info:
        merge_operator_of(op)
    assert words in str(info.value)


@pytest.mark.parametrize("op, words", BAD[:2])
def test_the_opens_refuse_it_and_write_nothing(tmp_path, op, words) -> None:
    url = f"file://{tmp_path}/db"
    with pytest.raises(InvalidArgumentError, match=words):
        slatedb.Db.open(url, merge_operator=op)

    async def main() -> None:
        async with aio.Db.open(url, merge_operator=op):
            pass

    with pytest.raises(InvalidArgumentError, match=words):
        asyncio.run(main())
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize("op", [
    lambda key, existing, operand: operand,
    lambda *args: args[2],
    lambda key, existing, operand, flag=False: operand,
    SyncMerge(),
    functools.partial(lambda sep, key, existing, operand: (existing or b"") + sep + operand, b","),
    slatedb.merge_operator.concat,
    max,  # a builtin without a signature to read: accepted (called as it is)
])
def test_operators_that_take_three_arguments_are_accepted(op) -> None:
    assert merge_operator_of(op) is not None
