"""Regression test written by `sim shrink` (name db_zombie_ack).

Shrunk from `./just sim run --seed 1 --workload db --bug zombie-ack`:
13 faulted requests, 2 jumps, 36 ops, 3 skews, 3 processes, 208 trace events, down to
5 faulted requests, 8 ops, 2 processes, 215 trace events. Fires FENCE-3.
Replay: ./just sim run --seed 1 --workload db --bug zombie-ack --keep 'f:w1:1,12,16,24,40 op:w1:1-2,6,22,24-25,34-35 writer:w1 writer:w3' --trace
"""

from sim import bugs
from sim.shrink import Plan, simulate_plan
from sim.sweep import Scenario

WORKLOAD = 'db'
SEED = 1
BUGS = ('zombie-ack',)
KEEP = 'f:w1:1,12,16,24,40 op:w1:1-2,6,22,24-25,34-35 writer:w1 writer:w3'
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
