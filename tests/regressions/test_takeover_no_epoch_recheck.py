"""Regression test written by `sim shrink` (name takeover_no_epoch_recheck).

Shrunk from `./just sim run --seed 1 --workload takeover --bug no-epoch-recheck`:
5004 choices (2640 not simplest), 80 ops, 2596 trace events, 315 faults, down to
166 choices (11 not simplest), 1 ops, 128 trace events, 4 faults. Fires DUR-1.
"""

from sim.scenarios import catalogue as bugs
from sim.world.choices import loads
from sim.campaign.shrink import simulate_choices
from sim.campaign.sweep import Scenario

WORKLOAD = 'takeover'
SEED = 1
BUGS = ('no-epoch-recheck',)
INVARIANT = 'DUR-1'
#: The shrunk choice sequence (sim.world.choices.dumps): per stream, its values.
CHOICES = (
    '{"shape":[1,3],"store:r0w0":[0,0.04922942782205359,0.0005,0,0.0005,0.0005,0,0.0005,0.0005,0,0.00'
    '05,0.0005,0,0.0005,0.0005,0,0.0005,0.0005,0,0.0005,0.0005,0,0.0005,0.0005,0,0.0005,0.0005,0,0.00'
    '05,0.0005,0,0.0005,0.030601725729125825],"store:r0w1":[1,0.0005,0.0005,0,0.0005,0.0005,0,0.0005,'
    '0.04866672215925137],"store:r0w2":[0,0.0005,0.0005,0,0.0005,0.0005,1,0.0005,0.0005,0,0.0005,0.00'
    '05,0,0.0005,0.0005,0,0.0005,0.032982663818728386,0,0.03329447862654644],"workload:r0w1":[false,t'
    'rue],"workload:r0w2":[false,true,3]}'
)


def _run(bug_switches):
    result, _, _ = simulate_choices(Scenario(workload=WORKLOAD, bugs=bug_switches), SEED, loads(CHOICES))
    return result


def test_fails_with_the_bug_on():
    result = _run(BUGS)
    assert not result.ok and bugs.fired(result) == INVARIANT, result.violations


def test_passes_with_the_bug_off():
    result = _run(())
    assert result.ok, result.violations
