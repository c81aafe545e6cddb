"""The campaign ledger: every campaign's summary in one table, and ``sim ledger``.

Every campaign (``sim dst``, ``sim sweep`` with either engine, ``sim hunt``) appends one row per
scenario it ran: when, the commit it ran (``-dirty`` when the work tree had changes), what
(``kind``, ``engine``, ``scenario``, ``faults``, bug switches), the seeds (ranges, count), the
failures (count, failing seeds, by invariant), the faults injected (total and by kind), virtual
and wall seconds. Locally the table is SQLite (the standard library's ``sqlite3``), by default
``.sim/ledger.sqlite`` under the current directory; the Spark engine appends the same row to a
Parquet table (``.sim/ledger.parquet``, a directory Spark appends part files to) through its own
session, as a cluster's driver would. ``sim ledger`` reads both and prints, per scenario,
commit and set of bug switches, the campaigns, seeds run, distinct seeds and failures.

Both live on one machine; machines come and go. The archive, ``docs/ledger/campaigns.jsonl``
(:data:`ARCHIVE`, tracked in git: one JSON object a campaign, the same columns), carries them
across: ``sim ledger --archive`` appends the local rows the archive does not hold yet (a
campaign is its ``recorded_utc``, ``commit_id``, ``kind``, ``scenario``, ``bugs`` and
``seed_ranges``), and ``sim ledger`` reads the archive with the local tables, each campaign once.

``SIM_LEDGER`` names another SQLite file (``off``: record nothing), ``SIM_LEDGER_PARQUET``
another Parquet table, ``SIM_LEDGER_ARCHIVE`` another archive. Campaigns the test suite runs (``PYTEST_CURRENT_TEST`` set) are not
recorded unless ``SIM_LEDGER`` is set explicitly.

The wall-clock timestamp is read through the production runtime, the one module that owns the
real clock; it never reaches a run.
"""

from __future__ import annotations

import datetime
import json
import os
import sqlite3
import subprocess
from collections import defaultdict
from typing import Any, Iterable, Sequence

from slatedb.runtime.production import ProductionRuntime

_WALL = ProductionRuntime("sim-ledger")

DEFAULT_SQLITE = os.path.join(".sim", "ledger.sqlite")
DEFAULT_PARQUET = os.path.join(".sim", "ledger.parquet")
#: The archive in the repository (relative to the checkout's root).
ARCHIVE = os.path.join("docs", "ledger", "campaigns.jsonl")
#: The checkout the simulator runs from (``sim/campaign/ledger.py`` three levels down).
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The columns, in order (SQLite table ``campaigns`` and the Parquet schema). JSON text for the
#: structured ones (``seed_ranges``, ``failing_seeds``, ``by_invariant``, ``faults_by_kind``,
#: ``probe_hits``: per coverage probe, the seeds of the campaign that hit it).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("recorded_utc", "TEXT"), ("commit_id", "TEXT"), ("kind", "TEXT"), ("engine", "TEXT"), ("scenario", "TEXT"),
    ("faults_mode", "TEXT"), ("bugs", "TEXT"), ("seed_ranges", "TEXT"), ("seeds", "INTEGER"),
    ("failures", "INTEGER"), ("failing_seeds", "TEXT"), ("by_invariant", "TEXT"), ("faults", "INTEGER"),
    ("faults_by_kind", "TEXT"), ("virtual_s", "REAL"), ("wall_s", "REAL"), ("core_s", "REAL"),
    ("probe_hits", "TEXT"),
)
NAMES = tuple(name for name, _ in COLUMNS)


def sqlite_path() -> str | None:
    """Where local campaigns are recorded (None: nowhere)."""
    env = os.environ.get("SIM_LEDGER")
    if env:
        return None if env.lower() in ("off", "none", "0") else env
    if os.environ.get("PYTEST_CURRENT_TEST"):
        return None
    return DEFAULT_SQLITE


def archive_path() -> str | None:
    """The archive ``sim ledger`` reads and ``--archive`` appends to (None: none):
    ``SIM_LEDGER_ARCHIVE``, else :data:`ARCHIVE` in the simulator's checkout, wherever ``sim``
    runs from (not under the test suite)."""
    env = os.environ.get("SIM_LEDGER_ARCHIVE")
    if env:
        return None if env.lower() in ("off", "none", "0") else env
    if os.environ.get("PYTEST_CURRENT_TEST"):
        return None
    path = os.path.join(_ROOT, ARCHIVE)
    rel = os.path.relpath(path)  # as printed: docs/ledger/campaigns.jsonl from the root, else in full
    return rel if not rel.startswith(os.pardir) else path


def parquet_path() -> str | None:
    """Where Spark campaigns are recorded (None: nowhere)."""
    if sqlite_path() is None:
        return None
    return os.environ.get("SIM_LEDGER_PARQUET") or DEFAULT_PARQUET


def current_commit(cwd: str | None = None) -> str:
    """The commit of the code that runs: ``git rev-parse --short=12 HEAD`` in the simulator's
    checkout (``-dirty`` if tracked files changed), or ``unknown`` outside a git checkout."""
    cwd = cwd or _ROOT
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def seed_ranges(seeds: Iterable[int]) -> list[list[int]]:
    """Sorted seeds as inclusive ``[lo, hi]`` ranges."""
    out: list[list[int]] = []
    for s in sorted(set(int(x) for x in seeds)):
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def _now_utc() -> str:
    ms = _WALL.now_ms()
    return datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def entry(*, kind: str, engine: str, scenario: str, faults_mode: str, bugs: Sequence[str], seeds: Iterable[int],
          failing_seeds: Iterable[int], by_invariant: dict, faults_by_kind: dict, virtual_s: float, wall_s: float,
          core_s: float | None = None, commit: str | None = None, recorded_utc: str | None = None,
          probe_hits: dict | None = None) -> dict:
    """One ledger row. ``wall_s``: the campaign's wall time (shared by the scenarios of one
    ``sim dst``); ``core_s``: the seeds' own wall times added up (busy core-seconds)."""
    seeds = list(seeds)
    failing = sorted(int(s) for s in failing_seeds)
    faults = {str(k): int(v) for k, v in sorted(faults_by_kind.items())}
    return {
        "recorded_utc": recorded_utc or _now_utc(), "commit_id": commit or current_commit(), "kind": kind,
        "engine": engine, "scenario": scenario, "faults_mode": faults_mode, "bugs": ",".join(sorted(bugs)),
        "seed_ranges": json.dumps(seed_ranges(seeds)), "seeds": len(seeds), "failures": len(failing),
        "failing_seeds": json.dumps(failing), "by_invariant": json.dumps(dict(by_invariant), sort_keys=True),
        "faults": sum(faults.values()), "faults_by_kind": json.dumps(faults, sort_keys=True),
        "virtual_s": float(virtual_s), "wall_s": float(wall_s),
        "core_s": float(wall_s if core_s is None else core_s),
        "probe_hits": json.dumps({str(k): int(v) for k, v in sorted((probe_hits or {}).items()) if v}, sort_keys=True),
    }


def from_rows(rows: Sequence[dict], scenario: Any, *, kind: str, engine: str, wall_s: float,
              commit: str | None = None) -> dict:
    """The row of one scenario's part of a campaign: its result rows (:func:`sim.campaign.sweep.run_seed`)
    of a :class:`sim.campaign.sweep.Scenario`. ``commit``: the commit the campaign started on
    (:func:`current_commit` read before its first seed; the checkout may move while it runs)."""
    from collections import Counter

    from sim.campaign.sweep import invariant_of

    by_invariant: Counter = Counter()
    faults: Counter = Counter()
    probe_seeds: Counter = Counter()
    for r in rows:
        faults.update(r["faults"])
        probe_seeds.update({name for name, n in (r.get("probes") or {}).items() if n})
        if not r["ok"]:
            by_invariant.update(set(r.get("invariants") or [invariant_of(v) for v in r["violations"]]) or {"?"})
    return entry(kind=kind, engine=engine, scenario=scenario.workload, faults_mode=scenario.faults,
                 bugs=scenario.bugs, seeds=[r["seed"] for r in rows], failing_seeds=[r["seed"] for r in rows if not r["ok"]],
                 by_invariant=dict(by_invariant), faults_by_kind=dict(faults),
                 virtual_s=sum(r["virtual_s"] for r in rows), wall_s=wall_s, core_s=sum(r["wall_s"] for r in rows),
                 probe_hits=dict(probe_seeds), commit=commit)


def from_report(report: Any, scenario: Any, kind: str, commit: str | None = None) -> dict:
    """The row of a sweep (:class:`sim.campaign.sweep.SweepReport` of a :class:`sim.campaign.sweep.Scenario`)."""
    return from_rows(report.rows, scenario, kind=kind, engine=report.engine, wall_s=report.wall_s, commit=commit)


def from_hunt(result: Any) -> dict:
    """The row of one ``sim hunt`` entry (:class:`sim.campaign.hunt.HuntResult`): seeds 0..seeds_run-1."""
    failing = list(result.failing_seeds)
    return entry(kind="hunt", engine="local", scenario=result.workload, faults_mode="swarm", bugs=[result.bug],
                 seeds=range(result.seeds_run), failing_seeds=failing,
                 by_invariant={result.invariant: len(failing)} if failing else {},
                 faults_by_kind=dict(result.faults),
                 virtual_s=float(result.virtual_s), wall_s=float(result.total_wall_s or result.wall_s),
                 probe_hits=dict(getattr(result, "probe_seeds", None) or {}))


# --- SQLite ------------------------------------------------------------------------------------


class LedgerError(ValueError):
    """The local ledger cannot be opened or written (its directory cannot be made, the file is
    not an SQLite database, ...): one line naming the file."""


def _connect(path: str) -> sqlite3.Connection:
    try:
        return _open_table(path)
    except (OSError, sqlite3.Error) as e:
        raise LedgerError(f"the ledger {path}: {getattr(e, 'strerror', None) or e}") from None


def _open_table(path: str) -> sqlite3.Connection:
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    con = sqlite3.connect(path, timeout=30)
    cols = ", ".join(f"{name} {typ} NOT NULL" for name, typ in COLUMNS)
    con.execute(f"CREATE TABLE IF NOT EXISTS campaigns (id INTEGER PRIMARY KEY AUTOINCREMENT, {cols})")
    have = {r[1] for r in con.execute("PRAGMA table_info(campaigns)")}
    for name, typ in COLUMNS:
        if name not in have:  # a ledger written before the column existed
            default = "'{}'" if typ == "TEXT" else "0"
            con.execute(f"ALTER TABLE campaigns ADD COLUMN {name} {typ} NOT NULL DEFAULT {default}")
    return con


def append_sqlite(path: str, row: dict) -> None:
    con = _connect(path)
    try:
        with con:
            con.execute(f"INSERT INTO campaigns ({', '.join(NAMES)}) VALUES ({', '.join('?' * len(NAMES))})",
                        [row[n] for n in NAMES])
    except sqlite3.Error as e:
        raise LedgerError(f"the ledger {path}: {e}") from None
    finally:
        con.close()


def read_sqlite(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    con = _connect(path)
    try:
        cur = con.execute(f"SELECT {', '.join(NAMES)} FROM campaigns ORDER BY id")
        return [dict(zip(NAMES, r)) for r in cur.fetchall()]
    finally:
        con.close()


def record(row: dict) -> str | None:
    """Append a local campaign's row; the file it went to (None: not recorded).
    :class:`LedgerError` when the ledger cannot be written."""
    path = sqlite_path()
    if path is None:
        return None
    append_sqlite(path, row)
    return path


def check() -> str | None:
    """Open the local ledger (made if missing) as :func:`record` will, before a campaign spends
    its time: the file (None: nothing is recorded); :class:`LedgerError` when it is unusable."""
    path = sqlite_path()
    if path is not None:
        _connect(path).close()
    return path


# --- Parquet (the Spark engine) ----------------------------------------------------------------


def spark_schema() -> Any:
    from pyspark.sql import types as T

    kinds = {"TEXT": T.StringType(), "INTEGER": T.LongType(), "REAL": T.DoubleType()}
    return T.StructType([T.StructField(name, kinds[typ], False) for name, typ in COLUMNS])


def append_parquet(spark: Any, path: str, row: dict) -> None:
    """Append ``row`` to the Parquet table at ``path`` through ``spark`` (one part file)."""
    spark.createDataFrame([tuple(row[n] for n in NAMES)], spark_schema()).coalesce(1) \
        .write.mode("append").parquet(os.path.abspath(path))


def read_parquet(path: str) -> list[dict]:
    if not os.path.isdir(path) or not any(f.endswith(".parquet") for f in os.listdir(path)):
        return []
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return [{n: r.get(n, "{}") for n in NAMES} for r in table.to_pylist()]


# --- sim ledger --------------------------------------------------------------------------------


def read_all(sqlite: str | None, parquet: str | None, archive: str | None = None) -> list[dict]:
    """Every campaign of the local tables and the archive, each once, oldest first."""
    rows = read_archive(archive) if archive else []
    rows += read_sqlite(sqlite) if sqlite else []
    rows += read_parquet(parquet) if parquet else []
    seen: set[tuple] = set()
    unique = []
    for r in rows:
        if campaign_key(r) not in seen:
            seen.add(campaign_key(r))
            unique.append(r)
    return sorted(unique, key=lambda r: r["recorded_utc"])


# --- the archive (docs/ledger/campaigns.jsonl) ---------------------------------------------------


def campaign_key(row: dict) -> tuple:
    """What makes a campaign the same one in two tables."""
    return (row["recorded_utc"], row["commit_id"], row["kind"], row["scenario"], row["bugs"],
            json.dumps(json.loads(row["seed_ranges"])))


def read_archive(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for i, r in enumerate(rows):
        missing = [n for n in NAMES if n not in r]
        if missing:
            raise ValueError(f"{path}: campaign {i + 1} lacks {', '.join(missing)}")
    return rows


def archive(rows: Sequence[dict], path: str) -> int:
    """Append to the archive at ``path`` the campaigns of ``rows`` it does not hold yet, oldest
    first; how many were appended."""
    held = {campaign_key(r) for r in read_archive(path)}
    new = [r for r in sorted(rows, key=lambda r: r["recorded_utc"]) if campaign_key(r) not in held]
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        for r in new:
            f.write(json.dumps({n: r[n] for n in NAMES}, sort_keys=False) + "\n")
    return len(new)


def _count(ranges: Iterable[Sequence[int]]) -> int:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return sum(hi - lo + 1 for lo, hi in merged)


def cumulative(rows: Sequence[dict]) -> list[dict]:
    """Per (scenario, commit, bug switches): campaigns, seeds run, distinct seeds, failures,
    failing seeds by invariant, faults, engines, first and last campaign."""
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["scenario"], r["commit_id"], r["bugs"])].append(r)
    out = []
    for (scenario, commit, bugs), rs in groups.items():
        by_inv: dict[str, int] = defaultdict(int)
        probe_hits: dict[str, int] = defaultdict(int)
        for r in rs:
            for k, v in json.loads(r["by_invariant"]).items():
                by_inv[k] += int(v)
            for k, v in json.loads(r.get("probe_hits") or "{}").items():
                probe_hits[k] += int(v)
        out.append({
            "scenario": scenario, "commit": commit, "bugs": bugs or "-", "campaigns": len(rs),
            "seeds": sum(int(r["seeds"]) for r in rs),
            "distinct": _count(rg for r in rs for rg in json.loads(r["seed_ranges"])),
            "failures": sum(int(r["failures"]) for r in rs), "by_invariant": dict(by_inv),
            "faults": sum(int(r["faults"]) for r in rs), "kinds": sorted({r["kind"] for r in rs}),
            "probe_hits": dict(probe_hits),
            "engines": sorted({r["engine"] for r in rs}), "first": rs[0]["recorded_utc"], "last": rs[-1]["recorded_utc"],
        })
    out.sort(key=lambda g: (g["scenario"], g["bugs"] != "-", g["bugs"], g["last"]))
    return out


def format_cumulative(groups: Sequence[dict]) -> str:
    head = (f"{'scenario':<10} {'commit':<18} {'bugs':<24} {'campaigns':>9} {'seeds':>8} {'distinct':>8} "
            f"{'failures':>8}  {'faults':>8}  {'probes':>6}  {'kinds':<16} {'last (UTC)':<20} by invariant")
    lines = [head]
    for g in groups:
        inv = ", ".join(f"{k} {v}" for k, v in sorted(g["by_invariant"].items(), key=lambda kv: -kv[1])) or "-"
        kinds = ",".join(g["kinds"]) + ("" if g["engines"] == ["local"] else f" ({','.join(g['engines'])})")
        lines.append(f"{g['scenario']:<10} {g['commit']:<18} {g['bugs'][:24]:<24} {g['campaigns']:>9} {g['seeds']:>8} "
                     f"{g['distinct']:>8} {g['failures']:>8}  {g['faults']:>8}  {len(g.get('probe_hits') or {}):>6}  "
                     f"{kinds:<16} {g['last']:<20} {inv}")
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for g in groups:
        if g["bugs"] == "-":
            totals[g["scenario"]][0] += g["seeds"]
            totals[g["scenario"]][1] += g["failures"]
    if totals:
        lines.append("")
        lines.append("clean campaigns (no bug switched on), all commits: "
                     + "; ".join(f"{s} {n} seeds, {f} failing" for s, (n, f) in sorted(totals.items())))
    hits: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for g in groups:
        for name, n in (g.get("probe_hits") or {}).items():
            hits[name][g["scenario"]] += n
    if hits:
        lines.append("probe hits (seeds hitting each probe, all campaigns): " + "; ".join(
            f"{name} " + ", ".join(f"{s} {n}" for s, n in sorted(by.items())) for name, by in sorted(hits.items())))
    return "\n".join(lines)
