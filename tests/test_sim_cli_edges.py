"""The simulator's command line at its edges, as a user meets them: a bad argument is refused
with one line naming it and a non-zero exit (never a traceback, never a campaign run on it)."""

from __future__ import annotations

import pytest

from sim import cli


@pytest.fixture(autouse=True)
def _ledger(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SIM_LEDGER", str(tmp_path / "ledger.sqlite"))
    monkeypatch.setenv("SIM_LEDGER_PARQUET", str(tmp_path / "ledger.parquet"))


def _refused(capsys, argv: list[str]) -> str:
    """Run ``sim ARGV``, which must be refused by the parser (exit 2, no seed run); its error line."""
    def no_seed(*_a, **_k):
        raise AssertionError("a seed ran on a refused argument")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli.sweep_mod, "run_seed", no_seed)
        mp.setattr(cli.sweep_mod, "simulate", no_seed)
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, names", [
    (["sweep", "--workload", "seqmeta", "--seeds", "0..1", "--jobs", "-1"], "argument --jobs: must be at least 0"),
    (["dst", "--workload", "seqmeta", "--seeds", "0..1", "--jobs", "-2"], "argument --jobs: must be at least 0"),
    (["hunt", "--bug", "replay-skip", "--jobs", "-1"], "argument --jobs: must be at least 0"),
    (["hunt", "--bug", "replay-skip", "--seeds", "0"], "argument --seeds: must be at least 1, not 0"),
    (["hunt", "--bug", "replay-skip", "--seeds", "-3"], "argument --seeds: must be at least 1, not -3"),
    (["dst", "--workload", "seqmeta", "--seeds", "0..1", "--seed-limit-s", "-1"],
     "argument --seed-limit-s: must be at least 0 (0: no limit), not -1"),
    (["sweep", "--workload", "seqmeta", "--seeds", "0..1", "--seed-limit-s", "nan"], "argument --seed-limit-s"),
    (["dst", "--minutes", "0"], "argument --minutes: must be above 0, not 0"),
    (["dst", "--minutes", "nan"], "argument --minutes: must be above 0, not nan"),
    (["dst", "--cap-minutes", "-5"], "argument --cap-minutes: must be above 0, not -5"),
    (["sweep", "--workload", "store", "--seeds", "0..1", "--ops", "0"], "argument --ops: must be at least 1, not 0"),
    (["run", "--seed", "0", "--workload", "store", "--clients", "0"], "argument --clients: must be at least 1"),
    (["shrink", "--seed", "0", "--bug", "replay-skip", "--max-runs", "0"], "argument --max-runs: must be at least 1"),
    (["shrink", "--seed", "0", "--bug", "replay-skip", "--max-seconds", "-1"], "argument --max-seconds"),
    (["sweep", "--workload", "seqmeta", "--seeds", "0..1", "--jobs", "two"], "argument --jobs: not a whole number"),
])
def test_a_bad_number_is_refused_in_one_line_naming_it(capsys, argv, names) -> None:
    assert names in _refused(capsys, argv)
