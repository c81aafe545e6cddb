"""A picture of one simulated run: ``sim run --seed N --timeline run.html``.

:func:`build` lays a run's trace out as lanes on a virtual-time axis and :func:`render` writes
them as one self-contained HTML page with inline SVG (no external file, script or font):

- a lane per **manifest** and per **.compactions** namespace (per database root): every version
  that landed in the store, by whom, and every delete;
- a lane per **process** (``w1``, ``c3.r1``, ``world``...): its store requests as short bars from
  request to answer, coloured by outcome (ok, object written, transient error, error answer such
  as "already exists"), lost replies, its protocol events (fencing, commits, compactions, GC,
  readers), and the faults it suffered: stalls (a bar as long as the stall), pauses and freezes,
  crashes, bit flips;
- a lane per **host clock** under its process: the skew drawn at start (offset, drift) and every
  jump of the wall clock;
- the **violating event** ringed in red, a red line across every lane at its moment, and the
  invariant's id, its statement from ``spec/protocols/README.md`` and the violation's text.

The time axis is linear except that long idle gaps are cut short (drawn as a break labelled with
the time skipped), so a 20-minute stall does not squeeze the rest of the run into a few pixels.
Under the whole-run view a detail view redraws the protocol events just before the violation with
their labels, and a table lists them (the same lines a failing ``sim run`` prints).

Rendering is Jinja2 (``sim/campaign/templates/timeline.html.j2``): the page is mostly markup filled from
the trace, every string in it comes from keys, exception messages and ids that need escaping in
HTML text and in SVG attributes (autoescape does it everywhere), and a template keeps the markup
readable apart from the layout arithmetic here.
"""

from __future__ import annotations

import bisect
import os
import re
from typing import Any, Iterable, Sequence

import attrs

from sim.campaign.sweep import invariant_of

_HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC_INDEX = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "spec", "protocols", "README.md")  # sim/campaign/ -> repo

#: Store requests (one per request; their answers and lost replies attach to them by ``n``).
_STORE_OPS = ("store.get", "store.head", "store.list", "store.put", "store.delete", "store.copy")
#: Kinds left out of the readable trace unless they drew a fault (see :func:`readable`).
_NOISE = ("spawn",) + _STORE_OPS + ("store.result",)

_FENCING = ("halt", "fence_written", "writer_epoch", "compactor_started", "compactor_fenced", "closed")
_FAULTS = ("crash", "fault.stall", "fault.pause", "pause", "fault.bitflip", "clock.skew", "clock.jump",
           "store.reply-lost", "heal")
#: Events labelled in the whole-run view too (rare and telling).
_LABELLED = ("crash", "halt", "compactor_fenced", "fault.bitflip", "corruption", "panic", "heal", "clock.jump")


def fields_of(event: Any) -> dict[str, Any]:
    """An event's fields as a dict, whether ``fields`` is a tuple of pairs or a typed record."""
    f = getattr(event, "fields", None)
    if isinstance(f, dict):
        return dict(f)
    if f is not None:
        return dict(f)
    if attrs.has(type(event)):
        return {k: v for k, v in attrs.asdict(event, recurse=False).items() if k not in ("time_s", "process", "kind")}
    return {}


def is_noise(event: Any) -> bool:
    """Task spawns and the store's ordinary traffic: a request that drew no fault and its answer."""
    kind = event.kind
    if kind == "spawn":
        return True
    if kind in _STORE_OPS:
        return fields_of(event).get("decision", "ok") == "ok"
    if kind == "store.result":
        return fields_of(event).get("outcome") != "transient-error"
    return False


def readable(events: Sequence[Any]) -> list[int]:
    """Indexes of the events that tell the story: protocol events, faults, crashes and requests
    that drew a fault (not spawns, not the store's ordinary traffic)."""
    return [i for i, e in enumerate(events) if not is_noise(e)]


# --- the violation ---------------------------------------------------------------------------

_AT = re.compile(r"\bat\s+(?P<t>\d+\.\d{6}) (?P<p>\S+)\s+(?P<k>\S+)")
_TOKEN = re.compile(r"[A-Za-z0-9_./\-]{8,}")


def invariant_texts(path: str = _SPEC_INDEX) -> dict[str, str]:
    """Invariant id -> statement, from the index table of ``spec/protocols/README.md``."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 3 and re.fullmatch(r"[A-Z]+(-[0-9]+)?", cells[0]):
                    out.setdefault(cells[0], cells[2])
    except OSError:
        pass
    return out


def violation_index(events: Sequence[Any], violation: Any) -> tuple[int | None, str]:
    """The index of the event a violation names, and how it was found: ``event`` (the violation
    carries it, or quotes its rendered line: the trace checks' "X violated at <event>"),
    ``related`` (the last event naming an object or id the violation mentions), ``end`` (a check
    at the end of the run: its last readable event), or None for an empty trace."""
    if not events:
        return None, "end"
    ev = getattr(violation, "event", None)
    if ev is not None:
        for i in range(len(events) - 1, -1, -1):
            if events[i] is ev or events[i] == ev:
                return i, "event"
    text = str(violation)
    m = _AT.search(text)
    if m:
        t, p, k = float(m["t"]), m["p"], m["k"]
        for i in range(len(events) - 1, -1, -1):
            e = events[i]
            if e.process == p and e.kind == k and abs(e.time_s - t) < 5e-7 and e.render().strip() in text:
                return i, "event"
        for i in range(len(events) - 1, -1, -1):
            e = events[i]
            if e.process == p and e.kind == k and abs(e.time_s - t) < 5e-7:
                return i, "event"
    tokens = [tok for tok in _TOKEN.findall(text) if not tok.isdigit() and not re.fullmatch(r"[A-Za-z]+", tok)]
    if tokens:
        for i in range(len(events) - 1, -1, -1):
            e = events[i]
            if is_noise(e):
                continue
            body = e.render()
            if any(tok in body for tok in tokens):
                return i, "related"
    shown = readable(events)  # the run's end as the listing shows it: its last readable event, not a spawn
    return (shown[-1] if shown else len(events) - 1), "end"


def around(events: Sequence[Any], index: int | None, before: int = 25, after: int = 5) -> list[tuple[int, bool]]:
    """The readable events around ``index``: (event index, is-the-violation) pairs."""
    idx = readable(events)
    if index is None:
        return [(i, False) for i in idx[-before:]]
    if index not in idx:
        idx = sorted(set(idx) | {index})
    k = idx.index(index)
    return [(i, i == index) for i in idx[max(0, k - before):k + after + 1]]


def format_around(events: Sequence[Any], index: int | None, before: int = 25, after: int = 5) -> str:
    """``around`` as text: the violating line marked ``>>``."""
    return "\n".join((">> " if hit else "   ") + events[i].render() for i, hit in around(events, index, before, after))


# --- layout ------------------------------------------------------------------------------------


class TimeScale:
    """Virtual time -> x, piecewise linear between breakpoints (``ts`` non-decreasing, ``xs``
    increasing). :meth:`compressed` (the whole-run view): linear, except that gaps longer than
    ``cap_s`` with no event are drawn ``cap_s`` long, a break marking each. :meth:`ordinal` (the
    detail view): one slot per event, whatever the time between them."""

    def __init__(self, ts: list[float], xs: list[float], breaks: list[tuple[float, float, float]]) -> None:
        self.ts, self.xs, self.breaks = ts, xs, breaks

    @classmethod
    def compressed(cls, times: Iterable[float], x0: float, width: float, cap_s: float | None = None) -> "TimeScale":
        ts = sorted(set(times)) or [0.0]
        if len(ts) == 1:
            ts = [ts[0], ts[0] + 1.0]
        span = ts[-1] - ts[0]
        cap = cap_s if cap_s is not None else max(span / 40.0, 1e-6)
        shown = [min(b - a, cap) for a, b in zip(ts, ts[1:])]
        px_per_s = width / (sum(shown) or 1.0)
        xs = [x0]
        for d in shown:
            xs.append(xs[-1] + d * px_per_s)
        breaks = [(xs[i], xs[i + 1], b - a) for i, (a, b) in enumerate(zip(ts, ts[1:])) if b - a > cap * 1.0001]
        return cls(ts, xs, breaks)

    @classmethod
    def ordinal(cls, times: Sequence[float], x0: float, width: float) -> "TimeScale":
        """``times`` in order, one slot each (the k-th at the middle of slot k)."""
        n = max(len(times), 1)
        step = width / n
        ts = list(times) or [0.0]
        xs = [x0 + step * (k + 0.5) for k in range(len(ts))]
        ts = [ts[0]] + ts + [ts[-1]]
        xs = [x0] + xs + [x0 + width]
        # Equal times would make t -> x ambiguous: x(t) takes the last slot at t.
        return cls(ts, xs, [])

    def x(self, t: float) -> float:
        ts, xs = self.ts, self.xs
        if t < ts[0]:
            return xs[0]
        i = bisect.bisect_right(ts, t) - 1  # the last breakpoint at or before t
        if i >= len(ts) - 1:
            return xs[-1]
        a, b = ts[i], ts[i + 1]
        if b == a:
            return xs[i]
        return xs[i] + (t - a) / (b - a) * (xs[i + 1] - xs[i])

    def t(self, x: float) -> float:
        xs, ts = self.xs, self.ts
        if x <= xs[0]:
            return ts[0]
        if x >= xs[-1]:
            return ts[-1]
        i = bisect.bisect_right(xs, x) - 1
        if xs[i + 1] == xs[i]:
            return ts[i]
        return ts[i] + (x - xs[i]) / (xs[i + 1] - xs[i]) * (ts[i + 1] - ts[i])

    def ticks(self, n: int = 10) -> list[tuple[float, str]]:
        x0, x1 = self.xs[0], self.xs[-1]
        out = []
        for k in range(n + 1):
            x = x0 + (x1 - x0) * k / n
            out.append((x, _fmt_s(self.t(x))))
        return out


def _fmt_s(t: float) -> str:
    if t >= 3600:
        return f"{t / 3600:.2f} h"
    if t >= 60:
        return f"{t / 60:.1f} min"
    if t >= 1:
        return f"{t:.2f} s"
    return f"{t * 1000:.0f} ms"


_VERSIONED = re.compile(r"^(?P<root>(?:.*/)?)(?P<ns>manifest|compactions)/0*(?P<id>\d+)\.(?:manifest|compactions)$")


def _category(kind: str, fields: dict[str, Any]) -> str:
    if kind in ("crash",):
        return "crash"
    if kind in ("fault.bitflip",):
        return "bitflip"
    if kind in ("fault.stall",):
        return "stall"
    if kind in ("fault.pause", "pause"):
        return "pause"
    if kind.endswith("_error") or kind in ("panic", "corruption", "reader_checkpoint_lost", "boundary_vanished"):
        return "error"
    if kind in _FENCING:
        return "fencing"
    if kind.startswith("gc") or kind in ("delete", "boundary_advance", "db_destroyed", "destroy"):
        return "gc"
    if kind.startswith("compaction") or kind.startswith("compactor"):
        return "compaction"
    if kind.startswith("reader") or kind.startswith("checkpoint") or kind.startswith("clone"):
        return "reader"
    if kind in ("heal", "settings"):
        return "world"
    return "protocol"


@attrs.define
class Lane:
    name: str
    label: str
    group: str  # "object" | "process" | "clock"
    y: float = 0.0
    height: float = 0.0
    bars: list = attrs.field(factory=list)  # dicts: x1, x2, cls, title
    marks: list = attrs.field(factory=list)  # dicts: x, cls, shape, title, label, hit


@attrs.define
class View:
    title: str
    width: float
    height: float
    x0: float
    x1: float
    lanes: list
    ticks: list
    breaks: list
    violation_x: float | None
    axis_y: float


@attrs.define
class Page:
    title: str
    header: list  # (label, value)
    violations: list  # dicts: invariant, statement, text, how, event
    views: list
    around: list  # dicts: time, process, kind, body, hit
    legend: list  # (cls, text)


LEGEND = [
    ("req-ok", "store request answered (read, list)"), ("req-write", "object written (put, copy, delete)"),
    ("req-transient", "transient error"), ("req-err", "error answer (already exists, not found, ...)"),
    ("lost", "reply lost (applied)"), ("stall", "stall"), ("pause", "pause / freeze"), ("crash", "crash"),
    ("bitflip", "bit flip"), ("fencing", "fencing, epochs, halts"), ("compaction", "compaction"),
    ("gc", "GC, boundaries"), ("reader", "readers, checkpoints, clones"), ("protocol", "other protocol event"),
    ("error", "error event"), ("version", "manifest / .compactions version landed"),
    ("version-del", "version deleted"), ("clock", "clock skew / jump"), ("violation", "violation"),
]


def _layout(events: Sequence[Any], indexes: list[int], violation: int | None, *, title: str, width: float,
            detail: bool) -> View:
    """One view of the events at ``indexes`` (all of them, or a window) as lanes."""
    label_w, right = 150.0, 80.0
    plot_w = width - label_w - right
    # Times that shape the axis: every event and the end of every stall / pause.
    if detail:
        scale = TimeScale.ordinal([events[i].time_s for i in indexes], label_w, plot_w)
        slot = {i: scale.xs[k + 1] for k, i in enumerate(indexes)}
    else:
        times: list[float] = []
        for i in indexes:
            e = events[i]
            times.append(e.time_s)
            f = fields_of(e)
            if e.kind in ("fault.stall", "fault.pause", "pause") and isinstance(f.get("seconds"), (int, float)):
                times.append(e.time_s + float(f["seconds"]))
        scale = TimeScale.compressed(times, label_w, plot_w)
        slot = {}

    def X(t: float, i: int | None = None) -> float:
        return slot[i] if i is not None and i in slot else scale.x(t)

    lanes: dict[str, Lane] = {}
    order: list[str] = []

    def lane(key: str, label: str, group: str) -> Lane:
        if key not in lanes:
            lanes[key] = Lane(key, label, group)
            order.append(key)
        return lanes[key]

    # Object lanes first (they come first on the page whatever their first event).
    pending: dict[tuple[str, int], tuple[int, Any]] = {}
    for i in indexes:
        e = events[i]
        f = fields_of(e)
        if e.kind in ("store.put", "store.delete", "store.copy"):
            key = f.get("dst") if e.kind == "store.copy" else f.get("key")
            m = _VERSIONED.match(str(key or ""))
            if m:
                pending[(e.process, f.get("n"))] = (i, m)
        elif e.kind == "store.result" and (e.process, f.get("n")) in pending:
            j, m = pending.pop((e.process, f.get("n")))
            outcome = str(f.get("outcome", ""))
            if not outcome.startswith("ok"):
                continue
            req = events[j]
            ns = ".compactions" if m["ns"] == "compactions" else "manifest"
            ln = lane(f"v:{m['root']}{ns}", f"{m['root']}{ns}", "object")
            deleted = req.kind == "store.delete"
            ln.marks.append({"x": X(e.time_s, i), "cls": "version-del" if deleted else "version",
                             "shape": "x" if deleted else "tick", "hit": False,
                             "label": ("" if deleted else m["id"]) if detail or not deleted else "",
                             "title": f"{'deleted' if deleted else 'version'} {m['id']} of {m['root']}{ns} "
                                      f"by {req.process} at {e.time_s:.6f} s"})
    objects = sorted(order)
    order.clear()

    requests: dict[tuple[str, Any], tuple[int, Any]] = {}
    for i in indexes:
        e = events[i]
        f = fields_of(e)
        kind = e.kind
        if kind.startswith("clock."):
            ln = lane(f"c:{e.process}", f"clock {e.process}", "clock")
            if kind == "clock.skew":
                off, drift = f.get("offset_ms", 0), f.get("drift_ppm", 0)
                text = f"offset {off:+} ms, drift {drift:+.0f} ppm" if isinstance(drift, (int, float)) else str(f)
            else:
                text = f"jump {f.get('delta_ms', 0):+} ms (offset now {f.get('offset_ms', 0):+} ms)"
            ln.marks.append({"x": X(e.time_s, i), "cls": "clock", "shape": "diamond", "hit": i == violation,
                             "label": text, "title": e.render().strip()})
            continue
        ln = lane(f"p:{e.process}", e.process, "process")
        if kind == "spawn":
            continue
        if kind in _STORE_OPS:
            requests[(e.process, f.get("n"))] = (i, f)
            if i == violation:
                ln.marks.append({"x": X(e.time_s, i), "cls": "req-ok", "shape": "dot", "hit": True,
                                 "label": kind, "title": e.render().strip()})
            continue
        if kind == "store.result":
            req = requests.get((e.process, f.get("n")))
            outcome = str(f.get("outcome", ""))
            if req is not None:
                j, rf = req
                op = events[j].kind
                if outcome == "transient-error":
                    cls = "req-transient"
                elif not outcome.startswith("ok"):
                    cls = "req-err"
                elif op in ("store.put", "store.copy", "store.delete"):
                    cls = "req-write"
                else:
                    cls = "req-ok"
                x1 = X(events[j].time_s, j)
                ln.bars.append({"x1": x1, "x2": max(X(e.time_s, i), x1 + 1.5), "cls": cls,
                                "title": f"{events[j].render().strip()} -> {outcome} at {e.time_s:.6f} s"})
            if i == violation:
                ln.marks.append({"x": X(e.time_s, i), "cls": "req-ok", "shape": "dot", "hit": True,
                                 "label": f"result {outcome}", "title": e.render().strip()})
            continue
        if kind == "store.reply-lost":
            ln.marks.append({"x": X(e.time_s, i), "cls": "lost", "shape": "tri", "hit": i == violation,
                             "label": "reply lost" if detail else "", "title": e.render().strip()})
            continue
        cat = _category(kind, f)
        if kind in ("fault.stall", "fault.pause", "pause") and isinstance(f.get("seconds"), (int, float)):
            x1 = X(e.time_s, i)
            ln.bars.append({"x1": x1, "x2": max(X(e.time_s + float(f["seconds"])), x1 + 2), "cls": cat,
                            "title": e.render().strip(), "band": True})
            if i != violation and not detail:
                continue
        shape = {"crash": "x", "bitflip": "star"}.get(cat, "dot")
        label = kind if (detail or kind in _LABELLED or i == violation) else ""
        if label and kind == "fault.bitflip":
            label = f"bit flip {f.get('key', '')}"
        ln.marks.append({"x": X(e.time_s, i), "cls": cat, "shape": shape, "hit": i == violation, "label": label,
                         "title": e.render().strip()})

    # Order: object lanes, then processes by first appearance, each followed by its clock lane.
    procs = [k for k in order if k.startswith("p:")]
    clocks = {k[2:]: k for k in order if k.startswith("c:")}
    final = list(objects)
    for k in procs:
        final.append(k)
        name = k[2:]
        if name in clocks:
            final.append(clocks.pop(name))
    final.extend(clocks.values())
    top = 36.0
    y = top
    out = []
    for k in final:
        ln = lanes[k]
        ln.height = (34.0 if detail else 22.0) if ln.group != "clock" else 26.0
        if detail and ln.group == "process" and any(m["label"] for m in ln.marks):
            ln.height = 58.0
        ln.y = y
        y += ln.height
        # Labels that would overlap go on another row.
        rows = 2 if ln.group == "clock" else (4 if ln.height >= 58 else (2 if ln.height >= 30 else 1))
        ends = [-1e9] * rows
        for m in sorted(ln.marks, key=lambda m: m["x"]):
            m["row"] = 0
            if m["label"]:
                free = [r for r in range(rows) if ends[r] < m["x"]]
                r = free[0] if free else min(range(rows), key=lambda r: ends[r])
                m["row"] = r
                ends[r] = m["x"] + 5.6 * len(m["label"]) + 4
        out.append(ln)
    vx = X(events[violation].time_s, violation) if violation is not None and violation in set(indexes) else None
    return View(title=title, width=width, height=y + 40.0, x0=label_w, x1=label_w + plot_w, lanes=out,
                ticks=scale.ticks(), breaks=[b for b in scale.breaks if b[1] - b[0] >= 0],
                violation_x=vx, axis_y=y + 4.0)


def build(events: Sequence[Any], *, title: str, header: Sequence[tuple[str, str]] = (),
          violations: Sequence[Any] = (), width: float = 1600.0, detail_events: int = 40) -> Page:
    """Lay out a run: the whole-run view, and (if it failed) a detail view of the readable
    events leading to the violation."""
    texts = invariant_texts()
    vinfo = []
    hit: int | None = None
    for n, v in enumerate(violations):
        idx, how = violation_index(events, v)
        inv = getattr(v, "invariant", None) or invariant_of(str(v))
        if n == 0:
            hit = idx
        vinfo.append({"invariant": inv, "statement": texts.get(inv, ""), "text": str(v), "how": how,
                      "event": events[idx].render().strip() if idx is not None else ""})
    views = [_layout(events, list(range(len(events))), hit, title="whole run", width=width, detail=False)]
    near = around(events, hit, before=detail_events, after=3) if events else []
    if hit is not None and near:
        views.append(_layout(events, [i for i, _ in near], hit,
                             title=f"the {len(near)} protocol events and faults around the violation",
                             width=width, detail=True))
    rows = []
    for i, h in (near or [(i, False) for i in readable(events)[-detail_events:]]):
        e = events[i]
        rows.append({"time": f"{e.time_s:.6f}", "process": e.process, "kind": e.kind,
                     "body": " ".join(f"{k}={v!r}" for k, v in fields_of(e).items()), "hit": h})
    return Page(title=title, header=list(header), violations=vinfo, views=views, around=rows, legend=LEGEND)


def render(page: Page) -> str:
    """The page as HTML (Jinja2, autoescaped)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(_HERE, "templates")),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("timeline.html.j2").render(page=page)


def header_for(result: Any, scenario: Any, seed: int, replay: str, wall_s: float | None = None) -> list[tuple[str, str]]:
    rows = [
        ("scenario", scenario.describe() if hasattr(scenario, "describe") else str(scenario)),
        ("seed", str(seed)),
        ("verdict", "PASS" if result.ok else "FAIL"),
        ("trace", f"{result.digest[:16]}, {result.events} events, {result.virtual_s:.1f} virtual s"),
        ("faults", ", ".join(f"{k} {v}" for k, v in sorted(dict(result.faults).items())) or "-"),
        ("replay", replay),
    ]
    if wall_s is not None:
        rows.insert(4, ("wall", f"{wall_s:.2f} s"))
    return rows


def write(path: str, events: Sequence[Any], *, title: str, header: Sequence[tuple[str, str]] = (),
          violations: Sequence[Any] = ()) -> Page:
    """Build and write the page to ``path``; the page model (for tests)."""
    page = build(events, title=title, header=header, violations=violations)
    html = render(page)
    with open(path, "w", encoding="utf-8") as f:
        f.write(html)
    return page
