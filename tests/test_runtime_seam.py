"""Nothing outside the production runtime reads the wall clock, OS entropy, or mints ids.

An AST scan of ``slatedb/`` and ``sim/`` flags calls such as ``time.time()``, ``os.urandom()``,
``uuid4()``, ``ULID()`` and any use of the global ``random`` functions. Only the runtime modules
may construct a ``random.Random``. In ``slatedb/`` (protocol code) even ``trio.sleep`` and
``trio.current_time`` are off limits: sleeping goes through the runtime so each simulated
process keeps its own clock.
"""

from __future__ import annotations

import ast
import pathlib

import trio

from sim.world.runtime import SimRuntime, run_deterministic
from sim.world.trace import Trace
from slatedb.runtime.production import ProductionRuntime

ROOT = pathlib.Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns", "time.perf_counter",
    "time.perf_counter_ns", "time.localtime", "time.gmtime", "datetime.now", "datetime.utcnow",
    "datetime.today", "date.today", "datetime.datetime.now", "datetime.datetime.utcnow",
    "datetime.date.today", "os.urandom", "os.getrandom", "uuid.uuid1", "uuid.uuid4",
    "ulid.ULID", "secrets.token_bytes", "secrets.token_hex", "secrets.randbits", "secrets.choice",
}
FORBIDDEN_IN_PROTOCOL = {"trio.sleep", "trio.sleep_until", "trio.current_time"}
PRODUCTION_RUNTIME = "slatedb/runtime/production.py"
#: The simulation runtime and its choices (sim/world/choices.py: every stream a world draws from) may
#: build seeded ``random.Random`` streams, nothing else.
SIM_RUNTIME = ("sim/world/runtime.py", "sim/world/choices.py")
#: Benchmarks time themselves with the wall clock; they are tools, not protocol code.
EXEMPT_PREFIXES = ("slatedb/bench/",)


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def violations_in(source: str, rel: str) -> list[str]:
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name] = a.name
    found = []
    if rel == PRODUCTION_RUNTIME:
        return found  # the one module that owns the real clock, OS entropy and id minting
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func, aliases)
        if name is None:
            continue
        bad = name in FORBIDDEN
        if name.startswith("random.") and not (rel in SIM_RUNTIME and name == "random.Random"):
            bad = True  # the global random functions, and unseeded generators
        if rel.startswith("slatedb/") and not rel.startswith("slatedb/runtime/") and name in FORBIDDEN_IN_PROTOCOL:
            bad = True
        if bad:
            found.append(f"{rel}:{node.lineno}: {name}()")
    return found


def test_no_hidden_clock_entropy_or_ids_in_the_tree():
    found: list[str] = []
    for base in ("slatedb", "sim"):
        for path in sorted((ROOT / base).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(EXEMPT_PREFIXES) or "/fb/" in rel:
                continue
            found += violations_in(path.read_text(), rel)
    assert not found, "nondeterminism outside the runtime seam:\n" + "\n".join(found)


def test_the_scan_catches_each_kind_of_violation():
    snippet = """
import time, os, uuid, random
from ulid import ULID
from uuid import uuid4 as fresh
import trio
def f():
    time.time(); os.urandom(4); uuid.uuid4(); fresh(); ULID(); random.random()
    random.Random(); trio.sleep(1); trio.current_time()
"""
    found = violations_in(snippet, "slatedb/wal/writer.py")
    names = sorted(v.split(": ")[1] for v in found)
    assert names == sorted([
        "time.time()", "os.urandom()", "uuid.uuid4()", "uuid.uuid4()", "ulid.ULID()",
        "random.random()", "random.Random()", "trio.sleep()", "trio.current_time()",
    ])
    # The simulator may use trio's (virtual) clock, but not the global random functions.
    sim_found = violations_in(snippet, "sim/world.py")
    assert "trio.sleep()" not in " ".join(sim_found) and "random.random()" in " ".join(sim_found)


def test_production_runtime_gives_real_time_and_fresh_ids():
    rt = ProductionRuntime()
    assert rt.now_ms() > 1_700_000_000_000
    assert rt.new_ulid() != rt.new_ulid()
    assert rt.new_uuid().version == 4
    a = rt.monotonic_s()
    assert rt.monotonic_s() >= a


def test_production_clock_shares_one_int_within_a_millisecond(monkeypatch):
    """Rows stamped in the same millisecond hold one int object (memory, and the frees of a
    flushed memtable); a new millisecond gives the new value."""
    import slatedb.runtime.production as production

    rt = ProductionRuntime()
    ns = [1_800_000_000_123_456_789]
    monkeypatch.setattr(production.time, "time_ns", lambda: ns[0])
    a, b = rt.now_ms(), rt.now_ms()
    assert a == 1_800_000_000_123 and a is b
    ns[0] += 1_000_000
    c = rt.now_ms()
    assert c == a + 1 and rt.now_ms() is c


def test_sim_runtime_clock_offset_drift_and_ids():
    async def main(seed):
        trace = Trace(trio.current_time)
        fast = SimRuntime("fast", seed, trace, drift_ppm=50_000, offset_ms=1000)
        slow = SimRuntime("slow", seed, trace)
        t0_fast, t0_slow = fast.now_ms(), slow.now_ms()
        assert t0_fast - t0_slow == 1000
        await slow.sleep(10.0)
        assert abs(slow.monotonic_s() - 10.0) < 1e-9
        assert abs(fast.monotonic_s() - 10.5) < 1e-6  # runs 5% fast
        await fast.sleep(1.05)  # 1.05 of its seconds = 1.0 world second
        assert abs(slow.monotonic_s() - 11.0) < 1e-6
        slow.jump_wall_clock(-60_000)
        assert slow.now_ms() < t0_slow  # wall clock may go backwards
        assert slow.monotonic_s() > 10  # monotonic never does
        u = fast.new_ulid()
        assert abs(u.milliseconds - fast.now_ms()) <= 1
        return [str(fast.new_ulid()), str(fast.new_uuid()), str(slow.new_uuid())]

    assert run_deterministic(main, 1, seed=1) == run_deterministic(main, 1, seed=1)
    assert run_deterministic(main, 1, seed=1) != run_deterministic(main, 2, seed=2)
