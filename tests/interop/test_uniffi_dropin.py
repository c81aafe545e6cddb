"""Issue 22 item 6: ``slatedb.uniffi`` is a drop-in for programs written against the official
wheel. Each program under ``uniffi_programs/`` is written in the official style (``import
slatedb.uniffi as u``, ``asyncio.run``) and prints one JSON result; it runs unchanged with the
official wheel's python (its own venv, ``-I``: only the official package importable) and with
ours (``PYTHONPATH`` = this repository), and the two results must be equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.official import REPO_ROOT

pytestmark = pytest.mark.interop

PROGRAMS = Path(__file__).parent / "uniffi_programs"


def _run(python: list[str], program: Path, root: Path, pythonpath: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    root.mkdir()
    proc = subprocess.run([*python, str(program), str(root)], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{program.name} failed under {python[0]}:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("program", sorted(p.name for p in PROGRAMS.glob("*.py")))
def test_same_results_on_the_official_wheel_and_on_ours(official, tmp_path, program):
    path = PROGRAMS / program
    theirs = _run([str(official.python), "-I"], path, tmp_path / "official", None)
    ours = _run([sys.executable], path, tmp_path / "ours", str(REPO_ROOT))
    assert ours == theirs


def test_our_package_is_the_one_the_programs_import(tmp_path):
    """The programs import ``slatedb.uniffi`` of this repository (not the official wheel)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    out = subprocess.run([sys.executable, "-c", "import slatedb.uniffi as u; print(u.__file__)"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, check=True).stdout
    assert Path(out.strip()).is_relative_to(REPO_ROOT)
