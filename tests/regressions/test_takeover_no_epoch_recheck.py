"""Regression test written by `sim shrink` (name takeover_no_epoch_recheck).

Shrunk from `./just sim run --seed 1 --workload takeover --bug no-epoch-recheck`:
6 crashes, 284 faulted requests, 80 ops, 12 pauses, 13 processes, 2596 trace events, down to
1 ops, 1 pauses, 2 processes, 118 trace events. Fires DUR-1.
Replay: ./just sim run --seed 1 --workload takeover --bug no-epoch-recheck --keep 'op:r1w2:0 pause:r1w2 writer:r1w1 writer:r1w2' --trace
"""

from sim import bugs
from sim.shrink import Plan, simulate_plan
from sim.sweep import Scenario

WORKLOAD = 'takeover'
SEED = 1
BUGS = ('no-epoch-recheck',)
KEEP = 'op:r1w2:0 pause:r1w2 writer:r1w1 writer:r1w2'
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
