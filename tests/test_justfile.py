"""``./just --list`` shows one complete line per recipe (issue 25 item 8): just prints only the
last comment line above a recipe, so a description spread over several lines used to start
mid-sentence ("(e.g. ./just bench --runs 1 ..."). Multi-line recipes carry a one-line
``[doc("...")]``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_recipe_has_one_complete_line_in_the_list() -> None:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "just"), "--justfile", str(ROOT / "Justfile"),
                          "--working-directory", str(ROOT), "--list"], capture_output=True, text=True,
                         check=True).stdout
    recipes = re.findall(r"^\s*([a-z][\w-]*)\b", (ROOT / "Justfile").read_text(), flags=re.M)
    lines = [line.strip() for line in out.splitlines()[1:] if line.strip()]
    listed = {line.split()[0]: line for line in lines}
    for name in {r for r in recipes if r not in ("set", "python")}:
        line = listed.get(name)
        assert line is not None and "# " in line, f"{name}: no description in ./just --list"
        desc = line.split("# ", 1)[1]
        assert desc[0].isupper() and desc.rstrip().endswith((".", ")")), f"{name}: starts or ends mid-sentence: {desc!r}"


def test_a_recipe_running_a_python_command_passes_its_arguments() -> None:
    """``./just bench-format --help`` said "justfile does not contain recipe `--help`", and its
    ``--compression`` option could not be given at all: the recipe took no arguments. A recipe
    that runs a Python module with a command line (an ``ArgumentParser``) passes ``*args``
    through, so its ``--help`` and options reach it."""
    text = (ROOT / "Justfile").read_text()
    for m in re.finditer(r"^([a-z][\w-]*)([^:\n]*):\n((?:[ \t]+.*\n?)+)", text, flags=re.M):
        name, params, body = m.groups()
        mod = re.search(r"\{\{python\}\} -m ([\w.]+)", body)
        source = ROOT / (mod.group(1).replace(".", "/") + ".py") if mod else None
        if source is not None and source.exists() and "ArgumentParser" in source.read_text():
            assert "*args" in params and "{{args}}" in body, f"{name}: runs a Python command line without *args"
    out = subprocess.run([str(ROOT / "just"), "bench-format", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.startswith("usage: bench-format"), (out.returncode, out.stdout, out.stderr)
