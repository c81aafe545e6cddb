"""``sim mutate``: mutation testing of the protocol modules, judged by the simulator.

A mutant is one small change to protocol code made by one of **cosmic-ray**'s mutation operators
(``cosmic_ray.plugins``, parso trees; the library's own ``mutate_code`` applies it), e.g. ``<``
to ``<=``, ``True`` to ``False``, a number off by one, a ``for`` loop that runs zero times, an
``except`` clause that no longer matches. Two of cosmic-ray's core operators are left out:
``VariableReplacer`` and ``VariableInserter`` draw from the global ``random`` module, so the same
occurrence gives a different mutant each time and a run could not be repeated.

Each mutant is judged by a **campaign**: seeds of every scenario of the registry
(:data:`sim.scenarios.registry.SCENARIOS`, through :func:`sim.campaign.sweep.run_seed`, the entry point both sweep
engines use), each scenario's seed count balanced by its cost (:data:`COST_S`), plus the tests of
the mutated module's package (``tests/<package>``, :data:`FALLBACK_TESTS`), less what cannot see
the mutant: the unmutated tree is judged first (the **baseline**), every check once under
coverage.py, and a mutant runs only the seeds and tests whose baseline run executed the statement
it changes, cheapest first (every check for a statement that runs at import time; see
:mod:`sim.campaign.mutate_select`; ``--full-campaign`` runs every check). The campaign stops at the
first failure: the mutant is **killed** by that check. A campaign that passes every check
**survived** (so does a mutant no check executes: it is not run, and the report says so); one that
runs out of its CPU time box (``RLIMIT_CPU``) or its wall-clock guard is a **timeout**. Mutants
listed in the reviewed equivalents file (:data:`EQUIVALENTS`, one reason each) are **equivalent**
and not run.

Isolation: a mutant never touches the checkout. Each one is judged in a fresh copy of the tree
(``slatedb``, ``sim``, ``tests``, ``spec``, ``pyproject.toml``) in a temporary directory, by a
subprocess whose ``PYTHONPATH`` and working directory are that copy (``python -m
sim.campaign.mutate_judge``); the judge checks that it imported the copy. Checks (seeds, single
tests) that fail on the baseline are dropped from every mutant's campaign and reported; the
baseline's trace digests tell a survivor whose traces changed (behaviour changed, no oracle
noticed: a gap) from one whose traces did not. The baseline is kept under ``.cache/sim-mutate``
by the hash of the tree and the checks, so replaying a mutant on the same tree does not pay for it.

Selection is deterministic: the mutable **sites** of a module (a source position where some
operator applies) are ordered by a hash of ``(--seed, module, site)`` and the first ``--sample``
are taken, one mutant per site (again by hash); same code, same seed, same mutants. Not sites:
type annotations (strings under ``from __future__ import annotations``), the lines of catalogue
switches (``... in runtime.bugs``, see :mod:`sim.scenarios.catalogue`) and the code that runs only with a switch
on (that is the catalogue's job, ``sim hunt``), and lines marked ``# pragma: no mutate``.

Mutants run locally (``--jobs`` subprocesses at a time) or as Spark tasks (``--engine spark``,
one task per mutant, :func:`judge_on_spark`); both call :func:`judge`, so the verdicts agree.
A mutant is named ``path:operator:occurrence@key`` (the occurrence counts that operator's
positions in the file; ``key`` is a hash of the file, the function, the operator and the changed
line's text before and after, so it survives edits elsewhere); ``--mutant ID`` replays one.
Wall time is read through the production runtime and only reported.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import attrs

from slatedb.runtime.production import ProductionRuntime

from sim.campaign import mutate_select
from sim.campaign.argtypes import number, whole
from sim.campaign.mutate_judge import JUDGE_IGNORED_TESTS, check_label
from sim.scenarios import catalogue as bugs_mod
from sim.scenarios import registry as scenarios_mod
_WALL = ProductionRuntime("sim-mutate")

#: The tree this ``sim`` package belongs to (what is copied for each mutant).
ROOT = Path(__file__).resolve().parents[2]

#: The protocol modules: packages (or single modules) under ``slatedb/``. Those not present in the
#: tree (the projection/union code until it lands) are skipped.
PROTOCOL_MODULES = ("wal", "manifest", "db", "compactor", "gc", "checkpoint", "reader", "clone", "projection",
                    "destroy", "load", "merge", "txn")

#: Protocol modules whose code is files inside other packages, not a package (or module) of their
#: own under ``slatedb/``: name -> files. The bulk load (spec/protocols/bulk-load.md) is Spark's
#: package's driver-side protocol; merge operands (merge.md) and transactions (transactions.md)
#: are the front-end's.
SPREAD_MODULES: dict[str, tuple[str, ...]] = {
    "load": ("slatedb/spark/load.py", "slatedb/spark/load_pins.py", "slatedb/spark/sharded.py"),
    "merge": ("slatedb/merge.py", "slatedb/merge_operator.py"),
    "txn": ("slatedb/api/txn.py",),
}

#: Tests of a module whose package has no ``tests/<package>`` directory.
FALLBACK_TESTS: dict[str, tuple[str, ...]] = {
    "wal": ("tests/db/test_db.py", "tests/regressions"),
    "manifest": ("tests/db/test_db.py", "tests/gc/test_boundary.py"),
    # ... and the shards an earlier destroy kept for a clone (destroy.md "Shards another database
    # still reads": a re-run's step 1 without a manifest, _no_manifest)
    "destroy": ("tests/clone/test_destroy.py", "tests/gc/test_destroy_detach.py", "tests/spark/test_sharded.py"),
    # the bulk load's protocol tests (the plain driver and Spark's), not the interop or docs ones
    "load": ("tests/spark/test_load_protocol.py", "tests/spark/test_load_cleanup.py", "tests/spark/test_sharded.py"),
    "merge": ("tests/db/test_merge.py", "tests/db/test_merge_layers.py", "tests/db/test_merge_model.py",
              "tests/db/test_merge_operator.py", "tests/compactor/test_failing_merge.py"),
    # ... and the regressions of slatedb/api/txn.py's fixes (scan_prefix, commit once closed, a
    # scan's bound types) and its argument checks (commit(durable=), mark_read, reverse=, ranges)
    "txn": ("tests/api/test_transactions.py", "tests/api/test_transactions_model.py", "tests/api/test_txn_context.py",
            "tests/api/test_txn_scan_prefix.py", "tests/api/test_txn_commit_closed.py",
            "tests/api/test_txn_scan_bound_types.py", "tests/api/test_flag_args.py", "tests/api/test_scan_range_args.py"),
}

#: Tests elsewhere that test a package's code, run with the package's own tests.
EXTRA_TESTS: dict[str, tuple[str, ...]] = {
    "db": ("tests/checkpoint/test_db_checkpoint.py",  # Db.create_checkpoint is slatedb/db/follower.py
           "tests/checkpoint/test_create_cancelled.py",  # ... its commit shielded from a caller giving up
           "tests/api/test_metrics.py",  # the counters slatedb/db counts (Db.get's fast path)
           "tests/api/test_read_options.py"),  # expire_at_ms (WritePath._expiry) and read options
    # the WAL regressions (replay fenced mid-way, zombie acks, the epoch re-check)
    "wal": ("tests/regressions/test_db_seed_581.py", "tests/regressions/test_db_zombie_ack.py",
            "tests/regressions/test_takeover_no_epoch_recheck.py",
            "tests/api/test_wal_reader.py",  # slatedb/wal/reader.py: the CDC reader
            "tests/db/test_open_after_destroy.py"),  # WalWriter.outlived_destroy (DESTROY-7, open and load)
    # clones of unions (one database named by several entries: final checkpoints, CLONE-1)
    "clone": ("tests/projection/test_create.py",),
    # slatedb/gc/destroyed.py's delete_shard: the shards a destroy kept go once released
    "gc": ("tests/spark/test_sharded.py",),
    # slatedb.uniffi's DbReader reads the aio DbReader's core (status, close reason)
    "reader": ("tests/uniffi/test_refusals.py",),
    # SequencedStore's boundary rules; a create behind the boundary (create_initial)
    # ... and CompactionSpec (slatedb/manifest/compaction.py): its JSON and stored forms
    "manifest": ("tests/gc/test_boundary.py", "tests/regressions/test_db_seed_2077.py",
                 "tests/compactor/test_spec.py"),
    # the compactor's per-key retention with merge operands (executor.retain: MERGE-5, MERGE-6)
    "compactor": ("tests/db/test_merge_operator.py",),
}

#: CPU seconds one seed of each scenario costs: the scenario table's (:data:`sim.scenarios.registry.SCENARIOS`).
COST_S: dict[str, float] = {spec.name: spec.cost_s for spec in scenarios_mod.SCENARIOS}

#: cosmic-ray core operators not used, and why.
EXCLUDED_OPERATORS: dict[str, str] = {
    "core/VariableReplacer": "draws from the global random module: a mutant could not be repeated",
    "core/VariableInserter": "draws from the global random module: a mutant could not be repeated",
}

#: The reviewed list of equivalent mutants (TOML, ``[[equivalent]]`` tables with ``key`` and
#: ``reason``; ``mutant``, ``where``, ``before`` and ``after`` are for the reader).
EQUIVALENTS = Path(__file__).with_name("mutate_equivalents.toml")

COPIED = ("slatedb", "sim", "tests", "spec", "pyproject.toml")
_IGNORE = shutil.ignore_patterns("__pycache__", ".hypothesis", ".pytest_cache", "*.pyc", "*.parquet")

KILLED, SURVIVED, EQUIVALENT, TIMEOUT = "killed", "survived", "equivalent", "timeout"


# --- mutants -------------------------------------------------------------------------------


@attrs.frozen
class Mutant:
    """One mutation: ``operator``'s ``occurrence``-th position in ``path`` (relative to the root)."""

    module: str
    path: str
    operator: str
    occurrence: int
    line: int
    col: int
    where: str = ""  # the enclosing function, ``Class.method``
    before: str = ""  # the changed source lines, stripped, before and after
    after: str = ""
    diff: str = ""

    @property
    def key(self) -> str:
        text = "|".join((self.path, self.where, self.operator, self.before, self.after))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def id(self) -> str:
        return f"{self.path}:{self.operator}:{self.occurrence}@{self.key}"


_ID = re.compile(r"^(?P<path>[^:@]+):(?P<op>[^:@]+):(?P<occ>\d+)(?:@(?P<key>[0-9a-f]+))?$")


def operators() -> list[tuple[str, Any]]:
    """(name, instance) of every cosmic-ray operator used, in the library's order."""
    import cosmic_ray.plugins

    out = []
    for name in cosmic_ray.plugins.operator_names():
        if name in EXCLUDED_OPERATORS:
            continue
        cls = cosmic_ray.plugins.get_operator(name)
        if cls.arguments():  # operators that need configuration (none among the core ones used)
            continue
        out.append((name, cls()))
    return out


def module_files(module: str, root: Path = ROOT) -> list[str]:
    """The ``.py`` files of a protocol module, relative to ``root`` (empty when it does not exist)."""
    if module in SPREAD_MODULES:
        return [f for f in SPREAD_MODULES[module] if (root / f).is_file()]
    pkg, single = root / "slatedb" / module, root / "slatedb" / f"{module}.py"
    if pkg.is_dir():
        return sorted(p.relative_to(root).as_posix() for p in pkg.rglob("*.py") if "__pycache__" not in p.parts)
    if single.is_file():
        return [single.relative_to(root).as_posix()]
    return []


def present_modules(root: Path = ROOT) -> list[str]:
    return [m for m in PROTOCOL_MODULES if module_files(m, root)]


def module_of(path: str) -> str:
    spread = [m for m, files in SPREAD_MODULES.items() if path in files]
    if spread:
        return spread[0]
    parts = Path(path).parts
    return parts[1].removesuffix(".py") if len(parts) > 1 and parts[0] == "slatedb" else parts[0]


def _skipped_spans(tree: Any, lines: list[str]) -> tuple[list[tuple[tuple[int, int], tuple[int, int]]], set[int]]:
    """Source spans and lines that are not mutation sites: annotations; switch lines and the code
    only a switch reaches (a catalogued bug's own function, named ``_bug_...``, included);
    ``# pragma: no mutate`` lines."""
    from cosmic_ray.ast import ast_nodes

    spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
    skip_lines = {i + 1 for i, text in enumerate(lines) if re.search(r"#.*pragma:.*no mutate", text)}
    for node in ast_nodes(tree):
        t = node.type
        if t == "funcdef" and node.name.value.startswith("_bug_"):
            spans.append((node.start_pos, node.end_pos))
        if t == "funcdef" and node.annotation is not None:
            spans.append((node.annotation.start_pos, node.annotation.end_pos))
        elif t == "param" and getattr(node, "annotation", None) is not None:
            spans.append((node.annotation.start_pos, node.annotation.end_pos))
        elif t == "annassign":
            ann = node.children[1]
            spans.append((ann.start_pos, ann.end_pos))
        elif t == "if_stmt":
            # if <cond mentioning .bugs>: <suite>  -- the condition, and the suite when the switch
            # being on is what enters it ("name" in ...bugs, possibly and-ed with more).
            children = node.children
            for i, child in enumerate(children):
                if getattr(child, "value", None) in ("if", "elif"):
                    cond, suite = children[i + 1], children[i + 3]
                    code = cond.get_code()
                    if re.search(r"\bbugs\b", code):
                        for ln in range(cond.start_pos[0], cond.end_pos[0] + 1):
                            skip_lines.add(ln)
                        if re.search(r"\bin\s+[\w.]*bugs\b", code) and not re.search(r"\bnot\s+in\s+[\w.]*bugs\b", code) \
                                and " or " not in code:
                            spans.append((suite.start_pos, suite.end_pos))
        if hasattr(node, "value") and node.type == "name" and node.value == "bugs":
            skip_lines.add(node.start_pos[0])
    return spans, skip_lines


def _inside(pos: tuple[int, int], spans: Iterable[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _where(tree: Any, pos: tuple[int, int]) -> str:
    leaf = tree.get_leaf_for_position(pos, include_prefixes=True)
    names = []
    node = leaf
    while node is not None:
        if node.type in ("funcdef", "classdef"):
            names.append(node.name.value)
        node = node.parent
    return ".".join(reversed(names)) or "<module>"


@functools.lru_cache(maxsize=256)
def _tree(source: str) -> Any:
    """The parso tree of a source text (parsed once per text; callers only read it)."""
    from cosmic_ray.ast import get_ast

    return get_ast(source)


_ENUMERATED: dict[tuple[str, str], tuple[Mutant, ...]] = {}


def enumerate_mutants(path: str, root: Path = ROOT) -> list[Mutant]:
    """Every mutant of one file (not yet applied: no ``before``/``after``/``diff``); kept by the
    file's content hash, so a file is parsed and walked once per content."""
    source = (root / path).read_text()
    key = (path, hashlib.sha256(source.encode()).hexdigest())
    if key not in _ENUMERATED:
        _ENUMERATED[key] = tuple(_enumerate(path, source))
    return list(_ENUMERATED[key])


#: The operators whose mutant of a parameter list's bare ``*`` or ``/`` is Python (the other).
_MARKER_SWAPS = ("core/ReplaceBinaryOperator_Mul_Div", "core/ReplaceBinaryOperator_Div_Mul")


def _enumerate(path: str, source: str) -> list[Mutant]:
    from cosmic_ray.ast import ast_nodes

    tree = _tree(source)
    spans, skip_lines = _skipped_spans(tree, source.splitlines())
    nodes = list(ast_nodes(tree))
    # A parameter list's bare `*` (keyword-only) and `/` (positional-only): cosmic-ray takes them
    # for binary operators; only their swap for each other is Python, every other "mutant" there
    # is a syntax error, not a mutant.
    markers = {n.start_pos for n in nodes if n.type == "operator" and n.value in ("*", "/")
               and n.parent.type in ("parameters", "lambdef")}
    module = module_of(path)
    out = []
    for name, op in operators():
        occurrence = 0
        marker_ok = name in _MARKER_SWAPS
        for node in nodes:
            for start, _end in op.mutation_positions(node):
                if start[0] not in skip_lines and not _inside(start, spans) and (marker_ok or start not in markers):
                    out.append(Mutant(module, path, name, occurrence, start[0], start[1], _where(tree, start)))
                occurrence += 1
    return out


def apply(mutant: Mutant, root: Path = ROOT) -> tuple[Mutant, str]:
    """The mutant with its diff and changed lines filled in, and the mutated file's text."""
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    source = (root / mutant.path).read_text()
    op = cosmic_ray.plugins.get_operator(mutant.operator)()
    mutated = mutate_code(source, op, mutant.occurrence)
    if mutated is None or mutated == source:
        raise ValueError(f"{mutant.path}: {mutant.operator} has no occurrence {mutant.occurrence}")
    a, b = source.splitlines(), mutated.splitlines()
    diff = "\n".join(difflib.unified_diff(a, b, f"a/{mutant.path}", f"b/{mutant.path}", n=2, lineterm=""))
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    before, after = [], []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            before += [s.strip() for s in a[i1:i2]]
            after += [s.strip() for s in b[j1:j2]]
    return attrs.evolve(mutant, before=" / ".join(before), after=" / ".join(after), diff=diff), mutated


def _h(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


def select(module: str, sample: int | None, seed: int, root: Path = ROOT) -> tuple[list[Mutant], int, int]:
    """``sample`` mutants of a module (all when None), one per site, sites ordered by hash; also the
    module's number of mutants and of sites."""
    everything = [m for path in module_files(module, root) for m in enumerate_mutants(path, root)]
    sites: dict[tuple[str, int, int], list[Mutant]] = defaultdict(list)
    for m in everything:
        sites[(m.path, m.line, m.col)].append(m)
    order = sorted(sites, key=lambda s: (_h(seed, module, *s), s))
    if sample is not None:
        order = order[:sample]
    chosen = []
    for site in order:
        cands = sorted(sites[site], key=lambda m: (m.operator, m.occurrence))
        chosen.append(cands[_h(seed, module, *site, "pick") % len(cands)])
    chosen.sort(key=lambda m: (m.path, m.line, m.col, m.operator))
    return [apply(m, root)[0] for m in chosen], len(everything), len(sites)


def parse_id(text: str, root: Path = ROOT) -> Mutant:
    """The mutant an id names (``path:operator:occurrence[@key]``); a key that no longer matches
    (the code changed) is an error."""
    m = _ID.match(text.strip())
    if not m:
        raise ValueError(f"bad mutant id {text!r}: expected path:operator:occurrence[@key]")
    path, op, occ = m["path"], m["op"], int(m["occ"])
    if not (root / path).is_file():
        raise ValueError(f"no such file {path!r}")
    for cand in enumerate_mutants(path, root):
        if cand.operator == op and cand.occurrence == occ:
            mutant = apply(cand, root)[0]
            if m["key"] and not mutant.key.startswith(m["key"]):
                raise ValueError(f"mutant {text}: the code changed (key is now {mutant.key}: {mutant.before!r} -> "
                                 f"{mutant.after!r})")
            return mutant
    raise ValueError(f"{path}: {op} occurrence {occ} is not a mutation site (out of range or excluded)")


# --- the equivalents file --------------------------------------------------------------------


@attrs.frozen
class Equivalent:
    key: str
    reason: str
    mutant: str = ""
    where: str = ""
    before: str = ""
    after: str = ""


def load_equivalents(path: Path | str | None = EQUIVALENTS) -> dict[str, Equivalent]:
    """The reviewed equivalent mutants by key; an entry without a reason is refused."""
    if path is None or not Path(path).exists():
        return {}
    with open(path, "rb") as f:
        data = tomllib.load(f)
    out: dict[str, Equivalent] = {}
    for i, e in enumerate(data.get("equivalent", [])):
        if not e.get("key") or not str(e.get("reason", "")).strip():
            raise ValueError(f"{path}: equivalent #{i + 1} needs a key and a reason")
        out[e["key"]] = Equivalent(e["key"], e["reason"].strip(), e.get("mutant", ""), e.get("where", ""),
                                   e.get("before", ""), e.get("after", ""))
    return out


def equivalent_entry(mutant: Mutant, reason: str) -> str:
    """A TOML entry for the equivalents file (``--print-equivalent``)."""
    def q(s: str) -> str:
        return json.dumps(s)
    return (f"[[equivalent]]\nkey = {q(mutant.key)}\nmutant = {q(mutant.id)}\nwhere = {q(mutant.path + ':' + mutant.where)}\n"
            f"before = {q(mutant.before)}\nafter = {q(mutant.after)}\nreason = {q(reason)}\n")


# --- the campaign ----------------------------------------------------------------------------


@attrs.frozen
class Campaign:
    """What judges a mutant: seeds of scenarios and test paths, in the order they run."""

    scenarios: tuple[str, ...]
    seeds: tuple[tuple[str, int], ...]  # (scenario, number of seeds 0..n-1)
    tests: bool = True

    @classmethod
    def make(cls, scenarios: Sequence[str] | None = None, budget_s: float = 2.0, seeds_per_scenario: int | None = None,
             tests: bool = True) -> "Campaign":
        names = tuple(scenarios) if scenarios else tuple(scenarios_mod.BY_NAME)
        unknown = [s for s in names if s not in scenarios_mod.BY_NAME]
        if unknown:
            raise ValueError(f"unknown scenario(s) {unknown} (one of {', '.join(scenarios_mod.BY_NAME)})")
        names = tuple(sorted(names, key=lambda s: (COST_S.get(s, 1.0), s)))
        seeds = tuple((s, seeds_per_scenario if seeds_per_scenario is not None
                       else max(1, round(budget_s / COST_S.get(s, 1.0)))) for s in names)
        if not tests and not any(n for _, n in seeds):
            raise ValueError("no seeds and no tests: nothing would judge a mutant (every one would survive)")
        return cls(names, seeds, tests)

    def checks(self, module: str, root: Path = ROOT) -> list[dict]:
        """The checks in order: round r = seed r of every scenario (cheapest first); the tests of
        ``module``'s package after the first round."""
        out: list[dict] = []
        rounds = max((n for _, n in self.seeds), default=0)
        for r in range(rounds):
            out += [{"kind": "seed", "scenario": s, "seed": r} for s, n in self.seeds if r < n]
            if r == 0 and self.tests:
                paths = test_paths(module, root)
                if paths:
                    out.append({"kind": "tests", "paths": paths})
        if rounds == 0 and self.tests and test_paths(module, root):
            out.append({"kind": "tests", "paths": test_paths(module, root)})
        return out

    def describe(self) -> str:
        seeds = ", ".join(f"{s} 0..{n - 1}" for s, n in self.seeds if n) or "none"
        return f"seeds: {seeds}" + ("; plus the package's tests" if self.tests else "; no tests")

    def flags(self, budget_s: float, seeds_per_scenario: int | None) -> str:
        f = f" --scenarios {','.join(self.scenarios)}" if set(self.scenarios) != set(scenarios_mod.BY_NAME) else ""
        f += f" --seeds-per-scenario {seeds_per_scenario}" if seeds_per_scenario is not None else f" --budget-s {budget_s:g}"
        return f + ("" if self.tests else " --no-tests")


def test_paths(module: str, root: Path = ROOT) -> list[str]:
    own = [f"tests/{module}"] if (root / "tests" / module).is_dir() else list(FALLBACK_TESTS.get(module, ()))
    return [p for p in own + list(EXTRA_TESTS.get(module, ())) if (root / p).exists()]


# --- judging one mutant (in a copy, in a subprocess) ---------------------------------------


def copy_tree(root: Path, dest: Path) -> None:
    for name in COPIED:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_IGNORE, symlinks=True)
        elif src.exists():
            shutil.copy2(src, dest / name)


#: A judge (with its children) that uses under :data:`STALL_CPU_S` of CPU in
#: :data:`STALL_WALL_S` wall seconds is hung -- a mutant waiting on an event nobody sets, or on
#: the real clock -- and is stopped as a timeout, however long its wall guard (``--timeout-s``,
#: which a loaded machine needs long: a judge at nice 12 may get a twentieth of a core, but never
#: none). Without it a hung mutant held its slot for the whole guard (an hour in the seed-23 draw).
STALL_WALL_S = 300.0
STALL_CPU_S = 0.5


def _group_cpu_s(pgid: int) -> float | None:
    """CPU seconds of every process in process group ``pgid`` (Linux ``/proc``; their reaped
    children included); None where ``/proc`` does not tell."""
    total, found = 0, False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            found = True
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK") if found else None


def _wait_judge(proc: subprocess.Popen, wall_s: float) -> bool | None:
    """Wait for a judge, stopping its process group (the judge and its children) when its wall
    guard ``wall_s`` runs out or it is hung (:data:`STALL_WALL_S`). Returns False when it ended
    by itself, True when it was stopped as hung, None when its wall guard ran out."""
    start = last_t = _WALL.monotonic_s()
    last_cpu = 0.0
    poll_s = max(0.05, min(30.0, STALL_WALL_S / 4))
    while True:
        now = _WALL.monotonic_s()
        try:
            proc.wait(timeout=max(0.01, min(poll_s, start + wall_s - now)))
            return False
        except subprocess.TimeoutExpired:
            pass
        now = _WALL.monotonic_s()
        outcome: bool | None
        if now - start >= wall_s:
            outcome = None
        else:
            cpu = _group_cpu_s(proc.pid)
            if cpu is None or cpu - last_cpu >= STALL_CPU_S:
                last_cpu, last_t = (cpu or last_cpu), now
                continue
            if now - last_t < STALL_WALL_S:
                continue
            outcome = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own process group (start_new_session)
        except ProcessLookupError:
            pass
        proc.wait()
        return outcome


@attrs.frozen
class Job:
    """Everything a worker (a thread here, or a Spark task) needs to judge one mutant; ``mutant``
    None is the baseline (the unmutated tree)."""

    root: str
    module: str
    checks: tuple = ()
    mutant: Mutant | None = None
    mutated_text: str | None = None
    cpu_s: float = 300.0
    wall_s: float = 3000.0
    all_checks: bool = False  # the baseline runs every check, not up to the first failure
    coverage: bool = False  # the baseline records each check's lines (mutate_select) ...
    imports: tuple[str, ...] = ()  # ... after importing these files (the protocol modules) first


def judge(job: Job) -> dict:
    """Judge one mutant: copy the tree, write the mutated file, run the campaign in a subprocess
    (CPU time box ``job.cpu_s``, wall guard ``job.wall_s``), remove the copy. Returns a row:
    ``status`` (killed / survived / timeout; ``baseline`` for the unmutated tree), ``by`` (the
    check that failed), ``violation``, ``results`` (one dict per check run), ``cpu_s``, ``wall_s``."""
    start = _WALL.monotonic_s()
    tmp = Path(tempfile.mkdtemp(prefix="sim-mutate-"))
    try:
        copy_tree(Path(job.root), tmp)
        if job.mutant is not None:
            (tmp / job.mutant.path).write_text(job.mutated_text or "")
        spec = tmp / "mutate-checks.json"
        spec.write_text(json.dumps({"checks": list(job.checks), "all": job.all_checks, "coverage": job.coverage,
                                    "imports": list(job.imports)}))
        out = tmp / "mutate-results.jsonl"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COVERAGE_PROCESS_START")}
        env.update(PYTHONPATH=str(tmp), PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
        cpu = max(1, int(job.cpu_s))

        def limits() -> None:  # in the child, before exec
            import resource

            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

        with open(tmp / "mutate-judge.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "sim.campaign.mutate_judge", str(spec), str(out)], cwd=tmp,
                                    env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=limits,
                                    start_new_session=True)
            timed_out = hung = _wait_judge(proc, job.wall_s)
            if hung is None:
                timed_out, hung = True, False
        rc = proc.returncode
        results = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        cov_path = Path(str(out) + ".cov.json")
        coverage = json.loads(cov_path.read_text()) if job.coverage and cov_path.exists() else None
        log_tail = (tmp / "mutate-judge.log").read_text(errors="replace")[-2000:]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    row = {"mutant": job.mutant.id if job.mutant else None, "module": job.module, "results": results,
           "wall_s": _WALL.monotonic_s() - start, "rc": rc, "coverage": coverage,
           "cpu_s": max([r.get("cpu_s", 0.0) for r in results] or [0.0]) if not timed_out else job.cpu_s}
    failed = [r for r in results if r.get("check") and not r["ok"]]
    done = any(r.get("done") for r in results)
    if failed and failed[0].get("timeout") and job.mutant is not None:
        row.update(status=TIMEOUT, by=failed[0]["check"], violation=failed[0]["violation"])
        return row
    if job.mutant is None:
        row["status"] = "baseline" if done else "broken"
        row["violation"] = "" if done else f"baseline did not finish (rc {rc}): {log_tail[-600:]}"
        return row
    if failed:
        row.update(status=KILLED, by=failed[0]["check"], violation=failed[0].get("violation", ""))
    elif timed_out or rc in (-signal.SIGXCPU, -signal.SIGKILL):
        running = len([r for r in results if r.get("check")])
        label = check_label(job.checks[running]) if running < len(job.checks) else "the end"
        box = "hung: no CPU used for {:.0f} s".format(STALL_WALL_S) if hung else (
            "time box ({}) ran out".format("wall" if timed_out else "CPU"))
        row.update(status=TIMEOUT, by=label, violation=f"{box} during {label}")
    elif not done:
        row.update(status=KILLED, by="judge", violation=f"the campaign crashed (rc {rc}): {log_tail[-600:]}")
    else:
        row.update(status=SURVIVED, by="", violation="")
    return row


# --- a run over modules ----------------------------------------------------------------------


@attrs.frozen
class Report:
    rows: list[dict]  # one per selected mutant (equivalents included), with "status"
    modules: dict[str, dict]  # module -> {"mutants": n, "sites": n, "sampled": n}
    baseline: dict[str, dict]  # module -> baseline row
    dropped: dict[str, list[str]]  # module -> checks failing at baseline, left out
    wall_s: float


def run(modules: Sequence[str], campaign: Campaign, *, sample: int | None = 8, seed: int = 0, jobs: int = 1,
        engine: str = "local", master: str = "local[*]", root: Path = ROOT, equivalents: dict[str, Equivalent] | None = None,
        mutant_ids: Sequence[str] = (), cpu_s: float | None = None, wall_s: float | None = None,
        log: Callable[[str], None] | None = None, spark: Any = None, full: bool = False,
        cache: Path | None = None) -> Report:
    """Select, baseline, judge. ``mutant_ids`` replaces the selection by those mutants. Each mutant
    is judged by the checks whose baseline run executed its statement (:mod:`sim.campaign.mutate_select`),
    or by every check with ``full``. ``cache``: a directory to keep and reuse baselines in."""
    start = _WALL.monotonic_s()
    log = log or (lambda _m: None)
    equivalents = load_equivalents() if equivalents is None else equivalents
    selected: dict[str, list[Mutant]] = defaultdict(list)
    counts: dict[str, dict] = {}
    if mutant_ids:
        for text in mutant_ids:
            m = parse_id(text, root)
            selected[m.module].append(m)
        for mod in selected:
            counts[mod] = {"mutants": None, "sites": None, "sampled": len(selected[mod])}
    else:
        for mod in modules:
            if not module_files(mod, root):
                raise ValueError(f"no protocol module {mod!r} under {root}/slatedb")
            chosen, n, s = select(mod, sample, seed, root)
            selected[mod] = chosen
            counts[mod] = {"mutants": n, "sites": s, "sampled": len(chosen)}
            log(f"{mod}: {n} mutants at {s} sites; {len(chosen)} selected")
    if all(m.key in equivalents for ms in selected.values() for m in ms):  # nothing to judge: no baseline
        rows = [_row_of(m, {"status": EQUIVALENT}, equivalents[m.key].reason) for ms in selected.values() for m in ms]
        return Report(rows, counts, {}, {mod: [] for mod in selected}, _WALL.monotonic_s() - start)
    # The baseline: every check once on the unmutated tree, under coverage (mutate_select): the
    # scenario seeds (they do not depend on the module) and the tests of every selected module.
    seed_checks = [c for c in campaign.checks("", root) if c["kind"] == "seed"]
    paths = _outermost(p for mod in selected for p in (test_paths(mod, root) if campaign.tests else []))
    imports = tuple(f for mod in present_modules(root) for f in module_files(mod, root))
    base_jobs = [Job(str(root), "*", tuple(seed_checks), cpu_s=cpu_s or 3600.0, wall_s=wall_s or 36000.0,
                     all_checks=True, coverage=True, imports=imports)]
    if paths:
        base_jobs.append(Job(str(root), "tests", ({"kind": "tests", "paths": paths},), cpu_s=cpu_s or 3600.0,
                             wall_s=wall_s or 36000.0, all_checks=True, coverage=True, imports=imports))
    base = _baseline(base_jobs, root, jobs, engine, master, spark, log, cache)
    index = mutate_select.CoverIndex(base["coverage"])
    seeds_ok = {mutate_select.seed_context(c["scenario"], c["seed"]): (c, r["cost_s"])
                for c, r in zip(seed_checks, base["seeds"]) if r["ok"]}
    baselines: dict[str, dict] = {}
    dropped: dict[str, list[str]] = {}
    tests_ok: dict[str, dict[str, dict]] = {}
    checks: dict[str, list[dict]] = {}
    for mod in selected:
        mine = {n: t for n, t in base["tests"].items() if _under(n, test_paths(mod, root) if campaign.tests else [])}
        tests_ok[mod] = {n: t for n, t in mine.items() if t["ok"] and not t["skipped"]}
        failing = [check_label(c) for c, r in zip(seed_checks, base["seeds"]) if not r["ok"]]
        failing += [n for n, t in mine.items() if not t["ok"]]
        dropped[mod] = failing
        # --full-campaign: every passing check, in the campaign's order (the tests after the first round)
        checks[mod] = [c if c["kind"] == "seed" else {**c, "nodes": list(tests_ok[mod])}
                       for c in campaign.checks(mod, root) if c["kind"] != "seed" or check_label(c) not in failing]
        baselines[mod] = {"results": base["seeds"], "cpu_s": base["cpu_s"], "wall_s": base["wall_s"]}
        log(f"baseline {mod}: {len(seeds_ok)} seeds and {len(tests_ok[mod])} tests pass, {len(failing)} fail and are "
            f"left out")
    jobs_list: list[Job] = []
    rows: list[dict] = []
    plans: dict[str, mutate_select.Plan] = {}
    for mod, mutants in selected.items():
        for m in mutants:
            if m.key in equivalents:
                rows.append(_row_of(m, {"status": EQUIVALENT, "by": "", "violation": "", "results": [], "wall_s": 0.0,
                                        "cpu_s": 0.0}, equivalents[m.key].reason))
                continue
            _m, text = apply(m, root)
            if full:
                plan = mutate_select.Plan(tuple(checks[mod]), base["cpu_s"], "every check (--full-campaign)")
                box = cpu_s if cpu_s is not None else max(120.0, 4.0 * base["cpu_s"])
            else:
                span = mutate_select.statement_span(_tree((root / m.path).read_text()), m.line, m.col)
                plan = mutate_select.plan(m.path, span, index, seeds_ok, tests_ok[mod])
                box = cpu_s if cpu_s is not None else max(30.0, 20.0 + 3.0 * plan.cost_s)
            plans[m.id] = plan
            if not plan.checks:
                r = _row_of(m, {"status": SURVIVED, "by": "", "violation": "", "results": [], "wall_s": 0.0,
                                "cpu_s": 0.0}, "")
                r.update(trace_changed=0, trace_compared=0, why=plan.why)
                rows.append(r)
                log(f"  {SURVIVED:<9} {m.id} ({m.path}:{m.line} {m.where}) not run: {plan.why}")
                continue
            jobs_list.append(Job(str(root), mod, plan.checks, m, text, box, wall_s or 10.0 * box))
    log(f"judging {len(jobs_list)} mutant(s) ({len(rows)} listed equivalent), {jobs} at a time, engine {engine}")
    by_id = {j.mutant.id: j.mutant for j in jobs_list if j.mutant}
    for row in _map(judge, jobs_list, jobs, engine, master, spark):
        m = by_id[row["mutant"]]
        r = _row_of(m, row, "")
        r["trace_changed"], r["trace_compared"] = _trace_change(row, baselines[m.module])
        r["why"] = plans[m.id].why
        rows.append(r)
        log(f"  {r['status']:<9} {m.id} ({m.path}:{m.line} {m.where}) {r['by']} [{r['wall_s']:.0f} s; {plans[m.id].why}]")
    rows.sort(key=lambda r: (PROTOCOL_MODULES.index(r["module"]) if r["module"] in PROTOCOL_MODULES else 99,
                             r["path"], r["line"], r["operator"]))
    return Report(rows, counts, baselines, dropped, _WALL.monotonic_s() - start)


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths, each once, without those lying under another one."""
    uniq = sorted(set(paths))
    return [p for p in uniq if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in uniq)]


def _under(nodeid: str, paths: Sequence[str]) -> bool:
    f = nodeid.split("::", 1)[0]
    return any(f == p or f.startswith(p.rstrip("/") + "/") for p in paths)


def tree_digest(root: Path = ROOT) -> str:
    """A hash of every file a judge copies (what the baseline depends on)."""
    h = hashlib.sha256()
    for name in COPIED:
        src = root / name
        files = sorted(p for p in src.rglob("*") if p.is_file()) if src.is_dir() else [src] if src.exists() else []
        for p in files:
            rel = p.relative_to(root)
            if "__pycache__" in rel.parts or ".hypothesis" in rel.parts or ".pytest_cache" in rel.parts \
                    or p.suffix in (".pyc", ".parquet"):
                continue
            h.update(rel.as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


#: Where baselines are kept, by the hash of the tree and of the checks (``.cache`` is not committed).
BASELINE_CACHE = ROOT / ".cache" / "sim-mutate"


def _baseline(base_jobs: list[Job], root: Path, jobs: int, engine: str, master: str, spark: Any,
              log: Callable[[str], None], cache: Path | None = None) -> dict:
    """The baseline: ``seeds`` (one result per seed check, in order), ``tests`` (nodeid -> record),
    ``coverage`` (context -> path -> lines), ``cpu_s``, ``wall_s``. Kept in ``cache`` (``sim mutate``:
    :data:`BASELINE_CACHE`) by the hash of the tree and the checks: the same tree and campaign give
    the same baseline (the checks are deterministic), so a replay does not pay for it again."""
    cached = None
    if cache is not None:
        key = hashlib.sha256((tree_digest(root) + json.dumps([list(j.checks) for j in base_jobs], sort_keys=True)
                              + sys.version).encode()).hexdigest()[:20]
        cached = Path(cache) / f"baseline-{key}.json"
    if cached is not None and cached.exists():
        log(f"baseline: reused {cached}")
        return json.loads(cached.read_text())
    log(f"baseline: the unmutated tree, under coverage ({sum(len(j.checks) for j in base_jobs)} checks)")
    out: dict[str, Any] = {"seeds": [], "tests": {}, "coverage": {}, "cpu_s": 0.0, "wall_s": 0.0}
    for row in _map(judge, base_jobs, jobs, engine, master, spark):
        if row["status"] != "baseline":
            raise RuntimeError(f"the baseline campaign ({row['module']}) did not finish: {row['violation']}")
        results = [r for r in row["results"] if r.get("check")]
        if row["module"] == "*":
            out["seeds"] = results
        for r in results:
            out["tests"].update(r.get("tests", {}))
        for ctx, files in (row["coverage"] or {}).items():
            out["coverage"].setdefault(ctx, {}).update(files)
        out["cpu_s"] += row["cpu_s"]
        out["wall_s"] += row["wall_s"]
    log(f"baseline: {out['cpu_s']:.0f} CPU s, {len(out['seeds'])} seeds, {len(out['tests'])} tests")
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps(out))
            tmp.replace(cached)
        except OSError:
            pass
    return out


def _row_of(m: Mutant, row: dict, reason: str) -> dict:
    return {"mutant": m.id, "key": m.key, "module": m.module, "path": m.path, "line": m.line, "where": m.where,
            "operator": m.operator, "before": m.before, "after": m.after, "diff": m.diff, "status": row["status"],
            "by": row.get("by", ""), "violation": row.get("violation", ""), "reason": reason,
            "checks_run": len([r for r in row.get("results", []) if r.get("check")]),
            "wall_s": row.get("wall_s", 0.0), "cpu_s": row.get("cpu_s", 0.0),
            "results": row.get("results", [])}


def _trace_change(row: dict, baseline: dict) -> tuple[int, int]:
    """Seeds whose trace digest differs from the baseline's, of those compared."""
    base = {r["check"]: r.get("digest") for r in baseline["results"] if r.get("digest")}
    compared = changed = 0
    for r in row["results"]:
        if r.get("digest") and r["check"] in base:
            compared += 1
            changed += r["digest"] != base[r["check"]]
    return changed, compared


def _map(fn: Callable[[Job], dict], items: list[Job], jobs: int, engine: str, master: str, spark: Any) -> Iterable[dict]:
    if not items:
        return []
    if engine == "spark":
        if spark is not None:
            return judge_on_spark(spark, items)
        from sim.campaign.spark_engine import spark_session

        with spark_session(master, app_name="sim-mutate") as session:
            return judge_on_spark(session, items)
    if jobs <= 1:
        return (fn(j) for j in items)
    return _threaded(fn, items, jobs)


def _threaded(fn: Callable[[Job], dict], items: list[Job], jobs: int) -> Iterable[dict]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(fn, j) for j in items]
        for f in concurrent.futures.as_completed(futures):
            yield f.result()


def judge_on_spark(spark: Any, items: list[Job]) -> list[dict]:
    """One Spark task per mutant, each calling :func:`judge` (the tree at ``Job.root`` must be
    readable where the task runs: local mode, or a shared file system)."""
    sc = spark.sparkContext
    payload = [json.dumps(_job_json(j)) for j in items]
    return sc.parallelize(payload, len(payload)).map(_spark_task).collect()


def _job_json(j: Job) -> dict:
    d = attrs.asdict(j, recurse=False)
    d["mutant"] = attrs.asdict(j.mutant) if j.mutant else None
    d["checks"] = list(j.checks)
    return d


def _spark_task(text: str) -> dict:
    d = json.loads(text)
    d["mutant"] = Mutant(**d["mutant"]) if d["mutant"] else None
    d["checks"] = tuple(d["checks"])
    d["imports"] = tuple(d.get("imports", ()))
    return judge(Job(**d))


# --- the report ------------------------------------------------------------------------------


def summarize(report: Report) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for mod in report.modules:
        rows = [r for r in report.rows if r["module"] == mod]
        c = {s: sum(1 for r in rows if r["status"] == s) for s in (KILLED, SURVIVED, EQUIVALENT, TIMEOUT)}
        judged = c[KILLED] + c[TIMEOUT] + c[SURVIVED]
        c["score"] = (c[KILLED] + c[TIMEOUT]) / judged if judged else None
        table[mod] = {**report.modules[mod], **c}
    return table


def format_report(report: Report, replay_flags: str) -> str:
    lines = []
    table = summarize(report)
    lines.append(f"{'module':<11} {'mutants':>7} {'sites':>6} {'sampled':>7} {'killed':>6} {'timeout':>7} "
                 f"{'survived':>8} {'equiv':>5} {'score':>6}")
    tot = defaultdict(int)
    for mod, t in table.items():
        score = f"{100 * t['score']:.0f}%" if t["score"] is not None else "-"
        lines.append(f"{mod:<11} {t['mutants'] if t['mutants'] is not None else '-':>7} "
                     f"{t['sites'] if t['sites'] is not None else '-':>6} {t['sampled']:>7} {t[KILLED]:>6} "
                     f"{t[TIMEOUT]:>7} {t[SURVIVED]:>8} {t[EQUIVALENT]:>5} {score:>6}")
        for k in ("sampled", KILLED, TIMEOUT, SURVIVED, EQUIVALENT):
            tot[k] += t[k]
    judged = tot[KILLED] + tot[TIMEOUT] + tot[SURVIVED]
    score = f"{100 * (tot[KILLED] + tot[TIMEOUT]) / judged:.0f}%" if judged else "-"
    lines.append(f"{'total':<11} {'':>7} {'':>6} {tot['sampled']:>7} {tot[KILLED]:>6} {tot[TIMEOUT]:>7} "
                 f"{tot[SURVIVED]:>8} {tot[EQUIVALENT]:>5} {score:>6}")
    lines.append("score = (killed + timeout) / (killed + timeout + survived); equivalents are not judged")
    for mod, failing in report.dropped.items():
        if failing:
            lines.append(f"baseline {mod}: left out (fail on the unmutated tree): {', '.join(failing)}")
    lines.append(f"wall time {report.wall_s:.0f} s")
    lines.append("")
    for r in report.rows:
        head = f"{r['status'].upper():<10} {r['mutant']}  ({r['path']}:{r['line']} in {r['where']})"
        if r["status"] == KILLED or r["status"] == TIMEOUT:
            lines.append(f"{head}\n           by {r['by']}: {r['violation'][:200]}")
        elif r["status"] == EQUIVALENT:
            lines.append(f"{head}\n           {r['before']!r} -> {r['after']!r}\n           reason: {r['reason']}")
    for r in report.rows:
        if r["status"] != SURVIVED:
            continue
        changed, compared = r.get("trace_changed", 0), r.get("trace_compared", 0)
        trace = (f"traces changed in {changed} of {compared} seeds (behaviour changed, no oracle noticed)" if changed
                 else f"no trace changed in {compared} seeds (not reached by the campaign, or no effect on it)")
        lines.append(f"\nSURVIVED   {r['mutant']}  ({r['path']}:{r['line']} in {r['where']}; {r['checks_run']} checks; {trace})")
        if r.get("why"):
            lines.append(f"           checks chosen: {r['why']}")
        lines.append(r["diff"])
        lines.append(f"  replay: ./just mutate --mutant '{r['mutant']}'{replay_flags}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``sim mutate`` (see :func:`add_parser`)."""
    parser = argparse.ArgumentParser(prog="sim mutate")
    add_arguments(parser)
    return cmd_mutate(parser.parse_args(argv))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--module", action="append", default=None, metavar="NAME",
                   help=f"protocol module(s) to mutate (repeatable; default every one present: {', '.join(PROTOCOL_MODULES)})")
    p.add_argument("--sample", type=whole(0), default=8, help="mutants per module, one per site (default 8; 0: all)")
    p.add_argument("--seed", type=int, default=0, help="selection seed (default 0): same code and seed, same mutants")
    p.add_argument("--mutant", action="append", default=None, metavar="ID",
                   help="judge exactly this mutant (path:operator:occurrence[@key], as printed; repeatable)")
    p.add_argument("--scenarios", default=None, help="comma-separated scenarios (default: every one of the registry)")
    p.add_argument("--budget-s", type=number(True), default=2.0,
                   help="CPU seconds of seeds per scenario per mutant; seed counts follow from each scenario's cost (default 2)")
    p.add_argument("--seeds-per-scenario", type=whole(0), default=None,
                   help="instead of --budget-s: seeds 0..N-1 of each (0: no seeds, the package's tests alone)")
    p.add_argument("--no-tests", action="store_true", help="only scenario seeds, not the package's tests")
    p.add_argument("--no-cache", action="store_true", help="run the baseline even when one of the same tree is kept")
    p.add_argument("--full-campaign", action="store_true",
                   help="judge each mutant by every check that passes on the baseline, not only those whose baseline "
                        "run executed the mutated statement")
    p.add_argument("--jobs", type=whole(1), default=1, help="mutants judged at once (local engine; default 1)")
    p.add_argument("--engine", choices=["local", "spark"], default="local", help="local subprocesses or Spark tasks")
    p.add_argument("--master", default="local[*]", help="Spark master URL (engine spark)")
    p.add_argument("--timeout-cpu-s", type=number(True), default=None,
                   help="CPU seconds per mutant (default: 20 + 3x the baseline cost of its checks, at least 30; "
                        "with --full-campaign 4x the baseline, at least 120)")
    p.add_argument("--timeout-s", type=number(True), default=None, help="wall seconds per mutant (default 10x the CPU box)")
    p.add_argument("--equivalents", default=str(EQUIVALENTS), help="the reviewed equivalents file")
    p.add_argument("--list", action="store_true", help="only list the selected mutants and their diffs")
    p.add_argument("--out", default=None, help="write one JSON line per mutant to this file")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def foreign_checkout(cwd: Path, root: Path = ROOT) -> Path | None:
    """The checkout of this project ``cwd`` lies in, when it is not ``root`` (the tree this
    module was imported from: a worktree sharing another checkout's venv, whose editable install
    points there): the mutants would be made and judged in ``root``, not in ``cwd``. None
    outside any checkout, or in ``root``."""
    for d in (cwd, *cwd.parents):
        if (d / "sim" / "campaign" / "mutate.py").is_file():
            return None if d.resolve() == root.resolve() else d
    return None


def cmd_mutate(ns: argparse.Namespace) -> int:
    try:
        other = foreign_checkout(Path.cwd())
        if other is not None:  # found judging /work/main's tree from a worktree (seed 26)
            raise ValueError(f"run in {other}, but this sim is {ROOT}'s: the mutants would be made and judged there; "
                             f"run PYTHONPATH={other} python -m sim.cli mutate ... in {other}")
        modules = ns.module or present_modules()
        unknown = [m for m in modules if not module_files(m)]
        if unknown:
            raise ValueError(f"no protocol module {', '.join(unknown)} under slatedb/ (present: {', '.join(present_modules())})")
        scenarios = ns.scenarios.split(",") if ns.scenarios else None
        campaign = Campaign.make(scenarios, ns.budget_s, ns.seeds_per_scenario, tests=not ns.no_tests)
        equivalents = load_equivalents(ns.equivalents)
        sample = ns.sample or None
        if ns.list:
            mutants = [parse_id(t) for t in ns.mutant] if ns.mutant else \
                [m for mod in modules for m in select(mod, sample, ns.seed)[0]]
            for m in mutants:
                eq = equivalents.get(m.key)
                print(f"{m.id}  ({m.path}:{m.line} in {m.where})" + (f"  [equivalent: {eq.reason}]" if eq else ""))
                print(m.diff)
            return 0
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    log = None if ns.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    if log:
        log(f"campaign per mutant: {campaign.describe()}")
    try:
        report = run(modules, campaign, sample=sample, seed=ns.seed, jobs=ns.jobs, engine=ns.engine, master=ns.master,
                     equivalents=equivalents, mutant_ids=ns.mutant or (), cpu_s=ns.timeout_cpu_s, wall_s=ns.timeout_s,
                     log=log, full=ns.full_campaign, cache=None if ns.no_cache else BASELINE_CACHE)
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    flags = campaign.flags(ns.budget_s, ns.seeds_per_scenario)
    print(f"campaign per mutant: {campaign.describe()}; selection --sample {ns.sample} --seed {ns.seed}")
    print(format_report(report, flags))
    if ns.mutant:
        for r in report.rows:
            print(f"\n{r['mutant']}: {r['status']}" + (f" by {r['by']}" if r["by"] else ""))
            for res in r["results"]:
                if res.get("check"):
                    print(f"  {'ok  ' if res['ok'] else 'FAIL'} {res['check']}"
                          + (f": {res['violation'][:300]}" if not res["ok"] else ""))
    if ns.out:
        with open(ns.out, "w") as f:
            for r in report.rows:
                f.write(json.dumps({k: v for k, v in r.items() if k != "results"}) + "\n")
    return 1 if any(r["status"] == SURVIVED for r in report.rows) else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "judge":  # the old entry of the judge subprocess
        from sim.campaign.mutate_judge import judge_main

        sys.exit(judge_main(sys.argv[2], sys.argv[3]))
    sys.exit(main())
