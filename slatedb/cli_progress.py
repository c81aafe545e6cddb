"""Progress of the long admin commands (``run-compactor``, ``run-gc``) on a terminal.

A :class:`ProgressRuntime` is the production runtime whose protocol events also move one
``tqdm`` status line on stderr: the compactor's outputs written and its jobs by state, GC's
objects deleted by kind and its passes. It draws only when both stdout and stderr are a
terminal and ``--json`` was not given: piped or machine-read output stays as it was.
Nothing here touches protocol code; the events are the ones the runtime seam already carries.
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from typing import IO, Any

from tqdm import tqdm

from slatedb.runtime.production import ProductionRuntime


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

    def event(self, kind: str, **fields: Any) -> None:
        super().event(kind, **fields)
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
