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


def test_the_timeout_bounds_the_whole_wait_not_each_wake_up() -> None:
    """Every WAL write that lands wakes every durable waiter; the wait restarted its timeout at
    each wake-up, so a waiter whose own row kept not landing while others' did waited on past
    its timeout (for ever, with writes landing more often than the timeout). Here each wake-up
    of the condition is one that did not make the row durable and takes 1 s of the runtime's
    clock: the wait must give up after ``timeout_s`` of it, not wait on."""
    with slatedb.Db.open("memory://wait-durable-whole", {"flush_interval": "1h"}) as db:
        core = db._core
        h = db.put(b"k", b"v")
        clock = [0.0]
        wakeups = []
        runtime = core.runtime

        class Cv:  # the durable condition: woken (True) by someone else's write, 1 s later
            def wait(self, timeout=None):
                wakeups.append(timeout)
                clock[0] += 1.0
                assert len(wakeups) < 50, f"still waiting after {len(wakeups)} wake-ups of 1 s, timeout 3 s"
                return True

        real_cv, real_clock = core._durable_cv, runtime.monotonic_s
        core._durable_cv = Cv()
        core._kick_flush = lambda: None  # no WAL write: the row stays in memory
        runtime.monotonic_s = lambda: clock[0]
        try:
            with pytest.raises(TimeoutError):
                h.wait_durable(timeout_s=3)
        finally:
            core._durable_cv, runtime.monotonic_s = real_cv, real_clock
            del core._kick_flush
        assert len(wakeups) == 3 and wakeups[0] == 3, wakeups
        h.wait_durable(timeout_s=10)


def test_a_timeout_beyond_what_a_thread_can_wait_is_no_limit() -> None:
    """``timeout_s=2**64`` (or anything above ``threading.TIMEOUT_MAX``) waits as ``inf`` does.
    Before: "OverflowError: timestamp out of range for platform time_t" from the condition
    variable, untyped, after the wait had kicked a flush."""
    with slatedb.Db.open("memory://wait-durable-huge", {"flush_interval": "50ms"}) as db:
        h = db.put(b"k", b"v")
        h.wait_durable(timeout_s=2**64)
        assert h.durable
        db.put(b"k2", b"v").wait_durable(timeout_s=1e300)
