"""Issue 25 item 8: ``run-compactor`` and ``run-gc`` show progress on a terminal (a tqdm line
on stderr fed by the runtime's events) and stay quiet under ``--json`` or a pipe."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time

import pytest

import slatedb
from slatedb.cli_progress import ProgressRuntime

SETTINGS = {"l0_sst_size_bytes": 2048, "compactor_options": None, "min_filter_keys": 1}


def test_the_progress_line_counts_what_the_events_say() -> None:
    out = io.StringIO()
    rt = ProgressRuntime("compactor", enabled=True, file=out)
    for status in ("Submitted", "Scheduled", "Running", "Compacted", "Completed"):
        rt.event("compaction_state", id="x", status=status)
    for n in range(3):
        rt.event("compaction_output", id="x", sst=f"s{n}", n=n + 1)
    rt.close()
    text = out.getvalue()
    assert "compactor" in text and "3 SSTs" in text and "completed=1" in text, text
    out = io.StringIO()
    rt = ProgressRuntime("gc", enabled=True, file=out)
    rt.event("gc_delete", path="wal/1.sst", what="wal")
    rt.event("gc_delete", path="compacted/a.sst", what="sst")
    rt.event("gc_pass", ssts_deleted=1)
    rt.close()
    assert "2 objects" in out.getvalue() and "wal=1" in out.getvalue() and "passes=1" in out.getvalue()
    quiet = io.StringIO()
    rt = ProgressRuntime("gc", enabled=False, file=quiet)
    rt.event("gc_delete", path="wal/1.sst", what="wal")
    rt.close()
    assert quiet.getvalue() == ""


@pytest.fixture
def db_with_work(tmp_path) -> str:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, settings=SETTINGS) as db:
        for r in range(3):
            for i in range(300):
                db.put(b"k%04d" % i, b"v%d" % r * 20)
            db.flush()
    return url


def _on_a_terminal(argv: list[str], timeout_s: float = 120) -> str:
    """Run ``argv`` with stdout and stderr on a pseudo-terminal; everything it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


CLI = [sys.executable, "-m", "slatedb.cli"]


def test_run_compactor_draws_progress_on_a_terminal_only(db_with_work, tmp_path) -> None:
    args = ["--path", db_with_work, "run-compactor", "--once"]
    (tmp_path / "s.json").write_text('{"compactor_options": {"poll_interval": "50ms", "commit_compacted_interval": '
                                     '"50ms", "scheduler_options": {"min_compaction_sources": "2"}}}')
    settings = ["--settings", str(tmp_path / "s.json")]
    shown = _on_a_terminal(CLI + args + settings)
    assert "compactor" in shown and "SSTs" in shown and "completed=" in shown, shown
    piped = subprocess.run(CLI + args + settings, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and "SSTs" not in piped.stderr and "SSTs" not in piped.stdout, piped


def test_run_gc_draws_progress_on_a_terminal_and_not_under_json(db_with_work) -> None:
    args = ["--path", db_with_work, "run-gc", "--once"]
    shown = _on_a_terminal(CLI + args)
    assert "gc" in shown and "objects" in shown and "passes=1" in shown, shown
    as_json = _on_a_terminal(CLI + ["--json"] + args)
    assert "gc: " not in as_json and "passes=" not in as_json and "\"deleted\"" in as_json, as_json
