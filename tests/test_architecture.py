"""The library's shape (issue 15, docs/architecture.md): no import cycles, no function-local
imports used to dodge one, no hand-written module over ~600 lines, one manifest entry point,
front-ends that share one portal and do not import each other.

The import graph is read from the source (module-level ``import`` / ``from ... import``
statements; an edge goes to the module named, and to ``module.name`` when that is a module).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Function-local imports of slatedb modules that are not cycle dodges, and why.
LOCAL_IMPORTS_ALLOWED = {
    "slatedb.cli": "the CLI imports the admin API per command (start-up time of `slatedb --help`)",
    "slatedb.objstore.url": "backends are imported when a URL names them (s3fs is optional)",
    "slatedb.objstore.base": "ObjectStore.open_url resolves through objstore.url, which imports base",
    "slatedb.objstore.memory": "MemoryStore.open_url resolves through objstore.url, which imports memory",
    "slatedb.spark": "the data source (slatedb.spark.source) imports pyspark, an optional extra: register() alone needs it",
}
GENERATED = ("slatedb/format/fb/",)
MAX_LINES = 600


def _modules(root: Path, package: str = "slatedb") -> dict[str, Path]:
    mods = {}
    for p in (root / package).rglob("*.py"):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = (module if is_package else module.rsplit(".", 1)[0]).split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        return [target] + [f"{target}.{a.name}" for a in node.names]
    return []


def import_graph(root: Path, package: str = "slatedb") -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """Module-level edges, and the function-local imports of package modules."""
    mods = _modules(root, package)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    local: list[tuple[str, int, str]] = []
    for m, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        for node in tree.body:
            graph[m].update(t for t in _imported(node, m, is_package) if t in mods and t != m)
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    for t in _imported(node, m, is_package)[:1]:
                        if t.split(".")[0] == package:
                            local.append((m, node.lineno, t))
    return graph, local


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_in_the_library() -> None:
    graph, _ = import_graph(ROOT)
    assert len(graph) > 80
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import x\n")
    (pkg / "sub" / "a.py").write_text("from pkg.b import y\nx = 1\n")
    (pkg / "b.py").write_text("from pkg.sub import a\ny = 2\n\ndef f():\n    from pkg import sub\n")
    graph, local = import_graph(tmp_path, "pkg")
    assert cycles(graph) == [["pkg.b", "pkg.sub", "pkg.sub.a"]]
    assert local == [("pkg.b", 5, "pkg")]


def test_no_function_local_imports_of_library_modules() -> None:
    _, local = import_graph(ROOT)
    offenders = [(m, line, t) for m, line, t in local
                 if m not in LOCAL_IMPORTS_ALLOWED and not m.startswith("slatedb.bench")
                 and not m.startswith("slatedb.format.fb")]
    assert offenders == []


def test_no_hand_written_module_over_600_lines() -> None:
    long = []
    for p in (ROOT / "slatedb").rglob("*.py"):
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith(GENERATED):
            continue
        n = len(p.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            long.append((rel, n))
    assert long == []


def test_one_manifest_entry_point_and_no_change_closures() -> None:
    from slatedb.manifest.store import ManifestStore

    assert not hasattr(ManifestStore, "update")
    graph, _ = import_graph(ROOT)
    writers = [m for m, path in _modules(ROOT).items() if "try_write(" in path.read_text(encoding="utf-8")]
    # .compactions (the compactor and its store) still writes full files; manifests only commit edits.
    assert sorted(writers) == ["slatedb.compactor.compactor", "slatedb.compactor.store", "slatedb.manifest.store"]


def test_front_ends_share_one_portal_and_do_not_import_each_other() -> None:
    graph, _ = import_graph(ROOT)
    assert "slatedb.aio" not in graph["slatedb.reader.aio"]
    assert "slatedb.db.sync" not in graph["slatedb.reader.sync"]
    for front in ("slatedb.db.sync", "slatedb.reader.sync"):
        assert "slatedb.api.portal" in graph[front] and "slatedb.api.sync_reads" in graph[front]
    for front in ("slatedb.aio", "slatedb.reader.aio"):
        assert "slatedb.api.portal" in graph[front] and "slatedb.api.async_reads" in graph[front]
    assert "slatedb.db.core" not in graph["slatedb.reader.core"]  # the read path is declared, not borrowed
    assert "slatedb.db.core" not in graph["slatedb.compactor.compactor"]


#: The simulator's rooms (issue 27, docs/architecture.md "The simulator") and the rooms each may
#: import: the world knows nothing of checks, scenarios or campaigns; checks read the world;
#: scenarios compose the world and checks; campaigns run scenarios; ``sim.cli`` sits on top.
SIM_ROOMS = {
    "sim.world": {"sim.world"},
    "sim.checks": {"sim.world", "sim.checks"},
    "sim.scenarios": {"sim.world", "sim.checks", "sim.scenarios"},
    "sim.campaign": {"sim.world", "sim.checks", "sim.scenarios", "sim.campaign"},
}
#: Outside the rooms, on top of them (they may import any room; no room imports them): the CLI,
#: and the differential campaign against the official engine (``./just diff``).
SIM_TOP = ("sim", "sim.cli", "sim.diff")


def _room(module: str) -> str | None:
    return next((r for r in SIM_ROOMS if module == r or module.startswith(r + ".")), None)


def sim_room_breaches(root: Path) -> list[str]:
    """Imports (module-level or function-local) that go against the rooms' direction, and
    simulator modules outside every room and :data:`SIM_TOP`."""
    mods = _modules(root, "sim")
    out = []
    for m, path in sorted(mods.items()):
        room = _room(m)
        if room is None:
            if not any(m == t or (t != "sim" and m.startswith(t + ".")) for t in SIM_TOP):
                out.append(f"{m}: not in a room")
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            for target in _imported(node, m, path.name == "__init__.py")[:1]:
                if target.split(".")[0] != "sim":
                    continue
                to = _room(target)
                if to is None or to not in SIM_ROOMS[room]:
                    out.append(f"{m}:{node.lineno} imports {target}")
    return out


def test_the_simulator_rooms_import_one_way() -> None:
    assert len(_modules(ROOT, "sim")) > 30
    assert sim_room_breaches(ROOT) == []


def test_the_room_check_finds_an_import_against_the_direction(tmp_path: Path) -> None:
    for room in ("world", "checks", "scenarios", "campaign"):
        (tmp_path / "sim" / room).mkdir(parents=True)
        (tmp_path / "sim" / room / "__init__.py").write_text("")
    (tmp_path / "sim" / "__init__.py").write_text("")
    (tmp_path / "sim" / "world" / "trace.py").write_text("def f():\n    from sim.checks import gc\n")
    (tmp_path / "sim" / "checks" / "gc.py").write_text("from ..world import trace\n")
    (tmp_path / "sim" / "stray.py").write_text("")
    assert sim_room_breaches(tmp_path) == ["sim.stray: not in a room", "sim.world.trace:2 imports sim.checks"]


def test_the_library_never_imports_the_simulator() -> None:
    for path in (ROOT / "slatedb").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "sim" for a in node.names), path
            elif isinstance(node, ast.ImportFrom) and not node.level:
                assert (node.module or "").split(".")[0] != "sim" or "bench" in path.parts, path
