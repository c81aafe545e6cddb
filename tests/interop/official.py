"""Drive the official SlateDB wheel (``slatedb==0.17.0``) as a subprocess test peer.

Why a subprocess in its own venv: the official wheel's import name, ``slatedb``, collides with
ours, so it lives in ``.cache/official-venv`` and scripts run there with ``python -I``. The venv
itself (creation under a file lock, reuse) is :mod:`slatedb.bench.official_venv`, shared with the
side-by-side benchmark; its names are re-exported here.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from slatedb.bench.official_venv import (  # noqa: F401  (re-exported: the public names of this module)
    _INSTALL_TIMEOUT_S,
    _LOCK,
    _MARKER,
    CACHE_DIR,
    OFFICIAL_VERSION,
    REPO_ROOT,
    VENV_DIR,
    OfficialUnavailable,
    _venv_python,
    ensure_official_venv,
)

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
