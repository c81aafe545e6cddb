"""``slatedb check`` after a test: every database a test left under a directory must be healthy
(issue 26 item 2: interop, Spark and SIGKILL tests compare rows; this compares structure)."""

from __future__ import annotations

from pathlib import Path

import slatedb


def databases_under(root: Path) -> list[Path]:
    """Every directory under ``root`` holding ``manifest/*.manifest`` (a database root)."""
    if not root.exists():
        return []
    return sorted(p.parent.parent for p in root.rglob("manifest/*.manifest")
                  if p.parent.name == "manifest" and p.name.endswith(".manifest"))


def check_databases_under(root: Path, *, deep: bool = True, allow: frozenset[str] = frozenset()) -> list[str]:
    """The findings (one line each, prefixed by the database) of every database under ``root``,
    leaving out invariants in ``allow``."""
    out = []
    for db in dict.fromkeys(databases_under(root)):
        report = slatedb.check(f"file://{db}", deep=deep)
        out += [f"{db}: {f.line()}" for f in report.findings if f.invariant not in allow]
    return out


def assert_databases_healthy(root: Path, *, deep: bool = True, allow: frozenset[str] = frozenset()) -> int:
    """Assert that every database under ``root`` is healthy; returns how many were checked."""
    findings = check_databases_under(root, deep=deep, allow=allow)
    assert not findings, "slatedb check found:\n" + "\n".join(findings)
    return len(databases_under(root))
