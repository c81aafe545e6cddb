"""Spin models: safe models verify, unsafe variants fail on the expected invariant.

Why: a model that merely "passes" proves little unless removing the protocol
step it is about makes it fail.  For each unsafe variant we run Spin in a
scratch directory, check that a trail was written, replay it ourselves with
``spin -t -p`` and check that the violated assertion is the one tagged with the
expected invariant id.  For each safe model we check that the search found no
error and explored a non-empty state space.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_runner():
    spec = importlib.util.spec_from_file_location("models_run", ROOT / "models" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["models_run"] = mod  # dataclasses need the module registered
    spec.loader.exec_module(mod)
    return mod


runner = _load_runner()

SAFE_RUNS = [m for m in runner.MODELS]
UNSAFE_RUNS = [(m, v) for m, s in runner.MODELS.items() for v in s["variants"]]


@pytest.mark.parametrize("model", SAFE_RUNS)
def test_safe_model_has_no_error(model, tmp_path):
    res = runner.run_one(model, runner.SAFE, workdir=tmp_path)
    assert res.verdict == "safe", res.detail
    assert res.errors == 0
    assert res.states > 0
    assert not res.trail
    assert res.ok


@pytest.mark.parametrize("model,variant", UNSAFE_RUNS)
def test_unsafe_variant_has_counterexample(model, variant, tmp_path):
    spec = runner.MODELS[model]
    expected = spec["variants"][variant]
    res = runner.run_one(model, variant, workdir=tmp_path)
    assert res.verdict == "counterexample", res.detail
    trail = tmp_path / (spec["file"] + ".trail")
    assert trail.exists() and trail.stat().st_size > 0
    # replay the trail independently of the runner
    replay = subprocess.run(["spin", "-t", "-p", "-D" + variant, spec["file"]],
                            cwd=tmp_path, capture_output=True, text=True)
    out = replay.stdout + replay.stderr
    assert "assertion violated" in out, out[-2000:]
    source = (runner.MODELS_DIR / spec["file"]).read_text()
    line_no, violated = runner.violated_assertion(out, source)
    assert line_no is not None
    assert violated == expected, f"{spec['file']}:{line_no} violated {violated}, expected {expected}"
    assert res.violated_id == expected and res.ok


def test_every_model_file_is_registered():
    files = {p.name for p in runner.MODELS_DIR.glob("*.pml")}
    assert files == {s["file"] for s in runner.MODELS.values()}


@pytest.mark.parametrize("model", SAFE_RUNS)
def test_variants_exist_and_asserts_are_named(model):
    """Every registered macro is used in its model; every assert names an invariant."""
    spec = runner.MODELS[model]
    source = (runner.MODELS_DIR / spec["file"]).read_text()
    for variant in spec["variants"]:
        assert re.search(r"#\s*(ifdef|ifndef|if\s+defined|elif\s+defined)\W+%s\b" % variant, source), variant
    for n, line in enumerate(source.splitlines(), 1):
        if re.search(r"\bassert\s*\(", line):
            assert runner.ID_RE.search(line), f"{spec['file']}:{n}: assert without invariant id"


def test_runner_table_lists_every_run():
    results = [runner.Result(model=m, variant=v, bounds="b", expected="safe")
               for m, v in runner.all_runs()]
    table = runner.format_table(results)
    assert table.splitlines()[0].split()[:5] == ["model", "variant", "bounds", "states", "verdict"]
    assert len(table.splitlines()) == len(results) + 2
