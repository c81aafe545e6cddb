"""slatedb.checkpoint compiles without a ``SyntaxWarning`` (``is`` with a literal, an invalid
escape): under ``python -W error`` such a warning is a ``SyntaxError`` and ``import slatedb``
fails. Compiled from source in a child process (a ``.pyc`` would hide the warning, and the
compile must not run under this process's warning filters)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import slatedb.checkpoint

PACKAGE = Path(slatedb.checkpoint.__file__).parent

COMPILE_ALL = """
import sys
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        compile(f.read(), path, "exec")
"""


def test_the_checkpoint_package_compiles_with_warnings_as_errors() -> None:
    sources = sorted(str(p) for p in PACKAGE.glob("*.py"))
    assert len(sources) > 1, sources
    done = subprocess.run([sys.executable, "-W", "error", "-c", COMPILE_ALL, *sources],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
