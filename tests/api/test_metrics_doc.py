"""docs/metrics.md lists this engine's metrics (docs/api.md and ``slatedb.uniffi.observe`` point
there; the page did not exist): its table is the metric set of ``slatedb/runtime/metrics.py``
and the Prometheus names ``db.metrics_prometheus()`` gives."""

from __future__ import annotations

import re
from pathlib import Path

import slatedb
from slatedb.runtime.metrics import COUNTERS, HISTOGRAMS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _rows() -> dict[str, str]:
    rows = re.findall(r"^\| `(\w+)` \| `(slatedb_\w+)` \|", PAGE.read_text(encoding="utf-8"), re.M)
    return dict(rows)


def test_the_page_lists_every_metric_and_its_prometheus_name() -> None:
    want = {n: f"slatedb_{n}_total" for n in COUNTERS} | {n: f"slatedb_{n}_seconds" for n in HISTOGRAMS}
    assert _rows() == want
    with slatedb.Db.open("memory://metrics-doc") as db:
        db.put(b"k", b"v")
        text = db.metrics_prometheus()
        assert set(db.metrics()) == set(want)
    for name in want.values():
        assert re.search(rf"^# TYPE {name} (counter|histogram)$", text, re.M), name
