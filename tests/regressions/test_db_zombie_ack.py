"""Regression test written by `sim shrink` (name db_zombie_ack).

Shrunk from `./just sim run --seed 1 --workload db --bug zombie-ack`:
2718 choices (1153 not simplest), 230 ops, 818 trace events, 38 faults, down to
499 choices (45 not simplest), 8 ops, 223 trace events, 7 faults. Fires FENCE-3.
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
    '{"shape":[3,8],"store:w1":[0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,fals'
    'e,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,fal'
    'se,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,'
    'false,0.0005,false,0,0.0014946838133631107,false,0.0008176317785980023,false,2,0.001325017067331'
    '179,false,0.0016468076456895313,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,'
    '0.0005,false,0.0016084140801670764,false,2,0.0011413323535218226,false,0.001275409938715956,fals'
    'e,0,0.0005037107642328462,false,0.0015972432528604161,false,0,0.0005,false,0.0005,false,0,0.0005'
    ',false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.001'
    '3895894030875556,false,0,0.001166745384039053,false,0.0007039498340723681,false,2,0.001402590540'
    '225347,false,0.0007810066289781453,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false'
    ',0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,fa'
    'lse,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,f'
    'alse,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.000'
    '5,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.001016149738914654,false,0,0.0'
    '018774816210980168,false,0.0006633386885317785,true,12.542935765518223],"store:w2":[0,0.0005,fal'
    'se,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,fa'
    'lse,0,0.0005,false,0.0005,true,14.649411082696062],"store:w3":[0,0.0005,false,0.0005,false,0,0.0'
    '005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.'
    '0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0'
    ',0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,fals'
    'e,0.0014786938914434363,false,0,0.0011372604202373041,false,0.0009214400943138191,false,0,0.0007'
    '774636188852193,false,0.0017520910997332825,false,2,0.0019764615053609173,false,0.00176659976827'
    '31072,false,0,0.0014945732374289698,true,22.618586253899572],"workload:w1":[false,0,false,true,f'
    'alse,false,0,true,false,false,false,0,true,false,true,0.033418584797163996,false,0,false,false,f'
    'alse,false,0,false,false,false,false,0,true],"world":[0,false,false,true,0.001,1]}'
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
