"""``WritePath._kick_flush`` wakes the WAL flusher once per kick: a kick is recorded until the
flusher takes the buffer (``Flushers.flush_wal`` clears it), so the writes that follow a
crossed threshold neither schedule more wake-ups (a ``run_sync_soon`` per write from another
thread) nor keep calling ``_on_threshold`` (``_recompute_thresholds`` drops the WAL delta while
kicked)."""

from __future__ import annotations

import threading

from slatedb.db.write_path import WritePath


class _Wakeup:
    def __init__(self) -> None:
        self.sets = 0

    def set(self) -> None:
        self.sets += 1


class _Token:
    def __init__(self) -> None:
        self.calls = []

    def run_sync_soon(self, fn) -> None:
        self.calls.append(fn)


def _bare(on_trio_thread: bool) -> WritePath:
    w = WritePath.__new__(WritePath)
    w._kicked = False
    w._flusher_idle = False  # a flusher between flushes (tests/db/test_durable_wait_idle_flusher.py: asleep)
    w._trio_thread = threading.get_ident() if on_trio_thread else -1
    w._flush_wakeup = _Wakeup()
    w._trio_token = _Token()
    return w


def test_a_kick_from_the_trio_thread_wakes_the_flusher_once_until_it_runs():
    w = _bare(on_trio_thread=True)
    for _ in range(5):
        w._kick_flush()
    assert w._kicked and w._flush_wakeup.sets == 1
    w._kicked = False  # the flusher took the buffer
    w._kick_flush()
    assert w._flush_wakeup.sets == 2


def test_a_kick_from_another_thread_schedules_one_wakeup():
    w = _bare(on_trio_thread=False)
    for _ in range(5):
        w._kick_flush()
    assert w._kicked and len(w._trio_token.calls) == 1
    w._trio_token.calls[0]()
    assert w._flush_wakeup.sets == 1
