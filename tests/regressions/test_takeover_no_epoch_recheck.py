"""Regression test written by `sim shrink` (name takeover_no_epoch_recheck).

Shrunk from `./just sim run --seed 2 --workload takeover --bug no-epoch-recheck`:
1 crashes, 28 faulted requests, 2 ops, 4 pauses, 4 processes, 196 trace events, down to
2 faulted requests, 1 ops, 2 processes, 87 trace events. Fires DUR-1.
Replay: ./just sim run --seed 2 --workload takeover --bug no-epoch-recheck --keep 'f:r0w1:2 f:r0w3:8 op:r0w3:0 writer:r0w1 writer:r0w3' --trace
"""

from sim import bugs
from sim.shrink import Plan, simulate_plan
from sim.sweep import Scenario

WORKLOAD = 'takeover'
SEED = 2
BUGS = ('no-epoch-recheck',)
KEEP = 'f:r0w1:2 f:r0w3:8 op:r0w3:0 writer:r0w1 writer:r0w3'
INVARIANT = 'DUR-1'


def _run(bug_switches):
    result, _ = simulate_plan(Scenario(workload=WORKLOAD, bugs=bug_switches), SEED, Plan.parse(KEEP))
    return result


def test_fails_with_the_bug_on():
    result = _run(BUGS)
    assert not result.ok and bugs.fired(result) == INVARIANT, result.violations


def test_passes_with_the_bug_off():
    result = _run(())
    assert result.ok, result.violations
