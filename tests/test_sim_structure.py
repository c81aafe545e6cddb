"""``slatedb check`` at the end of every simulated run (issue 26 item 2, sim/checks/structure.py):
a catalogue switch that only the check catches, and the simulator defect the check found."""

from __future__ import annotations

import trio

import sim.scenarios.takeover as takeover
from sim.scenarios.rescale import run_rescale_workload
from sim.world.choices import Choices
from sim.world.runtime import SimRuntime
from sim.world.trace import Trace


def test_check_alone_catches_an_orphaned_writer_checkpoint(monkeypatch) -> None:
    """writer-checkpoint-orphaned: no trace oracle watches writer checkpoints; the run passes
    without the end-of-run check and fails with it, naming CKPT-3."""
    bug = frozenset({"writer-checkpoint-orphaned"})
    caught = takeover.run_takeover_workload(0, bugs=bug)
    assert not caught.ok and caught.violations[0].invariant == "CKPT-3", caught.violations

    async def no_check(*args, **kwargs):
        return {}

    monkeypatch.setattr(takeover, "check_world", no_check)
    assert takeover.run_takeover_workload(0, bugs=bug).ok  # every other oracle is blind to it
    monkeypatch.undo()
    assert takeover.run_takeover_workload(0).ok


def test_runtimes_of_one_name_mint_distinct_ids() -> None:
    """Found by the end-of-run check (rescale seeds 4, 6: CLONE-1): the rescaler makes shard
    after shard as "rs"; each runtime of that name drew the same id stream, so every shard's
    final checkpoint on the source had one id, and the first shard GC detached released the
    others' protection."""

    async def main():
        choices = Choices(4)
        trace = Trace(trio.current_time)
        ids = [SimRuntime("rs", choices, trace).new_uuid() for _ in range(3)]
        ids += [SimRuntime("rs.r1", choices, trace).new_uuid() for _ in range(2)]
        return ids

    ids = trio.run(main)
    assert len(set(ids)) == len(ids)


def test_rescale_seed_4_shards_keep_their_final_checkpoints() -> None:
    result = run_rescale_workload(4)
    assert result.ok, result.violations
