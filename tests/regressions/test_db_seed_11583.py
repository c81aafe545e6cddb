"""db seed 11583 (found by `sim dst --workload db --seeds 10000..11999`, fourteenth session; on
the code of 2333232 too): writer w1's point get of a key stalled 838 virtual seconds on the GET
of an L0 SST's block; meanwhile the compactor replaced that L0 SST, the compaction's 15-minute
pin on the replaced manifest expired and GC deleted the SST. The GET came back "not found" and
the writer's process died with ``ObjectNotFoundError`` (ESCAPE-1). Now a point read whose SST
left the current view before it was read starts again on the current state (reader.md READ-7,
"a view outlived"; probe read.view-collected).

Since the manifest store reads an unchanged latest manifest by its listing alone and a sorted
run's stream closes its SST's generator (2026-11-27, sixteenth session) the seed's draws no
longer stall that GET: the seed still passes, and the branch is held by
``tests/db/test_read_view_collected.py`` (``sim.world.probes.UNIT_REACHED``)."""

from __future__ import annotations

from sim.campaign.sweep import Scenario, run_seed


def test_seed_11583_passes_and_reads_again_on_the_current_state() -> None:
    r = run_seed(Scenario(workload="db"), 11583)
    assert r["ok"], r.get("violations")
    from sim.world.probes import UNIT_REACHED
    assert "read.view-collected" in UNIT_REACHED  # the stalled read's branch, held by its unit test
