"""Drive the official SlateDB wheel (``slatedb==0.17.0``) as a subprocess test peer.

Why a subprocess in its own venv: the official wheel's import name, ``slatedb``, collides with
ours, so it lives in ``.cache/official-venv`` (created once, reused across runs) and scripts
run there with ``python -I`` (isolated: neither the script's directory nor the current
directory nor ``PYTHONPATH`` can shadow the official package with ours).

Creation is guarded by an ``fcntl`` file lock so that parallel pytest-xdist workers do not race;
a marker file written last says the venv is complete.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

OFFICIAL_VERSION = "0.17.0"
REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache"
VENV_DIR = CACHE_DIR / "official-venv"
_MARKER = VENV_DIR / f".slatedb-{OFFICIAL_VERSION}-installed"
_LOCK = CACHE_DIR / "official-venv.lock"
_INSTALL_TIMEOUT_S = 600

#: Prepended to every script: imports and small helpers the scripts share.
PRELUDE = textwrap.dedent(
    '''
    import asyncio, base64, json, sys
    import slatedb.uniffi as u

    def store_at(root):
        """A local-directory object store rooted at ``root`` (must exist)."""
        return u.ObjectStoreBuilder.from_url("file://" + root).build()

    def settings(overrides=None):
        s = u.Settings.default()
        for key, value in (overrides or {}).items():
            s.set(key, json.dumps(value))
        return s

    async def open_db(root, path="db", overrides=None):
        b = u.DbBuilder(path, store_at(root))
        b.with_settings(settings(overrides))
        return await b.build()

    async def scan_all(db):
        it = await db.scan(u.KeyRange(start=None, start_inclusive=False, end=None, end_inclusive=False))
        out = []
        while True:
            batch = await it.next_batch(1000)
            if not batch:
                return out
            out.extend(batch)

    def b64(data):
        return None if data is None else base64.b64encode(bytes(data)).decode()

    def emit(obj):
        print("\\n__RESULT__" + json.dumps(obj))
    '''
)


class OfficialUnavailable(RuntimeError):
    """The official wheel could not be installed from this machine's package registry."""


def _venv_python() -> Path:
    return VENV_DIR / "bin" / "python"


def ensure_official_venv() -> Path:
    """Create (once, under a lock) the venv holding the official wheel; return its python."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    if _MARKER.exists():
        return _venv_python()
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _MARKER.exists():  # another worker finished while we waited
                return _venv_python()
            if not _venv_python().exists():
                subprocess.run([sys.executable, "-m", "venv", str(VENV_DIR)], check=True)
            proc = subprocess.run(
                [str(_venv_python()), "-m", "pip", "install", "-q", f"slatedb=={OFFICIAL_VERSION}"],
                capture_output=True,
                text=True,
                timeout=_INSTALL_TIMEOUT_S,
            )
            if proc.returncode != 0:
                raise OfficialUnavailable(f"pip install slatedb=={OFFICIAL_VERSION} failed:\n{proc.stderr}")
            _MARKER.write_text(OFFICIAL_VERSION + "\n")
            return _venv_python()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class OfficialError(AssertionError):
    """A script run in the official venv exited non-zero."""


class Official:
    """Runs Python scripts against the official wheel. See :data:`PRELUDE` for helpers."""

    def __init__(self, python: Path) -> None:
        self.python = python

    def run(self, script: str, *args: str, timeout_s: float = 180) -> str:
        """Run ``PRELUDE + script`` with ``args`` (``sys.argv[1:]``); return its stdout."""
        with tempfile.TemporaryDirectory(prefix="slatedb-official-") as tmp:
            path = Path(tmp) / "script.py"
            path.write_text(PRELUDE + "\n" + textwrap.dedent(script))
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
            proc = subprocess.run(
                [str(self.python), "-I", str(path), *args],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        if proc.returncode != 0:
            raise OfficialError(f"official script failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        return proc.stdout

    def run_json(self, script: str, *args: str, timeout_s: float = 180) -> Any:
        """Run a script that calls ``emit(obj)``; return the emitted (last) object."""
        out = self.run(script, *args, timeout_s=timeout_s)
        results = [line for line in out.splitlines() if line.startswith("__RESULT__")]
        if not results:
            raise OfficialError(f"official script emitted no result; stdout:\n{out[-4000:]}")
        return json.loads(results[-1][len("__RESULT__") :])
