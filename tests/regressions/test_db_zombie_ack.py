"""Regression test written by `sim shrink` (name db_zombie_ack).

Shrunk from `./just sim run --seed 2 --workload db --bug zombie-ack`:
2 crashes, 56 ops, 3 skews, 2 processes, 258 trace events, down to
56 ops, 2 processes, 255 trace events. Fires FENCE-3.
Replay: ./just sim run --seed 2 --workload db --bug zombie-ack --keep 'op:w1:0-55 writer:w1 writer:w2' --trace
"""

from sim import bugs
from sim.shrink import Plan, simulate_plan
from sim.sweep import Scenario

WORKLOAD = 'db'
SEED = 2
BUGS = ('zombie-ack',)
KEEP = 'op:w1:0-55 writer:w1 writer:w2'
INVARIANT = 'FENCE-3'


def _run(bug_switches):
    result, _ = simulate_plan(Scenario(workload=WORKLOAD, bugs=bug_switches), SEED, Plan.parse(KEEP))
    return result


def test_fails_with_the_bug_on():
    result = _run(BUGS)
    assert not result.ok and bugs.fired(result) == INVARIANT, result.violations


def test_passes_with_the_bug_off():
    result = _run(())
    assert result.ok, result.violations
