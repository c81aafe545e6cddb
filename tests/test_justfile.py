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
