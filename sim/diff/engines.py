"""An engine server as a child process (:mod:`sim.diff.servers`): ``request`` sends
one JSON line and reads one back (a watchdog kills a server that does not answer), ``kill``
sends SIGKILL, ``restart`` starts a fresh process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from slatedb.bench.official_venv import REPO_ROOT, ensure_official_venv

from .servers import OFFICIAL, OURS

OUR = "ours"
THEIRS = "official"


class EngineError(Exception):
    """A request failed in the engine (``.error`` is its ``Type: message``)."""

    def __init__(self, engine: str, op: str, error: str, trace: str = "") -> None:
        self.engine, self.op, self.error, self.trace = engine, op, error, trace
        super().__init__(f"{engine} {op}: {error}")


class EngineDied(Exception):
    """The server process exited or stopped answering."""


class Engine:
    def __init__(self, name: str, workdir: Path, timeout_s: float = 120.0) -> None:
        assert name in (OUR, THEIRS)
        self.name = name
        self.timeout_s = timeout_s
        self.script = workdir / f"server-{name}.py"
        self.script.write_text(OURS if name == OUR else OFFICIAL)
        self.proc: subprocess.Popen | None = None
        self.requests = 0

    def start(self) -> None:
        if self.name == OUR:
            cmd = [sys.executable, str(self.script)]
            env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        else:
            cmd = [str(ensure_official_venv()), "-I", str(self.script)]
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        self.stderr = open(self.script.with_suffix(".stderr"), "w")  # noqa: SIM115 - the server's lifetime
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, env=env, cwd=tempfile.gettempdir())

    def request(self, **req) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.requests += 1
        timer = threading.Timer(self.timeout_s, self._timeout)
        timer.start()
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            raise EngineDied(f"{self.name} server died during {req['op']}: {e}") from None
        finally:
            timer.cancel()
        if not line:
            self.proc.wait()
            raise EngineDied(f"{self.name} server gave no answer to {req['op']} (exit {self.proc.poll()}): "
                             f"{self.stderr_tail()}")
        out = json.loads(line)
        if not out.pop("ok"):
            raise EngineError(self.name, req["op"], out["error"], out.get("trace", ""))
        return out

    def stderr_tail(self, n: int = 1500) -> str:
        try:
            return self.script.with_suffix(".stderr").read_text()[-n:]
        except OSError:
            return ""

    def _timeout(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def kill(self) -> None:
        """SIGKILL the server (and so its open database: no close, no flush)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self.proc = None
