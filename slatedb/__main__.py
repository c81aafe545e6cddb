"""``python -m slatedb``: the ``slatedb`` admin tool (:mod:`slatedb.cli`) where the console
script is not on ``PATH`` (a virtualenv that is not activated, ``pipx run``, a container)."""

import sys

from slatedb.cli import main

sys.exit(main())
