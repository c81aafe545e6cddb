"""Regression test written by `sim shrink` (name db_zombie_ack).

Shrunk from `./just sim run --seed 1 --workload db --bug zombie-ack`:
2144 choices (911 not simplest), 209 ops, 596 trace events, 26 faults, down to
507 choices (31 not simplest), 6 ops, 228 trace events, 6 faults. Fires FENCE-3.
"""

from sim.scenarios import catalogue as bugs
from sim.world.choices import loads
from sim.campaign.shrink import simulate_choices
from sim.campaign.sweep import Scenario

WORKLOAD = 'db'
SEED = 1
BUGS = ('zombie-ack',)
INVARIANT = 'FENCE-3'
#: The shrunk choice sequence (sim.world.choices.dumps): per stream, its values.
CHOICES = (
    '{"settings":[2,1],"shape":[3,6],"store:w1":[0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,fa'
    'lse,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005'
    ',false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.000'
    '5,false,0,0.0005,false,0.0005,false,0,0.0014946838133631107,false,0.0008176317785980023,false,2,'
    '0.001325017067331179,false,0.0016468076456895313,false,0,0.0005,false,0.0005,false,0,0.0005,fals'
    'e,0.0005,false,0,0.0005,false,0.0016084140801670764,false,2,0.0011413323535218226,false,0.001275'
    '409938715956,false,0,0.0005037107642328462,false,0.0015972432528604161,false,0,0.0005,false,0.00'
    '05,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0'
    '.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,'
    '0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false'
    ',0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,fa'
    'lse,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,f'
    'alse,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.000'
    '5,false,0.001016149738914654,false,0,0.0018774816210980168,false,0.0006633386885317785,true,12.5'
    '42935765518223],"store:w2":[1,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,fal'
    'se,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,true,14.649411082696062],"stor'
    'e:w3":[0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0'
    '005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.'
    '0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0'
    ',0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,fals'
    'e,0.0005,false,0,0.0005,false,0.0005,false,0,0.0014945732374289698,true,22.618586253899572],"wor'
    'kload:w1":[false,0,false,false,false,false,0,true,false,false,false,0,true,false,false,false,0,f'
    'alse,false,false,false,0,true],"world":[0,false,false,true,0.001,1]}'
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
