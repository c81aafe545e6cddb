"""``sim mutate`` (sim/campaign/mutate.py): cosmic-ray's operators over the protocol modules, each mutant
judged in a copy of the tree by a campaign of scenario seeds and the package's tests.

The judging tests use the smallest campaign that means something (one db seed, no tests): a
subprocess per mutant plus the baseline, a few CPU seconds each.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sim.campaign import mutate
from sim.campaign.mutate import Campaign, Mutant

DB_SEED_0 = Campaign.make(["db"], seeds_per_scenario=1, tests=False)


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    """A baseline cache shared by this module's runs (one db seed 0 baseline, not one per test)."""
    return tmp_path_factory.mktemp("mutate-baselines")


def _find(path: str, operator: str, where: str) -> Mutant:
    cands = [m for m in mutate.enumerate_mutants(path) if m.operator == operator and m.where == where]
    assert cands, f"no {operator} in {path}:{where} (the code moved: pick another planted mutant)"
    return mutate.apply(cands[0])[0]


def planted() -> Mutant:
    """Obviously wrong: WAL replay reads no WAL object at all (acknowledged writes vanish)."""
    return _find("slatedb/wal/writer.py", "core/ZeroIterationForLoop", "replay_wal")


def unreached() -> Mutant:
    """A reader-only mutant: the db scenario never opens a DbReader, so one db seed cannot see it."""
    return next(m for m in (mutate.apply(c)[0] for c in mutate.enumerate_mutants("slatedb/reader/options.py"))
                if m.operator == "core/NumberReplacer")


def test_operators_come_from_cosmic_ray_minus_the_unrepeatable_ones() -> None:
    names = [n for n, _ in mutate.operators()]
    assert "core/ZeroIterationForLoop" in names and "core/ReplaceComparisonOperator_Lt_LtE" in names
    assert "core/NumberReplacer" in names and "core/ExceptionReplacer" in names
    assert not set(names) & set(mutate.EXCLUDED_OPERATORS)
    assert "core/NoOp" not in names


def test_annotations_and_catalogue_switches_are_not_sites() -> None:
    source = open(mutate.ROOT / "slatedb/wal/writer.py").read().splitlines()
    mutants = mutate.enumerate_mutants("slatedb/wal/writer.py")
    lines = {m.line for m in mutants}
    switch = [i + 1 for i, t in enumerate(source) if "runtime.bugs" in t]
    assert switch and not lines & set(switch)
    # `async def list_wal_ids(store: ObjectStore, runtime: Runtime) -> list[int]:` -- nothing in its
    # annotations (wal_key, the example before, now lives in slatedb/format/layout.py)
    sig = next(i + 1 for i, t in enumerate(source) if t.startswith("async def list_wal_ids("))
    assert sig not in lines
    # the switch-on suite of `if switches.GC_IGNORES_INFLIGHT_COMPACTION in self.runtime.bugs:` is skipped too
    collector = open(mutate.ROOT / "slatedb/gc/collector.py").read().splitlines()
    on = next(i + 1 for i, t in enumerate(collector) if "switches.GC_IGNORES_INFLIGHT_COMPACTION in" in t)
    gc_lines = {m.line for m in mutate.enumerate_mutants("slatedb/gc/collector.py")}
    assert on not in gc_lines and on + 1 not in gc_lines
    # ... and so is a catalogued bug's own function (`_bug_never_too_young`, what gc-no-min-age selects)
    start = next(i + 1 for i, t in enumerate(collector) if t.startswith("def _bug_never_too_young("))
    assert not {start, start + 1, start + 2} & gc_lines
    assert any(collector[ln - 1].startswith("    return sst_id.milliseconds") for ln in gc_lines)  # _too_young is a site


def test_a_parameter_lists_bare_star_and_slash_are_mutated_only_into_each_other(tmp_path) -> None:
    # cosmic-ray takes `def f(a, *, b)`'s `*` for a multiplication: 10 of its 11 "mutants" were
    # syntax errors (on a continuation line no baseline check executes, reported survived unrun);
    # `*` -> `/` (keyword-only -> positional-only) is Python, and so is `/` -> `*`
    (tmp_path / "slatedb").mkdir()
    (tmp_path / "slatedb" / "m.py").write_text("def f(a, *, b, **kw):\n    return a * b\n"
                                              "g = lambda a, /, b: a / b\n")
    mutants = mutate.enumerate_mutants("slatedb/m.py", tmp_path)
    binary = [m for m in mutants if m.operator.startswith("core/ReplaceBinaryOperator_")]
    assert {(m.line, m.col) for m in binary} == {(1, 9), (2, 13), (3, 14), (3, 22)}
    assert sorted(m.operator for m in binary if (m.line, m.col) in ((1, 9), (3, 14))) == [
        "core/ReplaceBinaryOperator_Div_Mul", "core/ReplaceBinaryOperator_Mul_Div"]
    for m in mutants:
        compile(mutate.apply(m, tmp_path)[1], "m.py", "exec")


def test_selection_is_deterministic_and_spreads_over_sites() -> None:
    a, n, sites = mutate.select("wal", 5, seed=3)
    b, _, _ = mutate.select("wal", 5, seed=3)
    c, _, _ = mutate.select("wal", 5, seed=4)
    assert [m.id for m in a] == [m.id for m in b]
    assert [m.id for m in a] != [m.id for m in c]
    assert len(a) == 5 and len({(m.path, m.line, m.col) for m in a}) == 5
    assert n > sites >= 5


def test_a_mutant_id_replays_the_same_mutant_and_refuses_changed_code() -> None:
    m = planted()
    again = mutate.parse_id(m.id)
    assert again == m and "for wal_id in []:" in m.after and m.diff.startswith("--- a/slatedb/wal/writer.py")
    with pytest.raises(ValueError, match="the code changed"):
        mutate.parse_id(m.id.rsplit("@", 1)[0] + "@000000000000")
    with pytest.raises(ValueError, match="bad mutant id"):
        mutate.parse_id("slatedb/wal/writer.py")


def _lost_rows(violation: str) -> bool:
    """The planted mutant's violation: acknowledged rows gone (DUR-1), or, since the DUR-5 oracle
    (b5d463b) checks every WAL object and manifest as it lands, first a WAL row the mutant never
    replayed, above the manifest's last_l0_seq and created before its last_l0_clock_tick (db
    seed 0 meets that one first)."""
    return "DUR-1" in violation or "DUR-5" in violation


def uncovered() -> Mutant:
    """The CDC reader's poll answers "not there yet" when it is there (killed by
    tests/api/test_wal_reader.py): no db seed reads the WAL through a WalReader."""
    cands = [mutate.apply(c)[0] for c in mutate.enumerate_mutants("slatedb/wal/reader.py")
             if c.operator == "core/AddNot" and c.where == "WalReaderCore.next_rows"]
    return next(m for m in cands if m.before == "if rows is not None:")


def test_the_tool_kills_a_planted_obviously_wrong_mutant_without_touching_the_checkout(kept) -> None:
    m, dark = planted(), uncovered()
    digest = hashlib.sha256((mutate.ROOT / m.path).read_bytes()).hexdigest()
    report = mutate.run([], DB_SEED_0, mutant_ids=[m.id, dark.id], equivalents={}, cache=kept)
    row, other = sorted(report.rows, key=lambda r: r["mutant"] != m.id)
    assert row["status"] == mutate.KILLED, row
    assert row["by"] == "db seed 0" and _lost_rows(row["violation"]), row["violation"]
    assert hashlib.sha256((mutate.ROOT / m.path).read_bytes()).hexdigest() == digest
    assert report.dropped == {"wal": []}
    # the same run, a mutant on a statement db seed 0 never executes: not run, and never "killed"
    assert other["status"] == mutate.SURVIVED and other["checks_run"] == 0, other
    assert other["why"].startswith("no baseline check executes lines")


def test_a_known_survivor_is_reported_survived_with_its_diff_and_replay_command(kept) -> None:
    m = unreached()
    report = mutate.run([], DB_SEED_0, mutant_ids=[m.id], equivalents={}, cache=kept)
    assert len(list(kept.glob("baseline-*.json"))) == 1  # the same tree and checks: one baseline, kept
    [row] = report.rows
    assert row["status"] == mutate.SURVIVED, row
    assert row["trace_changed"] == 0 and row["trace_compared"] == 1
    text = mutate.format_report(report, DB_SEED_0.flags(2.0, 1))
    assert f"SURVIVED   {m.id}" in text and m.diff in text
    assert f"replay: ./just mutate --mutant '{m.id}' --scenarios db --seeds-per-scenario 1 --no-tests" in text
    assert "no trace changed in 1 seeds" in text
    table = mutate.summarize(report)["reader"]
    assert (table["survived"], table["killed"], table["score"]) == (1, 0, 0.0)


def test_the_equivalents_list_marks_a_mutant_equivalent_with_its_reason(tmp_path, kept) -> None:
    m = unreached()
    path = tmp_path / "equivalents.toml"
    path.write_text(mutate.equivalent_entry(m, "a test reason: nothing reads it"))
    equivalents = mutate.load_equivalents(path)
    assert list(equivalents) == [m.key]
    report = mutate.run([], DB_SEED_0, mutant_ids=[m.id], equivalents=equivalents, cache=kept)
    [row] = report.rows
    assert row["status"] == mutate.EQUIVALENT and row["reason"] == "a test reason: nothing reads it"
    assert row["results"] == []  # not judged
    assert mutate.summarize(report)["reader"]["score"] is None
    assert "reason: a test reason: nothing reads it" in mutate.format_report(report, "")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[equivalent]]\nkey = "abc"\nreason = " "\n')
    with pytest.raises(ValueError, match="needs a key and a reason"):
        mutate.load_equivalents(bad)


def test_the_project_equivalents_file_loads_and_every_entry_has_a_reason() -> None:
    for key, e in mutate.load_equivalents().items():
        assert len(key) == 12 and e.reason and e.mutant.endswith("@" + key), e


@pytest.mark.xdist_group("spark")
def test_the_spark_engine_judges_a_tiny_input_like_the_local_one() -> None:
    spark_engine = pytest.importorskip("sim.campaign.spark_engine")
    try:
        spark_engine._check_available()
    except spark_engine.SparkUnavailable as e:
        pytest.skip(str(e))
    m = planted()
    with spark_engine.spark_session("local[1]", app_name="sim-mutate-test") as spark:
        report = mutate.run([], DB_SEED_0, mutant_ids=[m.id], equivalents={}, engine="spark", spark=spark)
    [row] = report.rows
    assert row["status"] == mutate.KILLED and row["by"] == "db seed 0" and _lost_rows(row["violation"])


def test_cli_lists_the_selection(capsys) -> None:
    from sim.cli import main

    assert main(["mutate", "--module", "wal", "--sample", "2", "--list"]) == 0
    out = capsys.readouterr().out
    ids = [line.split()[0] for line in out.splitlines() if line.startswith("slatedb/wal/")]
    assert len(ids) == 2 and ids == [m.id for m in mutate.select("wal", 2, 0)[0]]
    assert main(["mutate", "--module", "nosuch", "--list"]) == 2


def test_seeds_per_scenario_0_judges_by_the_packages_tests_alone(capsys) -> None:
    """docs/simulation.md's quick replay (``--mutant ID --seeds-per-scenario 0``): no scenario
    seed, the mutated package's tests only; with ``--no-tests`` too nothing would judge a mutant
    (each would survive), so that is refused (exit 2)."""
    from sim.cli import main

    tests_alone = Campaign.make(["db"], seeds_per_scenario=0)
    assert [c["kind"] for c in tests_alone.checks("gc")] == ["tests"]
    assert tests_alone.describe() == "seeds: none; plus the package's tests"
    assert main(["mutate", "--module", "gc", "--sample", "1", "--seeds-per-scenario", "0", "--list"]) == 0
    capsys.readouterr()
    assert main(["mutate", "--module", "gc", "--seeds-per-scenario", "0", "--no-tests", "--list"]) == 2
    assert "nothing would judge a mutant" in capsys.readouterr().err


# --- choosing a mutant's checks from the baseline's coverage (sim/campaign/mutate_select.py) ---------

SST_IDS = "slatedb/manifest/sst_ids.py"
T_NOT_BEFORE = "tests/manifest/test_sst_ids.py::test_not_before_keeps_a_fresh_id_and_lifts_an_old_one_keeping_its_random_bits"
T_NEWEST = "tests/manifest/test_sst_ids.py::test_newest_l0_ms_falls_back_to_the_last_compacted_view_then_zero"


def test_statement_spans_tell_function_bodies_from_import_time_code() -> None:
    from sim.campaign.mutate_select import Span, statement_span

    src = ("X = 1\n"                      # 1
           "def f(a=2):\n"                # 2
           "    if (a >\n"                # 3
           "            3):\n"            # 4
           "        return [\n"           # 5
           "            a + 6]\n"         # 6
           "    return a\n"               # 7
           "class C:\n"                   # 8
           "    y = 4\n"                  # 9
           "    def m(self):\n"           # 10
           "        z = 5\n")             # 11
    tree = mutate._tree(src)
    assert statement_span(tree, 1, 4) == Span(1, 1, False)
    assert statement_span(tree, 2, 8) == Span(2, 2, False)  # a default value: evaluated at import
    assert statement_span(tree, 4, 12) == Span(3, 4, True)  # an if's condition over two lines, with its keyword
    assert statement_span(tree, 6, 16) == Span(5, 6, True)  # a statement over two lines, whole
    assert statement_span(tree, 9, 8) == Span(9, 9, False)  # a class attribute
    assert statement_span(tree, 11, 12) == Span(11, 11, True)


@pytest.fixture(scope="module")
def two_tests_baseline() -> tuple[dict, dict]:
    """Two unit tests of slatedb/manifest/sst_ids.py judged as a baseline, under coverage."""
    check = {"kind": "tests", "paths": ["tests/manifest/test_sst_ids.py"], "nodes": [T_NOT_BEFORE, T_NEWEST]}
    row = mutate.judge(mutate.Job(str(mutate.ROOT), "tests", (check,), cpu_s=300, wall_s=900, all_checks=True,
                                  coverage=True, imports=(SST_IDS,)))
    assert row["status"] == "baseline", row
    [res] = [r for r in row["results"] if r.get("check")]
    assert set(res["tests"]) == {T_NOT_BEFORE, T_NEWEST}  # only the nodes asked for ran
    return res["tests"], row["coverage"]


def _plan_at(text: str, baseline: tuple[dict, dict]):
    from sim.campaign import mutate_select

    tests, coverage = baseline
    source = (mutate.ROOT / SST_IDS).read_text()
    line = next(i + 1 for i, t in enumerate(source.splitlines()) if t.strip() == text)
    col = len(source.splitlines()[line - 1]) - len(text)
    span = mutate_select.statement_span(mutate._tree(source), line, col)
    return mutate_select.plan(SST_IDS, span, mutate_select.CoverIndex(coverage), {}, tests)


def test_a_covered_line_selects_the_test_that_executes_it_and_only_that(two_tests_baseline) -> None:
    plan = _plan_at("if fresh.milliseconds >= floor_ms:", two_tests_baseline)
    assert [c.get("nodes") for c in plan.checks] == [[T_NOT_BEFORE]], plan
    plan = _plan_at("if views:", two_tests_baseline)
    assert [c.get("nodes") for c in plan.checks] == [[T_NEWEST]], plan


def test_a_line_no_test_executes_selects_nothing_and_import_time_code_selects_everything(two_tests_baseline) -> None:
    # newest_l0_ms's test has no L0 at all: `return max(v.sst_id.milliseconds ...)` never runs
    plan = _plan_at("return max(v.sst_id.milliseconds for v in views)", two_tests_baseline)
    assert plan.checks == () and plan.why.startswith("no baseline check executes"), plan
    # a module-level constant runs at import: every test judges it
    source = (mutate.ROOT / SST_IDS).read_text()
    const = next(t for t in source.splitlines() if t.startswith("_RANDOM_BITS"))
    plan = _plan_at(const, two_tests_baseline)
    assert sorted(n for c in plan.checks for n in c["nodes"]) == sorted([T_NOT_BEFORE, T_NEWEST])
    assert plan.why.startswith("import-time statement")


def test_a_check_that_outruns_its_own_box_is_a_timeout_not_a_kill() -> None:
    m = planted()
    source = (mutate.ROOT / m.path).read_text()  # the unmutated text: only the box can stop it
    check = {"kind": "seed", "scenario": "gc", "seed": 0, "box_s": 0.3}
    row = mutate.judge(mutate.Job(str(mutate.ROOT), "wal", (check,), m, source, cpu_s=120, wall_s=600))
    assert row["status"] == mutate.TIMEOUT and row["by"] == "gc seed 0", row
    assert "over its time box" in row["violation"]


def test_a_hung_mutant_is_stopped_as_a_timeout_long_before_its_wall_guard(monkeypatch) -> None:
    """A mutant that waits for ever without using CPU (an event nobody sets; here a real-clock
    sleep in WAL replay) is stopped once its judge has used no CPU for ``STALL_WALL_S``, not at
    its wall guard (``--timeout-s``: an hour on a loaded machine held the seed-23 draw's hung
    db mutant that long)."""
    import time

    m = planted()
    source = (mutate.ROOT / m.path).read_text()
    marker = "async def replay_wal("
    body = source.index(":\n", source.index(")", source.index(marker))) + 2
    # The first statement of replay_wal's body (after its docstring, if any): sleep for ever.
    hung = source[:body] + "    __import__('time').sleep(10 ** 6)\n" + source[body:]
    monkeypatch.setattr(mutate, "STALL_WALL_S", 3.0)
    check = {"kind": "seed", "scenario": "db", "seed": 0, "box_s": 600}
    started = time.monotonic()
    row = mutate.judge(mutate.Job(str(mutate.ROOT), "wal", (check,), m, hung, cpu_s=600, wall_s=900))
    assert row["status"] == mutate.TIMEOUT and row["by"] == "db seed 0", row
    assert row["violation"].startswith("hung: no CPU used for 3 s"), row
    assert time.monotonic() - started < 300  # the wall guard (900 s) did not stop it


def test_spread_modules_name_their_files_and_their_mutants_map_back() -> None:
    """The bulk load, merge and transactions are protocols (spec/protocols/bulk-load.md, merge.md,
    transactions.md) whose code lives inside other packages: each is a module of its own files, its
    mutants are told apart from their packages' (``slatedb/spark``, ``slatedb/api``), and its tests
    are its own."""
    for mod, must in (("load", "slatedb/spark/load.py"), ("merge", "slatedb/merge.py"), ("txn", "slatedb/api/txn.py")):
        files = mutate.module_files(mod)
        assert must in files and mod in mutate.present_modules()
        assert {mutate.module_of(f) for f in files} == {mod}
        assert mutate.test_paths(mod) and all(p.startswith("tests/") for p in mutate.test_paths(mod))
        picked, n, sites = mutate.select(mod, 3, seed=1)
        assert len(picked) == 3 and n > sites >= 3 and {m.module for m in picked} == {mod}
        assert mutate.parse_id(picked[0].id) == picked[0]
    assert mutate.module_of("slatedb/spark/compaction.py") == "spark"  # the rest of the package is not the load's


def test_run_in_another_checkout_than_the_imported_sim_is_refused(tmp_path, monkeypatch, capsys) -> None:
    """A worktree sharing another checkout's venv imports that checkout's ``sim``: ``sim mutate``
    would make and judge the mutants there (seed 26's draw judged /work/main from a worktree)."""
    other = tmp_path / "other"
    (other / "sim" / "campaign").mkdir(parents=True)
    (other / "sim" / "campaign" / "mutate.py").write_text("")
    (other / "slatedb").mkdir()
    assert mutate.foreign_checkout(other / "slatedb") == other
    assert mutate.foreign_checkout(mutate.ROOT / "slatedb") is None
    assert mutate.foreign_checkout(tmp_path) is None  # outside any checkout
    monkeypatch.chdir(other)
    assert mutate.main(["--list", "--module", "wal", "--sample", "1"]) == 2
    err = capsys.readouterr().err
    assert str(other) in err and str(mutate.ROOT) in err and f"PYTHONPATH={other}" in err
