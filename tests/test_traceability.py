"""Traceability between the protocol pages, the models and the code.

Why: an invariant that no checker asserts is a wish, and an id in code that the
spec does not define is a dangling reference.  Rules checked here:

* every invariant id on ``spec/protocols/*.md`` is defined (bold) on exactly one
  page and listed in the README's single table with that page;
* every id is asserted in a Spin model under ``models/``, or is marked ``sim`` in
  the table *and* appears literally in some file under ``sim/``;
* every id that appears anywhere in ``slatedb/``, ``sim/``, ``models/`` or
  ``tests/`` exists in the spec;
* the README's prefix list matches the prefixes code scans for.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "spec" / "protocols"
PAGE_NAMES = {"wal-fencing.md", "sequenced-metadata.md", "checkpoints-gc.md",
              "compaction.md", "clone.md", "projection-union.md"}


def _load_runner():
    spec = importlib.util.spec_from_file_location("models_run_trace", ROOT / "models" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["models_run_trace"] = mod
    spec.loader.exec_module(mod)
    return mod


runner = _load_runner()
ID_RE = runner.ID_RE


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return ""


def _files(top: Path):
    if not top.exists():
        return []
    return [p for p in top.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".pyc", ".so"}]


def _definitions() -> dict[str, str]:
    """id -> page that defines it (bold ``**ID**``)."""
    defs: dict[str, str] = {}
    for page in sorted(PAGES.glob("*.md")):
        if page.name == "README.md":
            continue
        for m in re.finditer(r"\*\*(%s)\*\*" % ID_RE.pattern, _text(page)):
            assert m.group(1) not in defs, f"{m.group(1)} defined twice"
            defs[m.group(1)] = page.name
    return defs


def _table() -> dict[str, tuple[str, str]]:
    """id -> (page, checked-by) from the README's invariant table."""
    rows = {}
    for line in _text(PAGES / "README.md").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and ID_RE.fullmatch(cells[0]):
            assert cells[0] not in rows, f"{cells[0]} listed twice in README"
            page = re.search(r"[\w-]+\.md", cells[1])
            rows[cells[0]] = (page.group(0) if page else cells[1], cells[-1])
    return rows


def _model_asserted() -> set[str]:
    ids = set()
    for pml in (ROOT / "models").glob("*.pml"):
        for line in _text(pml).splitlines():
            if re.search(r"\bassert\s*\(|^\s*ltl\b", line):
                ids.update(ID_RE.findall(line))
    return ids


def test_pages_exist():
    assert PAGE_NAMES <= {p.name for p in PAGES.glob("*.md")}
    assert (PAGES / "README.md").exists()


def test_every_id_mentioned_on_a_page_is_defined():
    defs = _definitions()
    assert defs, "no invariants defined"
    for page in PAGES.glob("*.md"):
        for found in ID_RE.findall(_text(page)):
            assert found in defs, f"{page.name} mentions undefined {found}"


def test_readme_table_matches_definitions():
    defs, table = _definitions(), _table()
    assert set(table) == set(defs)
    for ident, (page, _) in table.items():
        assert page == defs[ident], f"{ident}: README says {page}, defined on {defs[ident]}"


def test_every_invariant_is_checked():
    asserted = _model_asserted()
    sim_text = "\n".join(_text(p) for p in _files(ROOT / "sim"))
    for ident, (_, checked_by) in _table().items():
        if ident in asserted:
            continue
        if re.match(r"tests\b", checked_by):  # no model or scenario yet: the named test files carry it
            named = re.findall(r"tests/[\w/]+\.py", checked_by)
            assert named, f"{ident} marked tests but names no test file"
            for name in named:
                assert re.search(r"\b%s\b" % re.escape(ident), _text(ROOT / name)), f"{ident}: {name} does not carry it"
            continue
        assert re.search(r"\bsim\b", checked_by), f"{ident} is neither model-asserted nor marked sim (or tests)"
        assert re.search(r"\b%s\b" % re.escape(ident), sim_text), f"{ident} marked sim but not in sim/"


def test_table_model_column_is_true():
    """A model file named in the 'checked by' column really asserts the id."""
    for ident, (_, checked_by) in _table().items():
        for name in re.findall(r"[\w]+\.pml", checked_by):
            text = _text(ROOT / "models" / name)
            lines = [l for l in text.splitlines() if ident in l and re.search(r"assert|ltl", l)]
            assert lines, f"{ident}: {name} does not assert it"


def test_every_id_in_code_exists_in_spec():
    defs = _definitions()
    for top in ("slatedb", "sim", "models", "tests"):
        for path in _files(ROOT / top):
            for found in set(ID_RE.findall(_text(path))):
                assert found in defs, f"{path.relative_to(ROOT)} uses {found}, not in spec"


def test_readme_lists_the_prefixes():
    text = _text(PAGES / "README.md")
    m = re.search(r"Prefixes:\s*(.+)", text)
    assert m, "README must have a 'Prefixes:' line"
    listed = tuple(re.findall(r"`([A-Z]+)`", m.group(1)))
    assert set(listed) == set(runner.ID_PREFIXES)
