"""``slatedb.metrics_collector``: several databases' metrics through one Prometheus registry.

A registry refuses two collectors of the same metric names, whatever their labels, so the
databases of one process are exported by one collector: each metric one family, a sample per
database, labelled by the name you give it (``db.metrics_collector(**labels)`` is the same for
one database)."""

from __future__ import annotations

from typing import Any, Mapping

from slatedb.errors import InvalidArgumentError
from slatedb.runtime.metrics import check_labels, collector_of


def metrics_collector(databases: Mapping[str, Any], label: str = "db") -> Any:
    """A ``prometheus_client`` collector of ``databases`` (a mapping of names to open
    ``slatedb.Db`` or ``slatedb.aio.Db``), each sample labelled ``label=<name>``:
    ``prometheus_client.REGISTRY.register(slatedb.metrics_collector({"orders": a, "users": b}))``.
    A database closed later reports its last figures."""
    if not isinstance(databases, Mapping) or not databases:
        raise InvalidArgumentError("metrics_collector: give a non-empty mapping of names to open databases")
    named = {}
    for name, db in databases.items():
        core = getattr(db, "_core", None)
        runtime = getattr(core, "runtime", None)
        if runtime is None or not hasattr(runtime, "metrics"):
            raise InvalidArgumentError(f"metrics_collector: {name!r} is a {type(db).__name__}, not a slatedb database")
        if runtime.metrics is None:
            raise InvalidArgumentError(f"metrics_collector: database {name!r} keeps no metrics (a simulated runtime)")
        named[name] = runtime.metrics
    return collector_of(named, label)


def collector_of_core(core: Any, labels: Mapping[str, str]) -> Any:
    """``db.metrics_collector(**labels)`` of a front-end over ``core``: a collector whose samples
    carry ``labels`` (checked here), or None when the runtime keeps no metrics (a simulated one).
    A registry refuses two collectors of the same metric names whatever their labels: for several
    databases use :func:`metrics_collector`."""
    metrics = core.runtime.metrics
    if metrics is None:
        check_labels(labels)
        return None
    return metrics.collector(labels)
