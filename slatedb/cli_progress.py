"""Progress of the long admin commands (``run-compactor``, ``run-gc``) on a terminal.

A :class:`ProgressRuntime` is the production runtime whose protocol events also move one
``tqdm`` status line on stderr: the compactor's outputs written and its jobs by state, GC's
objects deleted by kind and its passes. It draws only when both stdout and stderr are a
terminal and ``--json`` was not given: piped or machine-read output stays as it was.
Nothing here touches protocol code; the events are the ones the runtime seam already carries.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
from collections import Counter
from typing import IO, Any

from tqdm import tqdm

from slatedb.gc.stats import GcStats
from slatedb.runtime.production import ProductionRuntime

#: The signals that stop a service command, as its stop line names them.
STOPS = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}


def wanted(as_json: bool) -> bool:
    """Draw progress: a terminal on stdout and stderr, and no ``--json``."""
    return not as_json and sys.stdout.isatty() and sys.stderr.isatty()


class ProgressRuntime(ProductionRuntime):
    """:class:`ProductionRuntime` plus a ``tqdm`` line fed by the events (see the module)."""

    def __init__(self, name: str, *, enabled: bool, file: IO[str] | None = None) -> None:
        super().__init__(name)
        compactor = name == "compactor"
        self.counts: Counter[str] = Counter()
        # A terminal that reports no size (a fresh pty) would make tqdm hide the line: fall back.
        size = shutil.get_terminal_size((100, 24))
        self.bar = tqdm(total=None, desc=name, unit=" SSTs" if compactor else " objects", leave=True,
                        file=file if file is not None else sys.stderr, disable=not enabled,
                        ncols=size.columns, nrows=size.lines, mininterval=0.2)

        #: What the service did so far, from the same events, bar or not: a stopped
        #: ``run-gc`` / ``run-compactor`` prints it (:meth:`summary`).
        self.done: Counter[str] = Counter()
        self.epoch: int | None = None

    def event(self, kind: str, **fields: Any) -> None:
        super().event(kind, **fields)
        done = self.done
        if kind == "gc_pass":
            done["passes"] += 1
            done.update({k: int(v) for k, v in fields.items() if isinstance(v, (int, bool))})
        elif kind == "gc_delete":
            done["deleted_in_stopped_pass"] += 1  # zeroed at the pass's end (gc_pass counts them)
        elif kind in ("compactor_started", "compactor_pin_released", "compactor_fenced"):
            self.epoch = fields.get("epoch")
        elif kind == "compaction_output":
            done["output_ssts"] += 1
        elif kind == "compaction_state" and fields.get("status") in ("Completed", "Failed"):
            done[str(fields["status"]).lower()] += 1
        elif kind == "compaction_state" and fields.get("reclaimed"):
            done["reclaimed"] += 1
        if kind == "gc_pass":
            done["deleted_in_stopped_pass"] = 0
        if self.bar.disable:
            return
        counts = self.counts
        if kind == "compaction_output":
            self.bar.update(1)
        elif kind == "compaction_state":
            counts[str(fields.get("status", "?")).lower()] += 1
        elif kind == "gc_delete":
            counts[str(fields.get("what", "object"))] += 1
            self.bar.update(1)
        elif kind == "gc_pass":
            counts["passes"] += 1
        else:
            return
        self.bar.set_postfix(dict(sorted(counts.items())), refresh=False)

    def close(self) -> None:
        self.bar.close()

    def summary(self) -> dict[str, Any]:
        """What the service did until it was stopped: GC's totals of its finished passes (the
        fields of ``GcStats``, as ``run-gc`` prints at its end) plus ``passes`` and the objects
        deleted by the pass the stop interrupted; the compactor's epoch and jobs completed,
        failed and reclaimed, and output SSTs written."""
        done = self.done
        if self.name == "compactor":
            return {"epoch": self.epoch, **{k: done[k] for k in ("completed", "failed", "reclaimed", "output_ssts")}}
        totals = GcStats(**{f: bool(done[f]) if isinstance(v, bool) else done[f] for f, v in GcStats().as_dict().items()})
        return {**totals.as_dict(), "deleted": totals.deleted, "passes": done["passes"],
                "deleted_in_stopped_pass": done["deleted_in_stopped_pass"]}


def print_stop(rt: ProgressRuntime | None, command: str, stopped: signal.Signals, *, as_json: bool,
               engine: str | None) -> None:
    """What a service stopped by ``stopped`` did (``rt`` None: stopped before it started): JSON
    (the compactor's always, as at its end) or GC's line."""
    view: dict[str, Any] = {"started": False} if rt is None else rt.summary()
    if rt is not None and command == "run-compactor":
        view.update(fenced=False, engine=engine)
    view["stopped"] = stopped.name
    if as_json or command == "run-compactor":
        print(json.dumps(view))
    elif rt is None:
        print(f"gc: stopped by {STOPS[stopped]} before its first pass")
    else:
        done = ", ".join(f"{k} {v}" for k, v in view.items() if v and k not in ("deleted", "passes", "stopped"))
        print(f"gc: stopped by {STOPS[stopped]} after {view['passes']} passes: {view['deleted']} objects deleted "
              f"({done or 'nothing to do'})")
