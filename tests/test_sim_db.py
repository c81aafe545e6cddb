"""The Db under simulation: writers fencing each other on a faulty store, checked on the trace."""

from __future__ import annotations

import pytest

from sim.db_workload import run_db_workload


def test_db_workload_passes_and_replays_bit_for_bit() -> None:
    results = [run_db_workload(seed) for seed in range(12)]
    failed = [(r.seed, r.violations) for r in results if not r.ok]
    assert not failed, failed
    assert sum(r.acked for r in results) > 200 and sum(r.fenced for r in results) >= 12
    assert sum(sum(r.faults.values()) for r in results) > 50
    again = run_db_workload(5)
    assert again.digest == results[5].digest and again.events == results[5].events


@pytest.mark.parametrize("mutation", ["no_epoch_checks", "ack_after_halt", "no_wal_replay"])
def test_the_trace_checks_catch_a_broken_writer(monkeypatch, mutation) -> None:
    """Break the writer on purpose: the simulator must report a violated invariant."""
    from slatedb.db import core
    from slatedb.wal.writer import WalWriter

    if mutation == "no_wal_replay":

        async def replay_nothing(store, runtime, after_id, before_id):
            return [], 0

        monkeypatch.setattr(core, "replay_wal", replay_nothing)
        expected = "acknowledged durable write"
    elif mutation == "no_epoch_checks":

        async def never_fenced(*args, **kwargs) -> None:
            return None

        monkeypatch.setattr(WalWriter, "_halt_if_newer", staticmethod(never_fenced))
        expected = "DUR-1"
    else:
        import trio

        async def write_wal_acking_regardless(self, rows) -> None:
            """_write_wal without the "halted meanwhile?" check before acknowledging."""
            with trio.CancelScope(shield=True):
                try:
                    wal_id = await self._wal.write(rows)
                except core.FencedError as e:
                    self._fail(e)
                    raise
                with self._lock:
                    self._durable_seq = rows[-1].seq
                    self.runtime.event("ack", path=core.wal_key(wal_id), epoch=self.epoch, seq=rows[-1].seq)
                    self._durable_cv.notify_all()
                self._durable_event.set()
                self._durable_event = trio.Event()

        monkeypatch.setattr(core.DbCore, "_write_wal", write_wal_acking_regardless)
        expected = "FENCE-3"
    results = [run_db_workload(seed) for seed in range(40)]
    violations = [v for r in results for v in r.violations]
    assert any(expected in v for v in violations), violations[:3]
