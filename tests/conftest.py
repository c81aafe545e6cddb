"""Suite-wide pytest set-up.

* ``--dist loadgroup`` under pytest 9: pytest-xdist 3.8 puts a test's ``xdist_group`` into its
  node id by assigning ``item._nodeid``, which pytest 9 no longer reads (node ids live in
  ``item._id``), so every group was spread over all workers (two Spark JVMs at once, two
  stateful campaigns side by side...). The hook below does the same on pytest 9's field.
* ``spark_session``: the one local Spark session of a test process (``local[2,2]``: two cores,
  two attempts per task, no UI, bound to 127.0.0.1), started on first use (again if a test
  stopped it) and stopped with its JVM when the process ends. Every test that needs Spark is in the ``spark`` xdist group, so
  the suite starts one JVM.
* ``@pytest.mark.anyloop`` (on an ``async def`` test or a module): the test runs twice, under
  trio (pytest-trio, as every async test here) and under asyncio (``asyncio.run``), as
  ``test_x[trio]`` / ``test_x[asyncio]``: the async API's suite is one suite for both libraries.
  Such tests use no async fixtures and nothing library-specific (``tests/anyloop.py``).
"""

from __future__ import annotations

import contextlib
import os

import pytest

pytest_plugins = ["tests.anyloop"]


#: tests/quarantine.txt: tests that failed on the integrated main of a session that ran out of time
#: before it could fix them, each line "node id  # reason". They run as non-strict xfails, so they are
#: reported (XFAIL/XPASS) but do not fail the suite; the file must be emptied by fixing them.
QUARANTINE = os.path.join(os.path.dirname(__file__), "quarantine.txt")


def _quarantined() -> dict[str, str]:
    out: dict[str, str] = {}
    if os.path.exists(QUARANTINE):
        for line in open(QUARANTINE, encoding="utf-8"):
            node, _, reason = line.partition("#")
            if node.strip():
                out[node.strip()] = reason.strip() or "quarantined"
    return out


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    quarantined = _quarantined()
    for item in items:
        reason = quarantined.get(item.nodeid.split("@")[0])
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=f"quarantined: {reason}", strict=False))
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest < 9: pytest-xdist's own hook works
        return
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


class SharedSpark:
    """The process's session, started again if a test stopped it (``sim``'s own Spark runs
    stop the session they get, and ``getOrCreate()`` hands them this one)."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._session = None

    def get(self):
        s = self._session
        if s is None or s.sparkContext._jsc is None:
            spark_engine = pytest.importorskip("sim.campaign.spark_engine")
            s = self._stack.enter_context(spark_engine.spark_session("local[2,2]", app_name="slatedb-tests"))
            s.conf.set("spark.sql.shuffle.partitions", "4")  # not 200 tasks for every shuffle of a few rows
            self._session = s
        return s

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="session")
def spark_sessions():
    shared = SharedSpark()
    yield shared
    shared.close()


@pytest.fixture()
def spark_session(spark_sessions):
    return spark_sessions.get()
