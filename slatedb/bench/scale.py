"""The scale curve of the Db benchmark: ``python -m slatedb.bench.db --scale`` (``./just bench --scale``).

For each size (``--scale-sizes``, default 100k, 1M, 10M) and each engine (``--scale-engines``,
default all six), a fresh child process (``db_workload_scale.py``) loads N keys in write batches
of 100, closes, reopens, and measures hit gets, miss gets and a full scan in batches of 1000,
with every value and the digest of the scanned data checked, and its peak RSS. Sizes run in
increasing order, the engines interleaved at each size. An engine whose projected time at the
next size (its time at the previous size scaled linearly by N) exceeds ``--scale-cap-min``
minutes is skipped at that size, and the table says so. For our engine the table also shows the
RSS bound its settings imply (:func:`ours_rss_bound_mb`). See docs/benchmarks.md, "Scale curve".
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MiB = 1 << 20

#: (key, label, unit, higher_is_better) of the scale table's columns
COLUMNS = [
    ("put", "put (batches of 100)", "keys/s", True),
    ("put_close", "put + close", "keys/s", True),
    ("get_hit", "get, hit", "gets/s", True),
    ("get_miss", "get, miss", "gets/s", True),
    ("scan", "scan (batches of 1000)", "rows/s", True),
]

#: Memory of our memtables per byte they count (``Memtable.size_bytes``: key + value + 32): the
#: key and value ``bytes`` objects, the ``Row``, the per-key version list, the dict slot and the
#: sorted key list's slot; tracemalloc on this workload's 14-byte keys and 100-byte values: 2.98;
#: plus, for a bulk load, the columns the WAL encodes keep for the L0 flush
#: (:class:`slatedb.format.kept_columns.ColumnsPart`: 21 bytes a row + the key, 0.24 here).
MEMTABLE_PY_FACTOR = 3.25
#: Memory of a decoded block per byte of its block-cache weight (the block's raw size + 128):
#: its Row objects and key/value ``bytes``; tracemalloc on this workload's 4 KiB blocks: 2.38.
BLOCK_CACHE_PY_FACTOR = 2.4
#: Memory of an SST being built per byte of the SST: the framed blocks, the joined object and
#: the key list the bloom filter is built from at the end (2 + 56/146 for this workload).
SST_BUILD_FACTOR = 2.4
#: Per key of every live SST: the bloom filter (``filter_bits_per_key`` / 8) and the index (one
#: entry per block, about 100 bytes of Python objects for a ~28-row block: ~3.6 bytes per key).
INDEX_BYTES_PER_KEY = 3.6


def parse_size(text: str) -> int:
    """``100k`` / ``1M`` / ``10M`` / ``2500`` -> an int."""
    t = text.strip().lower().replace("_", "")
    mult = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}.get(t[-1:], 1)
    value = float(t[:-1] if mult > 1 else t) * mult
    if value < 10 or value != int(value):
        raise ValueError(f"bad size {text!r} (want e.g. 100k, 1M, 2500; at least 10)")
    return int(value)


def size_label(n: int) -> str:
    for div, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= div and n % (div // 10) == 0:
            return f"{n / div:g}{suffix}"
    return str(n)


def ours_rss_bound_mb(settings: dict, n: int, base_mb: float, unflushed_bytes: float | None = None) -> dict[str, float]:
    """What our settings bound the process's memory by, in MiB, term by term.

    - ``base``: the interpreter, our modules and the workload's one chunk, measured in the child
      before the database is opened;
    - ``memtables``: writes wait once the memtables hold ``max_unflushed_bytes`` (counted bytes;
      ``unflushed_bytes`` instead gives the bound at an observed maximum), times
      :data:`MEMTABLE_PY_FACTOR` in Python objects, plus the one L0 SST being built
      (``l0_sst_size_bytes`` times :data:`SST_BUILD_FACTOR`);
    - ``block cache``: ``block_cache_size_bytes`` of weight, times :data:`BLOCK_CACHE_PY_FACTOR`;
    - ``index + filter``: one SstReader per live SST holds its index and bloom filter, so this
      term grows with N (:data:`INDEX_BYTES_PER_KEY` + filter bits per key), as in LevelDB and
      RocksDB unless index blocks go through the block cache;
    - ``compaction``: a compaction streams its sources block by block but builds each output
      SST (at most ``max_sst_size``) in memory: ``max_concurrent_compactions`` of them.
    """
    comp = settings.get("compactor_options") or {}
    worker = comp.get("worker") or {}
    max_sst = worker.get("max_sst_size", 256 * MiB) if comp else 0
    concurrent = comp.get("max_concurrent_compactions", 1) if comp else 0
    unflushed = settings["max_unflushed_bytes"] if unflushed_bytes is None else unflushed_bytes
    terms = {
        "base": base_mb,
        "memtables": (MEMTABLE_PY_FACTOR * unflushed + SST_BUILD_FACTOR * settings["l0_sst_size_bytes"]) / MiB,
        "block cache": BLOCK_CACHE_PY_FACTOR * settings["block_cache_size_bytes"] / MiB,
        "index + filter": n * (INDEX_BYTES_PER_KEY + settings["filter_bits_per_key"] / 8) / MiB,
        "compaction": SST_BUILD_FACTOR * concurrent * max_sst / MiB,
    }
    terms["total"] = sum(terms.values())
    return terms


def check_scale_result(res: dict) -> list[str]:
    c, n, g = res["checks"], res["n"], res["n_gets"]
    want = {"digest": c["expected_digest"], "rows": n, "scan_rows": n, "hit_values_ok": g, "miss_found": 0}
    return [f"{k}={c.get(k)!r} (want {v!r})" for k, v in want.items() if c.get(k) != v]


def scale_child_command(engine: str, venv_python: Path | None, n: int, gets: int, tmpdir: str | None) -> list[str]:
    extra = ["--engine", engine, "--n", str(n), "--gets", str(gets)] + (["--tmpdir", tmpdir] if tmpdir else [])
    if engine == "ours":
        return [sys.executable, "-m", "slatedb.bench.db_workload_scale", *extra]
    if engine == "sqlite3":
        return [sys.executable, "-I", str(HERE / "db_workload_scale.py"), *extra]
    assert venv_python is not None
    return [str(venv_python), "-I", str(HERE / "db_workload_scale.py"), *extra]


def _table(cols: list[str], rows: list[list[str]], left: set[int]) -> str:
    widths = [max(len(str(r[i])) for r in [cols] + rows) for i in range(len(cols))]

    def line(cells):
        return "| " + " | ".join(str(c).ljust(w) if i in left else str(c).rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    sep = "|" + "|".join("-" * (w + 2) if i in left else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cols), sep] + [line(r) for r in rows])


def render_scale(results: dict, skipped: dict, engines: list[str], sizes: list[int], fmt) -> str:
    """The scale table: one row per engine and size (skips and failures shown), then the ratio
    of the largest size's rates to the smallest's for each engine."""
    cols = ["engine", "keys"] + [label for _, label, _, _ in COLUMNS] + ["close", "reopen", "peak RSS", "RSS bound"]
    rows = []
    for e in engines:
        for n in sizes:
            res = results.get((e, n))
            if res is None:
                why = skipped.get((e, n), "not run")
                rows.append([e, size_label(n), why] + [""] * (len(cols) - 3))
                continue
            p = res["phases"]
            bound = "-"
            if e == "ours" and "engine_stats" in p:
                b = ours_rss_bound_mb(p["engine_stats"]["settings"], n, p["base_rss_mb"])
                bound = f"{b['total']:.0f} MB"
            rows.append([e, size_label(n)] + [fmt(p.get(k), unit) for k, _, unit, _ in COLUMNS]
                        + [f"{p['close_s']:.2f} s", f"{p['reopen_ms']:.0f} ms", f"{p['peak_rss_mb']:.0f} MB", bound])
    out = [_table(cols, rows, {0, 1})]
    if sizes[-1] != sizes[0]:
        rcols = ["engine", "sizes"] + [label for _, label, _, _ in COLUMNS] + ["peak RSS"]
        rrows = []
        for e in engines:
            measured = [n for n in sizes if (e, n) in results]
            if len(measured) < 2:
                rrows.append([e, "-"] + ["-"] * (len(rcols) - 2))
                continue
            lo, hi = measured[0], measured[-1]  # its largest measured size over its smallest
            pa, pb = results[(e, lo)]["phases"], results[(e, hi)]["phases"]
            rrows.append([e, f"{size_label(hi)} / {size_label(lo)}"]
                         + [f"{pb[k] / pa[k]:.2f}x" if pa.get(k) and pb.get(k) else "-" for k, _, _, _ in COLUMNS]
                         + [f"{pb['peak_rss_mb'] / pa['peak_rss_mb']:.2f}x"])
        out += ["", _table(rcols, rrows, {0, 1})]
    return "\n".join(out)


def render_ours_detail(results: dict, sizes: list[int]) -> str:
    """Our engine at each size: the RSS bound term by term beside the measured peak, and how far
    the flushers and the compactor were behind during the load."""
    lines = []
    for n in sizes:
        res = results.get(("ours", n))
        if res is None or "engine_stats" not in res["phases"]:
            continue
        p = res["phases"]
        st = p["engine_stats"]
        b = ours_rss_bound_mb(st["settings"], n, p["base_rss_mb"])
        terms = " + ".join(f"{k} {v:.0f}" for k, v in b.items() if k != "total")
        verdict = "holds" if p["peak_rss_mb"] <= b["total"] else "EXCEEDED"
        seen = ours_rss_bound_mb(st["settings"], n, p["base_rss_mb"], st["max_unflushed_mb"] * MiB)["memtables"]
        lines.append(f"  ours {size_label(n)}: peak RSS {p['peak_rss_mb']:.0f} MB (after load {p['load_rss_mb']:.0f} MB) "
                     f"vs bound {b['total']:.0f} MB = {terms}: {verdict} (the memtable term at the largest "
                     f"unflushed bytes seen: {seen:.0f} MB)")
        lines.append(f"    during the load: unflushed memtables up to {st['max_unflushed_mb']:.0f} MiB counted, "
                     f"{st['max_imm_memtables']} immutable memtable(s), L0 up to {st['max_l0_ssts']} SST(s); "
                     f"at reopen {st['at_reopen']['l0_ssts']} L0 SST(s) + {st['at_reopen']['sorted_runs']} sorted run(s) "
                     f"({st['at_reopen']['ssts']} SSTs); at the end {st['at_end']['l0_ssts']} L0 + "
                     f"{st['at_end']['sorted_runs']} run(s)")
    if lines:
        s = next(results[("ours", n)]["phases"]["engine_stats"]["settings"] for n in sizes if ("ours", n) in results)
        c = s.get("compactor_options") or {}
        lines.insert(0, "our settings (the defaults): " + ", ".join(
            f"{k}={s[k]}" for k in ("flush_interval", "l0_sst_size_bytes", "max_unflushed_bytes", "l0_max_ssts",
                                    "block_cache_size_bytes", "block_size_bytes", "filter_bits_per_key"))
            + (f"; in-process compactor: poll_interval={c.get('poll_interval')}, "
               f"max_concurrent_compactions={c.get('max_concurrent_compactions')}, "
               f"max_sst_size={(c.get('worker') or {}).get('max_sst_size')}, size-tiered scheduler defaults"
               if c else "; no compactor"))
    return "\n".join(lines)


def run_scale(args, engines: list[str], venvs: dict, errors: dict, prefix: list[str], pin_note: str,
              run_child, fmt, cpu_model) -> int:
    try:
        sizes = sorted({parse_size(s) for s in args.scale_sizes.split(",") if s.strip()})
    except ValueError as e:
        print(f"--scale-sizes: {e}", file=sys.stderr)
        return 2
    stamp = time.strftime("%Y-%m-%d %H:%M %Z")
    header = [
        f"Db benchmark, scale curve, {stamp}: sizes {', '.join(size_label(n) for n in sizes)} keys "
        f"(write batches of 100, 100-byte values); {args.scale_gets:,} hit and {args.scale_gets:,} miss gets "
        f"on the reopened DB; one full scan in batches of 1000; one fresh process per engine and size",
        f"machine: {os.cpu_count()} CPUs, {cpu_model()}; Python {platform.python_version()}; {pin_note}; "
        f"an engine is skipped at a size when its projected time exceeds {args.scale_cap_min:g} min",
    ]
    print("\n".join(header), file=sys.stderr, flush=True)
    results: dict = {}
    skipped: dict = {}
    took_s: dict = {}
    for n in sizes:
        for engine in engines:
            if engine not in ("ours", "sqlite3") and engine not in venvs:
                skipped[(engine, n)] = "unavailable"
                continue
            prev = [m for m in sizes if m < n and (engine, m) in took_s]
            if prev:
                m = prev[-1]
                projected_min = took_s[(engine, m)] * n / m / 60
                if projected_min > args.scale_cap_min:
                    why = f"skipped: projected {projected_min:.0f} min"
                    skipped[(engine, n)] = why
                    print(f"  {size_label(n):>5} {engine:9s} {why} (> --scale-cap-min {args.scale_cap_min:g})",
                          file=sys.stderr, flush=True)
                    continue
            elif any((engine, m) in skipped for m in sizes if m < n):
                skipped[(engine, n)] = "skipped: smaller size skipped"
                continue
            cmd = prefix + scale_child_command(engine, venvs.get(engine), n, args.scale_gets, args.tmpdir)
            t0 = time.perf_counter()
            res, err = run_child(cmd, engine, args.timeout)
            took = time.perf_counter() - t0
            if res is None:
                errors[engine].append(f"{size_label(n)}: {err}")
                skipped[(engine, n)] = "FAILED"
                print(f"  {size_label(n):>5} {engine:9s} FAILED after {took:.1f} s", file=sys.stderr, flush=True)
                continue
            took_s[(engine, n)] = took
            bad = check_scale_result(res)
            if bad:
                errors[engine].append(f"{size_label(n)}: wrong data: " + "; ".join(bad))
            results[(engine, n)] = res
            print(f"  {size_label(n):>5} {engine:9s} {took:7.1f} s  peak RSS {res['phases']['peak_rss_mb']:.0f} MB"
                  f"{'  WRONG DATA' if bad else ''}", file=sys.stderr, flush=True)

    return report(results, skipped, errors, engines, sizes, header, fmt, args.json,
                  {"pinning": pin_note, "gets": args.scale_gets,
                   "machine": {"cpus": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version()}})


def report(results: dict, skipped: dict, errors: dict, engines: list[str], sizes: list[int], header: list[str], fmt,
           json_path: str | None = None, meta: dict | None = None) -> int:
    """Print the tables, our RSS bound and the data checks; 1 if any run failed or was wrong."""
    versions = {e: r["version"] for (e, _), r in results.items()}
    print()
    print("\n".join(header))
    print("engines: " + ", ".join(f"{e} = {versions.get(e, 'not run')}" for e in engines)
          + "; default settings; local directory in a temp dir")
    print()
    print(render_scale(results, skipped, engines, sizes, fmt))
    print()
    print("ratios: each engine's rates at its largest measured size over those at its smallest "
          "(1.00x: no slowdown; 0.50x: half the rate; peak RSS: the growth).")
    print("close: after the load (ours: memtables to L0); reopen: open of the loaded DB; "
          "peak RSS: ru_maxrss of the child.")
    detail = render_ours_detail(results, sizes)
    if detail:
        print(detail)
    ok_runs = [f"{e} {size_label(n)}" for (e, n) in results if not any(x.startswith(size_label(n) + ":")
                                                                        for x in errors[e])]
    print(f"data checks: {len(ok_runs)} of {len(results)} runs OK"
          + "".join(f"; {e} FAILED" for e in engines if errors[e]))
    failed = {e: errs for e, errs in errors.items() if errs}
    for e, errs in failed.items():
        print(f"\n{e}: {len(errs)} problem(s)")
        for err in errs:
            print("  " + err.rstrip().replace("\n", "\n  "))
    if json_path:
        Path(json_path).write_text(json.dumps({
            "header": header, "sizes": sizes, **(meta or {}),
            "results": [r for r in results.values()], "skipped": {f"{e} {n}": w for (e, n), w in skipped.items()},
            "errors": errors,
        }, indent=1))
        print(f"\nwrote {json_path}")
    return 1 if failed else 0


def report_from_json(paths: list[str], all_engines: tuple[str, ...], fmt) -> int:
    """``--scale-report A.json,B.json``: one report of the runs saved by earlier ``--scale --json``
    runs (e.g. ours at 10M run apart from the peers); a later file's run of the same engine and
    size replaces an earlier one's."""
    results: dict = {}
    skipped: dict = {}
    errors: dict = {e: [] for e in all_engines}
    header: list[str] = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        header += [f"[{path}] {line}" for line in data.get("header", [f"{data.get('date')}, {data.get('pinning')}"])]
        for res in data["results"]:
            results[(res["engine"], res["n"])] = res
        for key, why in data.get("skipped", {}).items():
            e, n = key.rsplit(" ", 1)
            skipped[(e, int(n))] = why
        for e, errs in data.get("errors", {}).items():
            errors.setdefault(e, []).extend(errs)
    skipped = {k: v for k, v in skipped.items() if k not in results}
    engines = [e for e in all_engines if any(k[0] == e for k in list(results) + list(skipped))]
    sizes = sorted({n for _, n in list(results) + list(skipped)})
    return report(results, skipped, errors, engines, sizes, header, fmt)
