"""Regression test written by `sim shrink` (name db_zombie_ack).

Shrunk from `./just sim run --seed 1 --workload db --bug zombie-ack`:
4366 choices (1884 not simplest), 241 ops, 1503 trace events, 77 faults, down to
516 choices (77 not simplest), 37 ops, 174 trace events, 5 faults. Fires FENCE-3.
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
    '{"settings":[0,0,1],"shape":[2,37],"store:w1":[2,0.0007309633504138901,false,0.00102202429227463'
    '62,false,0,0.0010436967417851363,false,0.0010071772756196612,false,0,0.0016647122424713666,false'
    ',0.0016005486752502212,false,0,0.0010129747606633303,false,0.0005874850043937824,false,0,0.00198'
    '26736304685466,false,0.001377194338423998,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.000'
    '5,false,0,0.0016421821106964898,false,0.0010387412297754926,false,0,0.0019955914353527327,false,'
    '0.0009442180861447492,false,0,0.001468732593690887,false,0.0018725963317127066,false,0,0.0014946'
    '838133631107,false,0.0008176317785980023,false,2,0.001325017067331179,false,0.001646807645689531'
    '3,false,0,0.001660499664364975,false,0.0005258871590062173,false,0,0.0013211198655532393,false,0'
    '.0017030129639820858,false,0,0.0008251860753463443,false,0.0016084140801670764,false,2,0.0011413'
    '323535218226,false,0.001275409938715956,false,0,0.0005037107642328462,false,0.001597243252860416'
    '1,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.'
    '0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0'
    '.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,'
    '0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,fal'
    'se,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,fa'
    'lse,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005'
    ',false,0.0005,false,0,0.0005,false,0.001016149738914654,false,0,0.0018774816210980168,false,0.00'
    '06633386885317785,true,12.542935765518223],"store:w2":[0,0.0005,false,0.0005,false,0,0.0005,fals'
    'e,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,false,0,0.0005,false,0.0005,tru'
    'e,14.649411082696062],"workload:w1":[false,89,false,false,false,true,true,0,131,true,false,false'
    ',false,179,true,false,true,0.033418584797163996,false,132,false,false,false,true,false,189,121,f'
    'alse,false,false,false,133,false,false,false,false,12,true,false,false,false,0,false,false,false'
    ',false,0,false,false,false,false,0,false,false,false,false,0,false,false,false,false,0,false,fal'
    'se,false,false,0,false,false,false,false,0,false,false,false,false,0,false,false,false,false,0,t'
    'rue,false,true,0.0,false,0,false,false,false,false,0,false,false,false,false,0,false,false,false'
    ',false,0,false,false,false,false,0,false,false,false,false,0,false,false,false,false,174,true,fa'
    'lse,false,false,112,false,false,false,false,191,true,true,false,false,34,true,false,true,0.02909'
    '7827307986615,false,0,false,false,false,false,0,false,false,false,false,0,false,false,false,fals'
    'e,0,false,false,false,false,0,false,false,false,false,0,false,false,false,false,0,false,false,fa'
    'lse,false,140,true,false,false,false,173,true],"world":[0,false,false,true,0.001,1]}'
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
