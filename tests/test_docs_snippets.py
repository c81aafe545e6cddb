"""Every fenced Python block of ``README.md`` and ``docs/*.md`` runs as written (issue 16 item 6).

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

Other fences (```` ```bash ````, ```` ```text ````...) are not run.
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
    line: int  # 1-based line of the first code line
    code: str
    directive: str | None  # "skip" | "s3" | None
    reason: str


def extract(page: Path) -> list[Block]:
    """The ```` ```python ```` blocks of ``page`` with the directive of the line above each."""
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
        if lang in ("python", "py", "python3"):
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            d = _DIRECTIVE.match(prev)
            directive, reason = (d.group(1), d.group(2)) if d else (None, "")
            if directive not in (None, "skip", "s3"):
                raise AssertionError(f"{page.name}:{i}: unknown doc-test directive {directive!r}")
            if directive == "skip" and not reason:
                raise AssertionError(f"{page.name}:{i}: '<!-- doc-test: skip -->' needs a reason")
            body = "\n".join(l[len(indent):] if l.startswith(indent) else l for l in lines[i + 1 : j])
            blocks.append(Block(page, i + 2, textwrap.dedent(body), directive, reason))
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
    return str(page.relative_to(ROOT))


PAGES_WITH_BLOCKS = [p for p in PAGES if extract(p)]


def test_the_convention_is_stated_in_the_docs() -> None:
    text = (ROOT / "README.md").read_text()
    assert "doc-test: skip" in text and "tests/test_docs_snippets.py" in text


def test_extract_finds_blocks_and_directives(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("x\n```python\na = 1\n```\n\n<!-- doc-test: skip needs Spark -->\n```python\nb\n```\n"
                    "```bash\nls\n```\n  ```python\n  c = 2\n  ```\n")
    got = extract(page)
    assert [(b.line, b.code, b.directive, b.reason) for b in got] == [
        (3, "a = 1", None, ""), (8, "b", "skip", "needs Spark"), (14, "c = 2", None, "")]


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
    payload = [(f"{_page_id(page)}", b.line, b.code.replace("file:///", f"file://{tmp_path}/")) for b in runnable]
    if runnable:
        got = subprocess.run([sys.executable, "-c", _RUNNER], input=repr(payload), capture_output=True, text=True,
                             cwd=tmp_path, env=env, timeout=TIMEOUT_S)
        assert got.returncode == 0, f"{_page_id(page)}: a snippet failed\n{got.stdout[-2000:]}\n{got.stderr[-4000:]}"
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
