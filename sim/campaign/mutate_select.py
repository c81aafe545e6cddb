"""Which checks can judge a mutant, from the baseline's per-check line coverage (``sim mutate``).

The baseline (the unmutated tree) runs every check once under coverage.py, one *context* per
scenario seed and per test (:mod:`sim.campaign.mutate_judge`). A mutant changes the code of one
statement. Every check is deterministic, so a check whose baseline run never executed that
statement runs exactly as on the unmutated tree under the mutant too: it cannot tell them apart
and is not run. The mutant's campaign is the checks that executed the statement, cheapest first:

- a statement inside a function body is judged by the seeds and tests whose context covers one
  of its lines (the whole statement's lines: the line coverage.py records for a statement over
  several lines is not always the first);
- a statement that runs at import time (module or class level, a decorator, a default value,
  anything the baseline saw run while the protocol modules were imported, or while pytest
  collected) changes every check that imports it: it is judged by the full campaign (**wide**);
- tests that start a subprocess (coverage does not follow it) are always in the campaign;
- a mutant whose statement no check executed (and whose module's tests start no subprocess) gets
  an empty campaign: it is reported **survived**, never killed (no check can see it: the test it
  needs does not exist yet).

Every selected check passed on the baseline; the checks are ordered by their baseline cost,
cheapest first, so the likeliest cheap killers run before an expensive one, and a mutant stops at
its first failure; each check has its own CPU box (:func:`check_box_s`), so an endless loop is a
timeout within seconds of the check that meets it. (The order and the boxes follow the baseline's
measured costs: a kept baseline gives the same order again; which check is named as the killer may
differ between machines, whether the mutant is detected does not.) ``sim mutate --full-campaign`` judges with every check instead (the old way).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import attrs

from sim.campaign.mutate_judge import IMPORT_CONTEXT, seed_context, test_context

_COMPOUND = {"if_stmt", "while_stmt", "for_stmt", "with_stmt", "try_stmt", "async_stmt", "funcdef", "classdef",
             "decorated", "match_stmt"}
_WHOLE = {"simple_stmt", "except_clause", "decorator"}


@attrs.frozen
class Span:
    """The lines of the statement a mutation changes; ``runtime``: inside a function body (runs
    when called), otherwise at import time."""

    first: int
    last: int
    runtime: bool


def statement_span(tree: Any, line: int, col: int) -> Span:
    """The span of the statement holding the source position ``(line, col)`` of a parso tree."""
    leaf = tree.get_leaf_for_position((line, col), include_prefixes=True)
    node, child = leaf, leaf
    first, last = line, line
    while node is not None:
        if node.type in _WHOLE:
            first, last = node.start_pos[0], _last_line(node)
            break
        if node.type in _COMPOUND:
            # the part of the header holding the mutation (the condition, the iterable, the
            # except clause ...), and the keyword's line
            first, last = min(node.start_pos[0], child.start_pos[0]), _last_line(child)
            break
        child, node = node, node.parent
    return Span(first, max(first, last), _in_function_body(leaf))


def _last_line(node: Any) -> int:
    """The last line holding code of ``node`` (parso ends a statement after its newline)."""
    line, col = node.end_pos
    return line - 1 if col == 0 and line > node.start_pos[0] else line


def _in_function_body(leaf: Any) -> bool:
    node, child = leaf.parent, leaf
    while node is not None:
        if node.type == "funcdef" and child is node.children[-1]:  # the suite, not the parameters
            return True
        if node.type == "lambdef" and child is node.children[-1]:
            return True
        child, node = node, node.parent
    return False


class CoverIndex:
    """Baseline coverage inverted: path -> line -> contexts that executed it."""

    def __init__(self, by_context: dict[str, dict[str, list[int]]]) -> None:
        self.by_line: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
        for ctx, files in by_context.items():
            for path, lines in files.items():
                for ln in lines:
                    self.by_line[path][ln].add(ctx)

    def contexts(self, path: str, first: int, last: int) -> set[str]:
        lines = self.by_line.get(path, {})
        out: set[str] = set()
        for ln in range(first, last + 1):
            out |= lines.get(ln, set())
        return out


@attrs.frozen
class Plan:
    checks: tuple[dict, ...]
    cost_s: float  # baseline seconds of the selected checks
    why: str


def _tests_checks(nodes: Iterable[str], tests: dict[str, dict]) -> list[tuple[float, dict]]:
    """One pytest check per test file, its tests cheapest first; (cost, check)."""
    by_file: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        by_file[n.split("::", 1)[0]].append(n)
    out = []
    for path, ns in sorted(by_file.items()):
        ns.sort(key=lambda n: (tests[n]["s"], n))
        out.append((sum(tests[n]["s"] for n in ns), {"kind": "tests", "paths": [path], "nodes": ns}))
    return out


def plan(path: str, span: Span, index: CoverIndex, seeds: dict[str, tuple[dict, float]],
         tests: dict[str, dict]) -> Plan:
    """The campaign of a mutant of ``path`` at ``span``. ``seeds``: context -> (check, baseline
    cost) of the seeds that passed on the baseline; ``tests``: nodeid -> baseline record
    (``s``, ``subprocess``) of the module's tests that passed on the baseline."""
    contexts = index.contexts(path, span.first, span.last)
    narrow = {c for c in contexts if c.startswith(("seed::", "test::"))}
    wide = not span.runtime or bool(contexts - narrow)
    if wide:
        chosen_seeds = list(seeds)
        chosen_tests = list(tests)
        why = ("import-time statement" if not span.runtime else
               f"runs at import or collection ({', '.join(sorted(contexts - narrow))[:80]})") + ": every check"
    else:
        chosen_seeds = [c for c in seeds if c in narrow]
        chosen_tests = [n for n in tests if test_context(n) in narrow or tests[n].get("subprocess")]
        covering = sum(1 for n in chosen_tests if test_context(n) in narrow)
        why = (f"lines {span.first}-{span.last} executed by {len(chosen_seeds)} seed(s) and {covering} test(s)"
               if chosen_seeds or covering else f"no baseline check executes lines {span.first}-{span.last}")
        if len(chosen_tests) > covering:
            why += f" (+{len(chosen_tests) - covering} test(s) that start a subprocess)"
    ranked = [(seeds[c][1], seeds[c][0]) for c in chosen_seeds] + _tests_checks(chosen_tests, tests)
    ranked.sort(key=lambda t: (t[0], _label(t[1])))
    return Plan(tuple({**c, "box_s": check_box_s(cost)} for cost, c in ranked), sum(c for c, _ in ranked), why)


def check_box_s(cost_s: float) -> float:
    """One check's CPU box: 10 s plus 5 times its baseline cost (measured under coverage, itself
    about twice the plain cost). A mutant that outruns it is a **timeout** (an endless loop, or a
    slowdown by an order of magnitude), without spending the whole campaign's box on it."""
    return round(10.0 + 5.0 * cost_s, 1)


def _label(check: dict) -> str:
    return f"{check['scenario']} {check['seed']:06d}" if check["kind"] == "seed" else " ".join(check["paths"])


__all__ = ["IMPORT_CONTEXT", "CoverIndex", "Plan", "Span", "plan", "seed_context", "statement_span", "test_context"]
