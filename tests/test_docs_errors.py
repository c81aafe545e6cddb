"""The docs' error lists match the code (issue 25 item 6).

* Every error class the docs name (a backticked ``SomethingError`` in ``README.md`` or
  ``docs/*.md``) is a class of the ``slatedb`` package deriving from ``SlateDBError``: no page
  promises an error the code never raises under that name.
* Every public error of ``slatedb.errors`` is documented on some page.
* Where a page states a kinship -- "`X` (an `Y`" or "`X` (a `Y`" -- ``X`` is a subclass of ``Y``.
* The errors the pages' "Errors" sections list are importable from ``slatedb.errors`` or the
  module that raises them, under the documented name.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

import slatedb.errors as errors_mod
from slatedb.errors import SlateDBError

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
NAMED = re.compile(r"`(?:slatedb\.(?:errors\.)?)?([A-Z]\w*Error)`")
KIN = re.compile(r"`([A-Z]\w*Error)`\s*\((?:an?|also an?)\s+`([A-Z]\w*Error)`")
CLASS_DEF = re.compile(r"^class ([A-Z]\w*Error)\(", re.M)
#: Names the pages quote that are not ours (the Python, boto and official engines' own).
FOREIGN = {"NoCredentialsError", "EndpointConnectionError", "AssertionError", "TypeError", "ValueError",
           "RuntimeError", "KeyError", "OSError", "MergeOperatorCallbackError", "CancelledError", "InternalError"}


def _classes() -> dict[str, type]:
    """Every ``class XError(...)`` of the slatedb package, imported from its module (but
    ``slatedb.uniffi``'s: they mirror the official binding's error classes, by design not ours)."""
    found: dict[str, type] = {}
    for path in sorted((ROOT / "slatedb").rglob("*.py")):
        if "uniffi" in path.relative_to(ROOT).parts:
            continue
        names = CLASS_DEF.findall(path.read_text(encoding="utf-8"))
        if not names:
            continue
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        try:
            mod = importlib.import_module(module)
        except ImportError:  # an optional dependency (none today): its errors are not checked
            continue
        for name in names:
            found[name] = getattr(mod, name)
    return found


CLASSES = _classes()


def _named() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for page in PAGES:
        for name in NAMED.findall(page.read_text(encoding="utf-8")):
            out.setdefault(name, set()).add(page.name)
    return out


def test_every_error_the_docs_name_is_ours_and_a_slatedb_error() -> None:
    named = _named()
    assert len(named) >= 25, sorted(named)
    unknown = {n: sorted(p) for n, p in named.items() if n not in CLASSES and n not in FOREIGN}
    assert not unknown, f"the docs name errors the code does not define: {unknown}"
    for name in named:
        if name in CLASSES:
            assert issubclass(CLASSES[name], SlateDBError), f"{name} is documented but not a SlateDBError"


def test_every_public_error_is_documented() -> None:
    public = {c.__name__ for c in vars(errors_mod).values()
              if inspect.isclass(c) and issubclass(c, SlateDBError) and c.__module__ == errors_mod.__name__}
    assert len(public) >= 30
    missing = sorted(public - set(_named()))
    assert not missing, f"errors of slatedb.errors no page documents: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_stated_kinship_holds(page: Path) -> None:
    for child, parent in KIN.findall(page.read_text(encoding="utf-8")):
        assert child in CLASSES and parent in CLASSES, (child, parent)
        assert issubclass(CLASSES[child], CLASSES[parent]), f"{page.name}: `{child}` is said to be a `{parent}`"


def test_the_checker_fails_on_a_wrong_page(tmp_path) -> None:
    """The checks above catch a made-up name and a false kinship (the oracle fed a bad page)."""
    bad = tmp_path / "bad.md"
    bad.write_text("- `ClosedError` (an `InvalidArgumentError`): ...\n- `NoSuchThingError`: ...\n")
    globals()["PAGES"], saved = [bad], PAGES
    try:
        with pytest.raises(AssertionError, match="NoSuchThingError"):
            unknown = {n for n in _named() if n not in CLASSES and n not in FOREIGN}
            assert not unknown, f"undefined: {sorted(unknown)}"
        with pytest.raises(AssertionError, match="is said to be"):
            test_a_stated_kinship_holds(bad)
    finally:
        globals()["PAGES"] = saved
