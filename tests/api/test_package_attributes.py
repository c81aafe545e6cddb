"""After a plain ``import slatedb``, the submodules the documentation names as ``slatedb.<name>``
(``slatedb.aio.Db.open``, ``slatedb.admin.run_gc``, ...) are reachable without importing them
first, and a misspelt name is still an AttributeError. A fresh interpreter: in this process the
test suite has imported them all already."""

from __future__ import annotations

import subprocess
import sys


def test_documented_submodules_are_reachable_after_import_slatedb() -> None:
    code = (
        "import sys, slatedb\n"
        "assert 'slatedb.aio' not in sys.modules, 'import slatedb stays lazy'\n"
        "assert slatedb.aio.Db.open and slatedb.admin.run_gc and slatedb.destroy.destroy_url\n"
        "assert slatedb.uniffi is sys.modules['slatedb.uniffi']\n"
        "try:\n"
        "    slatedb.no_such_thing\n"
        "except AttributeError as e:\n"
        "    assert 'no_such_thing' in str(e)\n"
        "else:\n"
        "    raise SystemExit('a misspelt name must raise AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
