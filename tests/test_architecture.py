"""The library's shape (issue 15, issue 23 item 7, docs/architecture.md): no import cycles
(function-local imports count), no function-local imports used to dodge one, no hand-written
module over ~600 lines, one manifest entry point, front-ends that share one portal and do not
import each other, and no engine that imports the writer (``slatedb.db``).

The import graph is read from the source (``import`` / ``from ... import`` statements; an edge
goes to the module named, to ``module.name`` when that is a module, and to every package above
the module named that the importer is not inside of: importing ``a.b.c`` runs ``a/b/__init__.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Function-local imports of slatedb modules that are not cycle dodges, and why.
LOCAL_IMPORTS_ALLOWED = {
    "slatedb.cli": "the CLI imports the admin API per command (start-up time of `slatedb --help`)",
    "slatedb.objstore.url": "backends are imported when a URL names them (s3fs is optional)",
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


def _targets(imported: list[str], importer: str, mods: dict[str, Path]) -> set[str]:
    """The modules an import statement runs: those named, and the packages above them that
    ``importer`` is not inside of (their ``__init__`` runs first)."""
    out = set()
    for t in imported:
        if t not in mods:
            continue
        out.add(t)
        parts = t.split(".")
        for i in range(2, len(parts)):
            pkg = ".".join(parts[:i])
            if pkg in mods and importer != pkg and not importer.startswith(pkg + "."):
                out.add(pkg)
    out.discard(importer)
    return out


def import_graph(
    root: Path, package: str = "slatedb", *, with_local: bool = False
) -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """Module-level edges (and, ``with_local``, those of function-local imports too), and the
    function-local imports of package modules."""
    mods = _modules(root, package)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    local: list[tuple[str, int, str]] = []
    for m, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        for node in tree.body:
            graph[m] |= _targets(_imported(node, m, is_package), m, mods)
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    imported = _imported(node, m, is_package)
                    for t in imported[:1]:
                        if t.split(".")[0] == package:
                            local.append((m, node.lineno, t))
                    if with_local:
                        graph[m] |= _targets(imported, m, mods)
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
    """None at all: function-local imports count, and no cycle is allowed for any reason."""
    graph, _ = import_graph(ROOT, with_local=True)
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


def test_the_cycle_check_counts_packages_above_and_local_imports(tmp_path: Path) -> None:
    """``from pkg.sub.a import x`` runs ``pkg/sub/__init__.py``: a cycle through it is a cycle
    (``pkg.sub`` imports ``c``, which imports ``pkg.sub.a``); so is one closed by a
    function-local import (``d`` -> ``e`` at module level, ``e`` -> ``d`` inside a function)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.c import z\n")
    (pkg / "sub" / "a.py").write_text("x = 1\n")
    (pkg / "c.py").write_text("from pkg.sub.a import x\nz = 3\n")
    (pkg / "d.py").write_text("from pkg import e\n")
    (pkg / "e.py").write_text("def f():\n    from pkg import d\n")
    graph, _ = import_graph(tmp_path, "pkg")
    assert cycles(graph) == [["pkg.c", "pkg.sub"]]
    graph, _ = import_graph(tmp_path, "pkg", with_local=True)
    assert cycles(graph) == [["pkg.c", "pkg.sub"], ["pkg.d", "pkg.e"]]


#: The modules that may import the writer (``slatedb.db``): the front-ends over it (those ending
#: in a dot: the package and every module in it).
WRITER_USERS = ("slatedb", "slatedb.__main__", "slatedb.aio", "slatedb.admin", "slatedb.cli", "slatedb.uniffi", "slatedb.uniffi.",
                "slatedb.bench.")
#: Engines that must not: each is named so that the check cannot pass by missing one.
ENGINES = ("slatedb.lsm", "slatedb.reader", "slatedb.compactor", "slatedb.gc", "slatedb.projection",
           "slatedb.clone", "slatedb.destroy", "slatedb.checkpoint", "slatedb.manifest", "slatedb.wal",
           "slatedb.spark", "slatedb.api")


def importers_of_the_writer(graph: dict[str, set[str]]) -> list[str]:
    """Modules outside ``slatedb.db`` and the front-ends that reach ``slatedb.db``, directly or
    through others."""
    def writer(m: str) -> bool:
        return m == "slatedb.db" or m.startswith("slatedb.db.")

    bad = []
    for m in sorted(graph):
        if writer(m) or m in WRITER_USERS or m.startswith(tuple(u for u in WRITER_USERS if u.endswith("."))):
            continue
        seen, todo = set(), [m]
        while todo:
            for t in graph[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        if any(writer(t) for t in seen):
            bad.append(m)
    return bad


def test_no_engine_imports_the_writer() -> None:
    """Issue 23 item 7: the read-path pieces every engine uses (``slatedb.lsm``) live below the
    writer; compactor, GC, reader, projection, clone, destroy ... never import ``slatedb.db``."""
    graph, _ = import_graph(ROOT, with_local=True)
    for engine in ENGINES:
        assert engine in graph, engine
    assert importers_of_the_writer(graph) == []


def test_the_writer_check_finds_an_engine_importing_it() -> None:
    graph, _ = import_graph(ROOT, with_local=True)
    graph = {m: set(ts) for m, ts in graph.items()}
    graph["slatedb.lsm.view"].add("slatedb.db.common")
    bad = importers_of_the_writer(graph)
    assert "slatedb.lsm.view" in bad and "slatedb.compactor.executor" in bad and "slatedb.reader.core" in bad


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
#: Outside the rooms, on top of them (they may import any room; no room imports them): the CLI
#: (and ``python -m sim``), and the differential campaign against the official engine (``./just diff``).
SIM_TOP = ("sim", "sim.__main__", "sim.cli", "sim.diff")


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
