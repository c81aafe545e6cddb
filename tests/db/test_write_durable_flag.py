"""``durable=`` of every write call of ``Db`` (``put``, ``delete``, ``merge``, ``write``) takes
True or False only: anything else, truthy or not, is refused at the call with
:class:`InvalidArgumentError` and nothing is written (``slatedb.batch.validate_flag``). ``put``
has a fast path for ``durable=False`` that skips ``_write``'s check, so that path must be taken
for ``False`` itself only. `sim mutate` seed 25: the fast path's ``durable is False`` made
``durable < False`` took ``durable=-1`` (a write, unchecked) and raised a bare ``TypeError`` for
``"yes"`` or ``None``; no test of ``tests/db`` passed ``put`` a wrong flag."""

from __future__ import annotations

import pytest

import slatedb
from slatedb.errors import InvalidArgumentError

from .helpers import memory_store

NOT_FLAGS = [-1, 0, 1, 0.0, -0.5, None, "yes", "", b"\x00", [False]]


def _concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + operand


@pytest.mark.parametrize("value", NOT_FLAGS, ids=repr)
def test_a_write_refuses_a_durable_flag_that_is_not_a_bool_and_writes_nothing(value) -> None:
    with slatedb.Db.open("memory://durable-flag", store=memory_store(), merge_operator=_concat) as db:
        batch = slatedb.WriteBatch()
        batch.put(b"b", b"v")
        calls = {"put": lambda: db.put(b"k", b"v", durable=value),
                 "put with a ttl": lambda: db.put(b"k", b"v", 60.0, durable=value),
                 "delete": lambda: db.delete(b"k", durable=value),
                 "merge": lambda: db.merge(b"k", b"m", durable=value),
                 "write": lambda: db.write(batch, durable=value)}
        for name, call in calls.items():
            with pytest.raises(InvalidArgumentError, match="durable must be True or False"):
                call()
                pytest.fail(f"{name} took durable={value!r}")
        assert db.get(b"k") is None and db.get(b"b") is None
        assert db.put(b"k", b"v", durable=False).seq < db.put(b"k", b"w", durable=True).seq
        assert db.get(b"k") == b"w"
