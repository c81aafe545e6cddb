"""Stop the official 0.17 compactor at a chosen ``.compactions`` state.

The official binding has no standalone compactor or worker: its compactor (coordinator plus
one local worker) runs only inside a writer ``Db`` opened with ``compactor_options``. So an
official writer runs here as a child process in the official venv, with options that make the
target state last, while this process watches the newest ``compactions/*.compactions`` (decoded
with our codec) and SIGKILLs the child the moment the state is seen.

Two ways of watching:

* **free running** (states that last seconds by configuration: Submitted, Scheduled, Compacted):
  poll every few ms; after the kill the newest file is read again and must still show the
  state (else the attempt is reported missed);
* **stepped** (Running with progress, which the official worker passes through in a few tens of
  ms): once the job is Scheduled the child is SIGSTOPped and let run in bursts of a few ms
  (SIGCONT, sleep, SIGSTOP, wait until every thread is stopped); the newest file is read while
  the child is stopped, so the state it is killed at is exactly the state seen. The heartbeat
  interval is wall-clock time, so with a short one the worker writes its progress in nearly
  every burst.

Linux only (``/proc/<pid>/task/*/stat``), like the rest of the interop suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Callable

import json

from slatedb.format.compactions import decode_compactions
from slatedb.format.types import CompactionsV1

from .official import PRELUDE, Official

#: An official writer with its compactor; optionally the official admin submits a compaction
#: of the given L0 view ids (after ``settle`` seconds: past the coordinator's first tick); then
#: it idles until killed.
HOLD = """
async def main(root, overrides, views, settle):
    db = await open_db(root, overrides=json.loads(overrides))
    views = json.loads(views)
    if views:
        await asyncio.sleep(float(settle))
        a = u.AdminBuilder("db", store_at(root)).build()
        await a.submit_compaction(u.CompactionSpec.TIERED(b"", [u.SourceId.SST_VIEW(v) for v in views], 0))
    print("READY", flush=True)
    await asyncio.sleep(3600)
    await db.shutdown()
asyncio.run(main(*sys.argv[1:]))
"""

Pred = Callable[[CompactionsV1], bool]


def newest_compactions(root: Path) -> CompactionsV1 | None:
    """The newest ``.compactions`` file that decodes (a file being renamed into place is skipped)."""
    d = root / "db" / "compactions"
    if not d.exists():
        return None
    for path in sorted(d.glob("*.compactions"), reverse=True):
        try:
            return decode_compactions(path.read_bytes(), str(path))
        except (OSError, ValueError):
            continue
    return None


def _all_stopped(pid: int) -> bool:
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state not in ("T", "t", "Z", "X"):
                return False
    except (FileNotFoundError, ProcessLookupError):
        return True
    return True


class OfficialWriter:
    """One official writer child process (see :data:`HOLD`)."""

    def __init__(self, official: Official, root: Path, overrides: dict, submit_views: list[str] | None = None,
                 settle_s: float = 0.5) -> None:
        self.root = root
        self._tmp = tempfile.TemporaryDirectory(prefix="slatedb-official-")
        script = Path(self._tmp.name) / "script.py"
        script.write_text(PRELUDE + "\n" + textwrap.dedent(HOLD))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        self.proc = subprocess.Popen(
            [str(official.python), "-I", str(script), str(root), json.dumps(overrides),
             json.dumps(submit_views or []), str(settle_s)],
            cwd=self._tmp.name, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"the official writer exited ({self.proc.returncode}) before the target state:\n"
                                 f"{err[-3000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        if self.proc.stderr:
            self.proc.stderr.close()
        self._tmp.cleanup()

    def run_until(self, pred: Pred, timeout_s: float, missed: Pred | None = None,
                  poll_s: float = 0.003) -> CompactionsV1 | None:
        """Free running: kill at the first newest file matching ``pred``; return the newest file
        after the kill if it still matches, else None (missed: also when a file matching
        ``missed`` is seen first, or at the timeout)."""
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                v = newest_compactions(self.root)
                if v is not None and pred(v):
                    break
                if v is not None and missed is not None and missed(v):
                    return None
                self._check_alive()
                time.sleep(poll_s)
            else:
                return None
        finally:
            self.kill()
        v = newest_compactions(self.root)
        return v if v is not None and pred(v) else None

    def resume(self) -> None:
        """Let a child left stopped by :meth:`step_until` run on."""
        os.kill(self.proc.pid, signal.SIGCONT)

    def step_until(self, start: Pred, pred: Pred, timeout_s: float, burst_s: float = 0.002,
                   keep_stopped: bool = False) -> CompactionsV1 | None:
        """Free running until ``start`` matches, then stepped until ``pred`` matches (killed while
        stopped: the state is exact; with ``keep_stopped``, left stopped instead: :meth:`resume`
        or :meth:`kill` it). Returns the state, or None when the window was missed (``pred`` never
        seen before the compaction moved on, or the timeout; the child is killed)."""
        pid = self.proc.pid
        deadline = time.monotonic() + timeout_s
        found = None
        try:
            while True:
                if time.monotonic() > deadline:
                    return None
                v = newest_compactions(self.root)
                if v is not None and start(v):
                    break
                self._check_alive()
                time.sleep(0.002)
            os.kill(pid, signal.SIGSTOP)
            while time.monotonic() < deadline:
                while not _all_stopped(pid):
                    if time.monotonic() > deadline:
                        return None
                    time.sleep(0.0005)
                v = newest_compactions(self.root)
                if v is not None and pred(v):
                    found = v
                    return v
                if v is not None and not start(v) and not pred(v):
                    return None  # moved past the window
                os.kill(pid, signal.SIGCONT)
                # A busy wait, not time.sleep: on a loaded machine a 2 ms sleep can last 10-20 ms,
                # long enough for the child to run a whole window past (running-stale missed three
                # times in a row in a CI run with simulator campaigns beside it).
                until = time.monotonic() + burst_s
                while time.monotonic() < until:
                    pass
                os.kill(pid, signal.SIGSTOP)
            return None
        finally:
            if found is None or not keep_stopped:
                self.kill()
