"""The rescale scenario (``sim/scenarios/rescale.py``): split by projection, shard writers, merge
by union, crashes of the rescaler and the union, GC everywhere; PROJ-1..5, READ-3, CLONE-1/2."""

from __future__ import annotations

import pytest

from sim.scenarios import catalogue as bugs
from sim.scenarios.rescale import run_rescale_workload
from sim.scenarios import registry as scenarios
pytestmark = pytest.mark.xdist_group("rescale")

#: Seeds that pass with every switch off (among them: rescaler and union restarts after crashes).
CLEAN_SEEDS = (0, 2)

#: First detecting seed of each catalogued projection/union bug (``sim hunt --bug NAME``).
FIRST_DETECTION = {
    "projection-widens-view": 0,
    "union-seq-not-max": 0,
    "union-external-dbs-not-merged": 1,
    "union-releases-source-checkpoint-early": 0,
    # the clone of a union whose shards were taken at two checkpoints of src/ (seeds 3, 7 of 0..7)
    "clone-shares-final-checkpoint": 3,
}


def test_every_rescale_entry_has_a_detection_within_its_budget() -> None:
    assert set(FIRST_DETECTION) == {b.name for b in bugs.CATALOGUE if b.workload == "rescale"}
    assert all(seed < bugs.BY_NAME[name].budget for name, seed in FIRST_DETECTION.items())
    assert "rescale" in scenarios.BY_NAME and "rescale" in bugs.WORKLOADS


def test_clean_worlds_merge_back_with_restarts() -> None:
    results = [run_rescale_workload(seed) for seed in CLEAN_SEEDS]
    assert all(r.ok for r in results), [(r.seed, r.violations) for r in results if not r.ok]
    assert all(r.outcome == "merged" and 2 <= r.shards <= 4 for r in results)
    assert sum(r.restarts for r in results) >= 1


def test_same_seed_same_trace() -> None:
    a, b = run_rescale_workload(3), run_rescale_workload(3)
    assert (a.ok, a.digest, a.events) == (b.ok, b.digest, b.events)


@pytest.mark.parametrize("switch", sorted(FIRST_DETECTION))
def test_each_rescale_bug_is_caught(switch: str) -> None:
    result = bugs.run("rescale", FIRST_DETECTION[switch], [switch])
    assert not result.ok
    assert bugs.fired(result) in bugs.BY_NAME[switch].invariants, result.violations


def test_a_rerun_refused_without_a_detach_is_still_clone_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario accepts a re-run's CloneMismatchError only when GC's detach explains it (seed
    800, tests/regressions/test_rescale_seeds.py); a creation that refuses its own unfinished or
    still attached result is CLONE-1 (seed 2 restarts the rescaler three times)."""
    from slatedb.clone import CloneMismatchError
    from slatedb.projection import create

    def refuse(self, m) -> None:
        raise CloneMismatchError("mutant: every existing destination refused")

    monkeypatch.setattr(create._Job, "_check_attached", refuse)
    result = run_rescale_workload(2)
    assert not result.ok and bugs.fired(result) == "CLONE-1", result.violations
