"""docs/spark.md's Python blocks, run as written in the test process's one Spark session
(tests/test_docs_snippets.py skips them, naming this file): in order, in one namespace, in a
fresh temporary directory with ``file:///`` rooted there, as that test runs every other page.
``SparkSession.builder...getOrCreate()`` in the first block returns the running session; a
fresh process would start a JVM of its own (~10 s, a minute on a loaded machine) to run the
same lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.test_docs_snippets import ROOT, extract

pytestmark = pytest.mark.xdist_group("spark")

PAGE = ROOT / "docs" / "spark.md"


def test_the_worked_example_runs(spark, tmp_path: Path, monkeypatch) -> None:
    blocks = extract(PAGE)
    assert blocks, "docs/spark.md has no python block"
    for b in blocks:  # every block runs here, none is skipped for another reason
        assert b.directive == "skip" and "tests/spark/test_docs_spark.py" in b.reason, b.line
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__main__"}
    for b in blocks:
        code = "\n" * (b.line - 1) + b.code.replace("file:///", f"file://{tmp_path}/")
        exec(compile(code, str(PAGE.relative_to(ROOT)), "exec"), ns)
    assert ns["spark"] is spark  # the page's builder returned the running session
