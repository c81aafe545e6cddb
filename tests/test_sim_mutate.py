"""``sim mutate`` (sim/campaign/mutate.py): cosmic-ray's operators over the protocol modules, each mutant
judged in a copy of the tree by a campaign of scenario seeds and the package's tests.

The judging tests use the smallest campaign that means something (one db seed, no tests): a
subprocess per mutant plus the baseline, a few CPU seconds each.
"""

from __future__ import annotations

import hashlib

import pytest

from sim.campaign import mutate
from sim.campaign.mutate import Campaign, Mutant

DB_SEED_0 = Campaign.make(["db"], seeds_per_scenario=1, tests=False)


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


def test_the_tool_kills_a_planted_obviously_wrong_mutant_without_touching_the_checkout() -> None:
    m = planted()
    digest = hashlib.sha256((mutate.ROOT / m.path).read_bytes()).hexdigest()
    report = mutate.run([], DB_SEED_0, mutant_ids=[m.id], equivalents={})
    [row] = report.rows
    assert row["status"] == mutate.KILLED, row
    assert row["by"] == "db seed 0" and "DUR-1" in row["violation"]
    assert hashlib.sha256((mutate.ROOT / m.path).read_bytes()).hexdigest() == digest
    assert report.dropped == {"wal": []}


def test_a_known_survivor_is_reported_survived_with_its_diff_and_replay_command() -> None:
    m = unreached()
    report = mutate.run([], DB_SEED_0, mutant_ids=[m.id], equivalents={})
    [row] = report.rows
    assert row["status"] == mutate.SURVIVED, row
    assert row["trace_changed"] == 0 and row["trace_compared"] == 1
    text = mutate.format_report(report, DB_SEED_0.flags(2.0, 1))
    assert f"SURVIVED   {m.id}" in text and m.diff in text
    assert f"replay: ./just mutate --mutant '{m.id}' --scenarios db --seeds-per-scenario 1 --no-tests" in text
    assert "no trace changed in 1 seeds" in text
    table = mutate.summarize(report)["reader"]
    assert (table["survived"], table["killed"], table["score"]) == (1, 0, 0.0)


def test_the_equivalents_list_marks_a_mutant_equivalent_with_its_reason(tmp_path) -> None:
    m = unreached()
    path = tmp_path / "equivalents.toml"
    path.write_text(mutate.equivalent_entry(m, "a test reason: nothing reads it"))
    equivalents = mutate.load_equivalents(path)
    assert list(equivalents) == [m.key]
    report = mutate.run([], DB_SEED_0, mutant_ids=[m.id], equivalents=equivalents)
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
    assert row["status"] == mutate.KILLED and row["by"] == "db seed 0" and "DUR-1" in row["violation"]


def test_cli_lists_the_selection(capsys) -> None:
    from sim.cli import main

    assert main(["mutate", "--module", "wal", "--sample", "2", "--list"]) == 0
    out = capsys.readouterr().out
    ids = [line.split()[0] for line in out.splitlines() if line.startswith("slatedb/wal/")]
    assert len(ids) == 2 and ids == [m.id for m in mutate.select("wal", 2, 0)[0]]
    assert main(["mutate", "--module", "nosuch", "--list"]) == 2
