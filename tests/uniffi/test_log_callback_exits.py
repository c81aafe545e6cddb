"""A ``LogCallback`` (``slatedb.uniffi.init_logging``) that raises ``SystemExit`` -- a callback that
calls ``sys.exit`` on an error line, say -- does not stop the engine: the line is reported as a
failing handler's is (``logging.Handler.handleError``) and the database goes on.

Found by trying such a callback: the log line of a background flush raised ``SystemExit`` on the
runtime thread, which ended the engine's trio run; every later call raised ``Error.Closed`` "the
database was aborted", naming nothing (the layer caught only ``Exception``; the same class of
defect as a merge operator's ``SystemExit``, tests/db/test_merge_operator_base_exceptions.py).
"""

from __future__ import annotations

import logging

import slatedb
import slatedb.uniffi as u
from slatedb.uniffi.observe import _CallbackHandler


class ExitingCallback(u.LogCallback):
    def __init__(self) -> None:
        self.lines = 0

    def log(self, record) -> None:
        self.lines += 1
        raise SystemExit(3)


def test_a_callback_that_raises_systemexit_does_not_stop_the_engine(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(logging, "raiseExceptions", False)  # handleError: no traceback on stderr
    callback = ExitingCallback()
    handler = _CallbackHandler(callback)  # what init_logging installs (once per process)
    log = logging.getLogger("slatedb")
    old_level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        with slatedb.Db.open(f"file://{tmp_path}/db", {"compactor_options": None}) as db:
            for round_ in range(3):
                for i in range(100):
                    db.put(b"k%d-%03d" % (round_, i), b"v" * 100)
                db.flush(wal=False)  # an L0 flush on the runtime thread logs at INFO
            assert db.get(b"k2-099") == b"v" * 100
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
    assert callback.lines >= 3
    with slatedb.Db.open(f"file://{tmp_path}/db") as db:
        assert sum(1 for _ in db.scan()) == 300
