"""Every fenced Python and shell block of ``README.md`` and ``docs/*.md`` runs as written (issue 16 item 6,
issue 25 item 7).

The convention (also stated in ``README.md``, section "Documentation"):

* Each page's ```` ```python ```` blocks run **in order, in one fresh Python process** (one
  namespace, like a reader typing them into one session), with a fresh temporary directory as
  the working directory. A later block may use names an earlier block of the same page defined.
* ``file:///`` URLs in a block are rooted in that temporary directory: ``file:///data/prod``
  runs as ``file://<tmp>/data/prod``, so a page can show realistic absolute paths.
  ``memory://`` stores work as they are.
* A block preceded by ``<!-- doc-test: s3 -->`` runs against a SeaweedFS server started for
  the test: the standard ``AWS_*`` variables point at it. The server starts with no bucket, as
  a user's does: the block creates the buckets it uses.
* A block that genuinely cannot run here is preceded by ``<!-- doc-test: skip REASON -->`` (for
  example ``needs a Spark session``); the reason is required and is shown as the skip reason.
  Prefer making a block runnable (a temporary directory, the in-process store) to skipping it.
* A block runs within :data:`TIMEOUT_S`; top-level ``await`` is not allowed (use ``trio.run``).

Shell blocks run too (issue 25 item 7):

* ```` ```sh ```` (or ```` ```bash ````) blocks are commands; a ```` ```console ```` block shows a
  session: its ``$ `` lines are the commands (a line ending in ``\\`` continues on the next), the
  other lines are output and are not checked. Plain output and tables are ```` ```text ````.
* Each page's shell commands run **in order, in one** ``bash -euo pipefail`` **process**, after
  the page's python blocks, in the same temporary directory (so a shell block may use a database
  a python block of the page made). Every command must succeed; a command that is meant to fail
  says so itself (``cmd || test $? = 1``).
* ``file:///`` is rooted in the temporary directory as for python blocks; ``PATH`` starts with the
  virtualenv's ``bin`` (``slatedb``, ``sim``, ``python``); ``$REPO`` is the repository root and
  ``PYTHONPATH`` points at it.
* ``./just`` in a block is a stand-in written into the temporary directory: ``./just sim ARGS``
  runs ``sim ARGS`` (``dst``: ``sim dst``, ``sim-bench``: ``sim bench``, ``models``:
  ``python $REPO/models/run.py``) *in the temporary directory*, so output files land there; any
  other recipe fails, so a block using one is skipped with a reason (the real ``./just`` installs
  into ``.venv`` and runs from the repository root). ``models`` in the temporary directory is a
  link to the repository's ``models/`` (read-only use: a page copies a model out of it).
* The same directives apply (``skip REASON``, ``s3``). Blocks that take minutes (``./just dst``,
  benchmarks, mutation runs, Spark clusters) are skipped, saying how long they take.

Other fences (```` ```text ````, ```` ```mermaid ````...) are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT_S = 180

_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:\s*(\S+)\s*(.*?)\s*-->\s*$")


@attrs.frozen
class Block:
    page: Path
    kind: str  # "python" | "sh" (sh, bash, shell and console blocks)
    line: int  # 1-based line of the first code line
    code: str
    directive: str | None  # "skip" | "s3" | None
    reason: str


PYTHON_LANGS = ("python", "py", "python3")
SHELL_LANGS = ("sh", "bash", "shell")


def _console_commands(body: str) -> str:
    """The commands of a ```console``` session: its ``$ `` lines and their ``\\`` continuations."""
    out: list[str] = []
    cont = False
    for line in body.splitlines():
        if cont:
            out.append(line)
        elif line.startswith("$ "):
            out.append(line[2:])
        else:
            out.append("")  # output: not run (kept as a blank line so line numbers hold)
            continue
        cont = line.rstrip().endswith("\\")
    return "\n".join(out)


def extract(page: Path) -> list[Block]:
    """The python and shell blocks of ``page`` with the directive of the line above each."""
    blocks: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2).lower()
        j = i + 1
        while j < len(lines) and not (lines[j].strip() == "```"):
            j += 1
        if lang in PYTHON_LANGS or lang in SHELL_LANGS or lang == "console":
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            d = _DIRECTIVE.match(prev)
            directive, reason = (d.group(1), d.group(2)) if d else (None, "")
            if directive not in (None, "skip", "s3"):
                raise AssertionError(f"{page.name}:{i}: unknown doc-test directive {directive!r}")
            if directive == "skip" and not reason:
                raise AssertionError(f"{page.name}:{i}: '<!-- doc-test: skip -->' needs a reason")
            body = textwrap.dedent("\n".join(l[len(indent):] if l.startswith(indent) else l for l in lines[i + 1 : j]))
            kind = "python" if lang in PYTHON_LANGS else "sh"
            if lang == "console":
                body = _console_commands(body)
            blocks.append(Block(page, kind, i + 2, body, directive, reason))
        i = j + 1
    return blocks


_RUNNER = r'''
import sys, traceback
blocks = eval(sys.stdin.read())
ns = {"__name__": "__main__"}
for name, line, code in blocks:
    try:
        exec(compile("\n" * (line - 1) + code, name, "exec"), ns)
    except BaseException:
        print(f"--- block at {name}:{line} failed ---", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
'''


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


PAGES_WITH_BLOCKS = [p for p in PAGES if extract(p)]

# ./just in a shell block: the simulator recipes, run in the block's working directory.
_JUST_STANDIN = """#!/usr/bin/env bash
set -euo pipefail
recipe="${1:-}"; shift || true
case "$recipe" in
  sim) exec sim "$@" ;;
  dst) exec sim dst "$@" ;;
  sim-bench) exec sim bench "$@" ;;
  models) exec python "$REPO/models/run.py" "$@" ;;
  *) echo "doc-test: ./just $recipe is not available to doc tests: skip the block with a reason" >&2; exit 2 ;;
esac
"""


def _shell_script(page: Path, blocks: list[Block]) -> str:
    parts = ["set -euo pipefail",
             "trap 'echo \"--- shell block at $__doc_block failed (exit $?, script line $LINENO)\" >&2' ERR"]
    for b in blocks:
        parts.append(f"__doc_block={_page_id(page)}:{b.line}")
        parts.append(b.code)
    return "\n".join(parts) + "\n"


def test_the_convention_is_stated_in_the_docs() -> None:
    text = (ROOT / "README.md").read_text()
    assert "doc-test: skip" in text and "tests/test_docs_snippets.py" in text
    for word in ("```sh", "```console", "```text", "bash -euo pipefail", "$REPO", "./just sim"):
        assert word in text, f"README.md's Documentation section does not state the shell convention ({word})"


def test_extract_finds_blocks_and_directives(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("x\n```python\na = 1\n```\n\n<!-- doc-test: skip needs Spark -->\n```python\nb\n```\n"
                    "```bash\nls\n```\n  ```python\n  c = 2\n  ```\n"
                    "<!-- doc-test: s3 -->\n```sh\nslatedb --help\n```\n```text\nnot run\n```\n"
                    "<!-- doc-test: skip about 9 minutes -->\n```console\n$ ./just dst \\\n    --quick\nout put\n$ ls\n```\n")
    got = extract(page)
    assert [(b.kind, b.line, b.code, b.directive, b.reason) for b in got] == [
        ("python", 3, "a = 1", None, ""), ("python", 8, "b", "skip", "needs Spark"),
        ("sh", 11, "ls", None, ""), ("python", 14, "c = 2", None, ""),
        ("sh", 18, "slatedb --help", "s3", ""),
        ("sh", 25, "./just dst \\\n    --quick\n\nls", "skip", "about 9 minutes")]


def test_a_failing_shell_command_fails_its_page(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("```sh\ntrue\n```\n```console\n$ false\nok\n$ echo never\n```\n")
    got = _run_shell(page, extract(page), tmp_path, dict(os.environ))
    assert got.returncode != 0 and "p.md:5 failed" in got.stderr


def _run_shell(page: Path, blocks: list[Block], tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    just = tmp_path / "just"
    just.write_text(_JUST_STANDIN)
    just.chmod(0o755)
    if not (tmp_path / "models").exists():
        (tmp_path / "models").symlink_to(ROOT / "models")
    env = {**env, "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""), "REPO": str(ROOT)}
    script = _shell_script(page, blocks).replace("file:///", f"file://{tmp_path}/")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=TIMEOUT_S)


@pytest.mark.parametrize("page", PAGES_WITH_BLOCKS, ids=_page_id)
def test_page_snippets_run(page: Path, tmp_path: Path, request) -> None:
    blocks = extract(page)
    runnable = [b for b in blocks if b.directive != "skip"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SLATEDB_"))}
    env["PYTHONPATH"] = str(ROOT)
    if any(b.directive == "s3" for b in runnable):
        server = request.getfixturevalue("doc_s3_server")
        opts = server.options()
        env.update(AWS_ENDPOINT_URL=opts["endpoint_url"], AWS_REGION=opts["region"],
                   AWS_ACCESS_KEY_ID=opts["access_key_id"], AWS_SECRET_ACCESS_KEY=opts["secret_access_key"])
    python = [b for b in runnable if b.kind == "python"]
    shell = [b for b in runnable if b.kind == "sh"]
    payload = [(f"{_page_id(page)}", b.line, b.code.replace("file:///", f"file://{tmp_path}/")) for b in python]
    if python:
        got = subprocess.run([sys.executable, "-c", _RUNNER], input=repr(payload), capture_output=True, text=True,
                             cwd=tmp_path, env=env, timeout=TIMEOUT_S)
        assert got.returncode == 0, f"{_page_id(page)}: a snippet failed\n{got.stdout[-2000:]}\n{got.stderr[-4000:]}"
    if shell:
        got = _run_shell(page, shell, tmp_path, env)
        assert got.returncode == 0, f"{_page_id(page)}: a shell block failed\n{got.stdout[-2000:]}\n{got.stderr[-4000:]}"
    skipped = [b for b in blocks if b.directive == "skip"]
    if skipped and not runnable:
        pytest.skip("; ".join(f"{_page_id(page)}:{b.line}: {b.reason}" for b in skipped))


@pytest.fixture(scope="session")
def doc_s3_server():
    from tests import servers

    gen = servers.seaweedfs()
    server = next(gen)
    yield server
    gen.close()
