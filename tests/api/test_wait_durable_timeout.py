"""``WriteHandle.wait_durable(timeout_s=)`` (the sync API's) takes None (wait for good) or a
number of seconds >= 0; anything else is an ``InvalidArgumentError`` at the call, before the
wait kicks a WAL flush. Found trying boundary values: ``timeout_s="5"`` (a value from a config
file) raised a raw ``TypeError`` ('>' not supported between 'str' and 'int') from inside the
condition wait, ``True`` waited one second, and NaN or a negative timeout timed out at once as
if the database were slow."""

from __future__ import annotations

import math

import pytest

import slatedb
from slatedb.errors import InvalidArgumentError


@pytest.mark.parametrize("bad", ["5", True, math.nan, -1, -0.5, [1]])
def test_a_bad_timeout_is_refused_at_the_call(bad) -> None:
    with slatedb.Db.open("memory://wait-durable-timeout", {"flush_interval": "1h"}) as db:
        h = db.put(b"k", b"v")
        with pytest.raises(InvalidArgumentError, match="timeout_s"):
            h.wait_durable(timeout_s=bad)
        assert not h.durable  # the refused call kicked no flush
        h.wait_durable(timeout_s=10)
        assert h.durable
        with pytest.raises(InvalidArgumentError, match="timeout_s"):
            h.wait_durable(timeout_s=bad)  # refused even when there is nothing left to wait for
        h.wait_durable(timeout_s=0)
        h.wait_durable(timeout_s=math.inf)
