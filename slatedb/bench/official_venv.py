"""The venv holding the official SlateDB wheel (``slatedb==0.17.0``), created once and reused.

Why a venv of its own: the official wheel's import name, ``slatedb``, collides with ours, so it
lives in ``.cache/official-venv`` and scripts run there with ``python -I`` (isolated: neither the
script's directory nor the current directory nor ``PYTHONPATH`` can shadow the official package
with ours). Used by the interop tests (``tests/interop/official.py``) and by the side-by-side
benchmark (``slatedb.bench.db``).

Creation is guarded by an ``fcntl`` file lock so that parallel pytest-xdist workers (or a test
run and a benchmark) do not race; a marker file written last says the venv is complete.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

OFFICIAL_VERSION = "0.17.0"
#: The repository root (this module is ``<root>/slatedb/bench/official_venv.py``; the project is
#: installed editable, so this is the checkout).
REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache"
VENV_DIR = CACHE_DIR / "official-venv"
_MARKER = VENV_DIR / f".slatedb-{OFFICIAL_VERSION}-installed"
_LOCK = CACHE_DIR / "official-venv.lock"
_INSTALL_TIMEOUT_S = 600


class OfficialUnavailable(RuntimeError):
    """The official wheel could not be installed from this machine's package registry."""


def venv_python() -> Path:
    """The official venv's python (it may not exist yet: see :func:`ensure_official_venv`)."""
    return VENV_DIR / "bin" / "python"


_venv_python = venv_python  # the name tests/interop/official.py used


def ensure_official_venv() -> Path:
    """Create (once, under a lock) the venv holding the official wheel; return its python."""
    return ensure_venv(VENV_DIR, [f"slatedb=={OFFICIAL_VERSION}"], _MARKER, _LOCK)


def ensure_venv(venv_dir: Path, requirements: list[str], marker: Path, lock_path: Path) -> Path:
    """Create (once, under the file lock ``lock_path``) a venv with ``requirements`` installed;
    ``marker``, written last, says it is complete. Returns its python."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    python = venv_dir / "bin" / "python"
    if marker.exists():
        return python
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if marker.exists():  # another worker finished while we waited
                return python
            if not python.exists():
                subprocess.run([sys.executable, "-m", "venv", str(venv_dir)], check=True)
            proc = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", *requirements],
                capture_output=True,
                text=True,
                timeout=_INSTALL_TIMEOUT_S,
            )
            if proc.returncode != 0:
                raise OfficialUnavailable(f"pip install {' '.join(requirements)} failed:\n{proc.stderr}")
            marker.write_text(" ".join(requirements) + "\n")
            return python
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
