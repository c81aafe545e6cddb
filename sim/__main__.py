"""``python -m sim``: the simulator's command line (:mod:`sim.cli`), as the ``sim`` console
script: ``python -m sim run --workload gc --seed 371`` replays one seed."""

import sys

from sim.cli import main

sys.exit(main())
