"""``sim run --timeline`` / ``sim shrink --timeline``: the picture of a run (sim/campaign/timeline.py),
opened in headless Chromium; and the protocol events a failing ``sim run`` prints."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from sim import cli

from sim.campaign import timeline
from sim.world.trace import Event, Trace, capture

pytestmark = pytest.mark.xdist_group("sim-timeline")

#: The flags Chromium needs on this machine kind (shared/.library/env/machines/python.md).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]

VIOLATION_RGB = (0xC0, 0x10, 0x2A)  # the page's violation colour


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Chromium is missing: ./just installs it (apt-get install -y chromium)"
    return path


def _browse(page: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="viz-chromium-") as profile:
        return subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args,
                               "file://" + os.path.abspath(page)],
                              capture_output=True, text=True, timeout=120, cwd=profile)


def _dom_check(page: str) -> dict:
    """The page's own check once Chromium laid it out and ran its script (``--dump-dom``)."""
    r = _browse(page, "--virtual-time-budget=2000", "--dump-dom")
    m = re.search(r'<body data-check="([^"]*)"', r.stdout)
    assert m, r.stdout[:500] + r.stderr[-2000:]
    raw = m.group(1).replace("&quot;", '"').replace("&amp;", "&")
    assert raw != "pending", "the page's script did not run"
    return json.loads(raw)


def _screenshot(page: str, path: str, height: int = 1300) -> "object":
    from PIL import Image

    _browse(page, "--window-size=1700,%d" % height, f"--screenshot={path}")
    return Image.open(path).convert("RGB")


def _red_columns(img) -> list[int]:
    """x of every column with a long run of the violation colour top to bottom (the dashed line
    through every lane)."""
    w, h = img.size
    px = img.load()
    cols = []
    for x in range(w):
        n = sum(1 for y in range(h) if sum(abs(a - b) for a, b in zip(px[x, y], VIOLATION_RGB)) < 60)
        if n >= 80:
            cols.append(x)
    return cols




def test_a_failing_run_draws_lanes_faults_versions_and_the_violation(tmp_path, capsys) -> None:
    page = str(tmp_path / "run.html")
    assert cli.main(["run", "--seed", "1", "--workload", "db", "--bug", "zombie-ack", "--timeline", page]) == 1
    out = capsys.readouterr().out
    assert f"timeline: {page}" in out
    html = open(page, encoding="utf-8").read()
    # Self-contained: nothing fetched from anywhere.
    assert not re.search(r'(src|href)="(https?:)?//', html)
    # Lanes: manifest and .compactions versions, every process, every skewed host's clock.
    for lane in ("manifest", ".compactions", "w1", "w2", "clock w1", "clock w2"):
        assert f'data-lane="{lane}"' in html, lane
    # Faults and store outcomes of this seed: skew and jumps, writes, versions (stalls and lost
    # replies: the passing run's seed below).
    for cls in ("mark clock", "req-write", "mark version"):
        assert cls in html, cls
    # The violation: the invariant's id, its statement from spec/protocols/README.md, its text.
    assert "FENCE-3" in html and "A halted (fenced) writer creates no further WAL object" in html
    assert "w1 acknowledged after it halted" in html

    check = _dom_check(page)
    assert check["views"] == 2  # the whole run and the detail around the violation
    assert check["lanes"] >= 2 * 5 and check["empty_lanes"] == []
    assert check["violation_marks"] == 2 and check["violation_inside"] is True

    img = _screenshot(page, str(tmp_path / "run.png"))
    cols = _red_columns(img)
    assert cols, "no violation line on the screenshot"


def test_a_passing_run_draws_lanes_and_no_violation(tmp_path) -> None:
    page = str(tmp_path / "pass.html")
    assert cli.main(["run", "--seed", "5", "--workload", "db", "--timeline", page]) == 0
    html = open(page, encoding="utf-8").read()
    for cls in ("stall band", "mark lost", "req-write", "mark version"):
        assert cls in html, cls
    check = _dom_check(page)
    assert check["views"] == 1 and check["lanes"] >= 6 and check["empty_lanes"] == []
    assert check["violation_marks"] == 0
    assert _red_columns(_screenshot(page, str(tmp_path / "pass.png"))) == []


def test_shrink_writes_the_shrunk_runs_timeline(tmp_path, capsys, monkeypatch) -> None:
    page = str(tmp_path / "shrunk.html")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["shrink", "--seed", "2", "--workload", "takeover", "--bug", "no-epoch-recheck", "-q",
                     "--timeline", page]) == 0
    out = capsys.readouterr().out
    # The choice sequence goes under .sim/ (git-ignored), not into the working directory (issue 25 item 10).
    assert (tmp_path / ".sim" / "shrunk-takeover-2.json").is_file() and not list(tmp_path.glob("shrunk-*"))
    assert f"timeline: {page}" in out
    html = open(page, encoding="utf-8").read()
    assert "shrunk run, fires DUR-1" in html and "--keep" in html
    # Only the shrunk run's processes: the writers of round 0 (the seed's violation was in round 1).
    lanes = set(re.findall(r'<g class="lane lane-process" data-lane="([^"]+)"', html))
    assert {"r0w0", "r0w1", "r0w2"} <= lanes and not any(lane.startswith("r1") for lane in lanes), lanes
    check = _dom_check(page)
    assert check["empty_lanes"] == [] and check["violation_marks"] >= 1


def test_a_failing_run_prints_the_protocol_events_around_the_violation(capsys) -> None:
    assert cli.main(["run", "--seed", "1", "--workload", "db", "--bug", "zombie-ack"]) == 1
    out = capsys.readouterr().out
    assert "protocol events and faults around the violating event" in out
    lines = out.splitlines()
    marked = [ln for ln in lines if ln.startswith(">> ")]
    assert len(marked) == 1 and " ack " in marked[0] and "wal/00000000000000000011.sst" in marked[0]
    shown = lines[lines.index(next(ln for ln in lines if ln.startswith("protocol events"))) + 1:]
    shown = [ln for ln in shown if ln.startswith(("   ", ">> "))]
    assert len(shown) >= 20
    assert not any(" spawn " in ln for ln in shown)
    assert not any("store.result" in ln and "transient" not in ln for ln in shown)
    # The events come from before the violation, the protocol's story: the halt (seed 2: the writer
    # saw a newer epoch in the manifest) and the WAL writes around it.
    assert any(" halt " in ln for ln in shown) and any("wal/" in ln for ln in shown)


# --- the pieces -------------------------------------------------------------------------------


def _trace(rows) -> list[Event]:
    now = [0.0]
    t = Trace(lambda: now[0])
    for time_s, process, kind, fields in rows:
        now[0] = time_s
        t.record(process, kind, **fields)
    return t.events


def test_violation_index_finds_the_quoted_event_a_related_one_or_the_end() -> None:
    events = _trace([
        (0.0, "w1", "spawn", {"task": "x"}),
        (0.5, "w1", "create", {"path": "wal/00000000000000000002.sst", "outcome": "ok"}),
        (1.0, "w1", "ack", {"path": "wal/00000000000000000002.sst", "seq": 3}),
        (2.0, "w2", "halt", {"epoch": 1}),
        (3.0, "w2", "closed", {}),
    ])
    quoted = f"InvariantViolation: FENCE-3 violated at {events[2].render()}: w1 acknowledged"
    assert timeline.violation_index(events, quoted) == (2, "event")
    assert timeline.violation_index(events, "AssertionError: DUR-1: wal/00000000000000000002.sst lost") == (2, "related")
    assert timeline.violation_index(events, "AssertionError: liveness: stuck") == (4, "end")


def test_the_end_of_the_run_is_its_last_readable_event_not_a_spawn() -> None:
    """db seed 0 with replay-skip: a failing `sim run` said "spawns ... left out" over a listing
    whose line marked >> was `final spawn task='gc-detach'` (the end-of-run check marked the
    trace's last event, a spawn)."""
    events = _trace([
        (0.0, "w1", "create", {"path": "wal/00000000000000000002.sst", "outcome": "ok"}),
        (1.0, "final", "fence_written", {"epoch": 5, "id": 92}),
        (1.0, "final", "spawn", {"task": "gc-compactions"}),
        (1.0, "final", "spawn", {"task": "gc-detach"}),
    ])
    assert timeline.violation_index(events, "AssertionError: DUR-1: acknowledged write lost") == (1, "end")
    marked = [line for line in timeline.format_around(events, 1).splitlines() if line.startswith(">>")]
    assert len(marked) == 1 and "fence_written" in marked[0]


def test_the_time_axis_cuts_long_gaps_and_stays_monotonic() -> None:
    s = timeline.TimeScale.compressed([0.0, 0.1, 0.2, 100.0, 100.1], 0.0, 1000.0)
    assert len(s.breaks) == 1 and s.breaks[0][2] == pytest.approx(99.8)
    xs = [s.x(t) for t in (0.0, 0.05, 0.1, 0.2, 50.0, 100.0, 100.1)]
    assert xs == sorted(xs) and xs[-1] == pytest.approx(1000.0)
    # The 99.8 s gap takes no more room than the cap, so the first 0.2 s stay readable.
    assert s.x(0.2) - s.x(0.0) > 50.0
    o = timeline.TimeScale.ordinal([1.0, 1.0, 1.0, 2.0], 0.0, 400.0)
    assert o.x(1.0) == pytest.approx(250.0) and 250.0 < o.x(1.5) < 350.0


def test_every_string_from_the_trace_is_escaped(tmp_path) -> None:
    events = _trace([
        (0.0, "w<1>", "create", {"path": "<script>alert(1)</script>", "outcome": "ok"}),
        (1.0, "w<1>", "ack", {"path": '"><img src=x onerror=alert(1)>', "seq": 1}),
    ])
    page = str(tmp_path / "esc.html")
    timeline.write(page, events, title="<b>t</b>", violations=["FENCE-3: <i>bad</i> ack"])
    html = open(page, encoding="utf-8").read()
    assert "<script>alert" not in html and "<img src=x" not in html and "<i>bad</i>" not in html
    assert "&lt;script&gt;" in html and "&lt;i&gt;bad&lt;/i&gt;" in html


def test_capture_collects_the_traces_made_inside_it_only() -> None:
    with capture() as traces:
        t = Trace(lambda: 0.0)
    Trace(lambda: 0.0)
    assert traces == [t]
