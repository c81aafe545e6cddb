"""The disk's floor for durable writes: what one WAL object's create costs on this machine's disk,
without any engine around it (``./just bench`` prints it beside the durable rows).

A durable put is acknowledged once its WAL object exists (spec/protocols/writer.md, DUR-1). On a
local directory the object store creates it as :meth:`slatedb.objstore.local.LocalStore.put`
does with create-if-absent: a temporary file written and ``fsync``-ed, linked to the object's
name (the atomic check), unlinked, and the directory ``fsync``-ed so that the name is durable too.
:func:`durable_create_floor` times exactly those system calls. With ``W`` writers each waiting
for its own put, a group commit holds at most one put of each, so ``W / p50`` bounds the durable
puts a second any engine can acknowledge on this disk with these syscalls (the row "durable puts,
16 concurrent writers" against it says how much of the disk's rate the engine leaves).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

#: About one WAL object of a durable put of a 100-byte value (the bench's row): its SST framing,
#: index and filter included.
WAL_OBJECT_BYTES = 2048


def durable_create_floor(parent: str | None = None, samples: int = 200,
                         size_bytes: int = WAL_OBJECT_BYTES) -> dict[str, float]:
    """Time ``samples`` creates of ``size_bytes`` files in a fresh directory under ``parent`` (the
    system's temp dir by default), each as the local store's create-if-absent makes a WAL object:
    ``{"p10_ms", "p50_ms", "p90_ms", "samples"}``. The directory is removed afterwards."""
    if samples < 1 or size_bytes < 1:
        raise ValueError("samples and size_bytes must be at least 1")
    data = os.urandom(size_bytes)
    lat: list[float] = []
    with tempfile.TemporaryDirectory(prefix="slatedb-disk-floor-", dir=parent) as d:
        dfd = os.open(d, os.O_RDONLY)
        try:
            for i in range(samples):
                t0 = time.perf_counter()
                tmp = os.path.join(d, f".tmp{i}")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.link(tmp, os.path.join(d, f"{i:020d}.sst"))
                os.unlink(tmp)
                os.fsync(dfd)
                lat.append(time.perf_counter() - t0)
        finally:
            os.close(dfd)
    q = statistics.quantiles(lat, n=10) if len(lat) > 1 else [lat[0]] * 9
    return {"p10_ms": q[0] * 1e3, "p50_ms": statistics.median(lat) * 1e3, "p90_ms": q[-1] * 1e3,
            "samples": float(samples)}


def floor_line(floor: dict[str, float], writers: int, official_rate: float | None) -> str:
    """The report's line for ``floor``: the p50 and what it bounds for ``writers`` writers, and
    that bound over the official wheel's rate in the same run (the issue's "100x" target)."""
    p50 = floor["p50_ms"]
    most = writers / (p50 / 1e3) if p50 > 0 else float("inf")
    line = (f"disk floor: one WAL object's create as the local store makes it ({WAL_OBJECT_BYTES} bytes written "
            f"and fsynced, linked, directory fsynced), {int(floor['samples'])} times: p50 {p50:.2f} ms "
            f"(p10 {floor['p10_ms']:.2f}, p90 {floor['p90_ms']:.2f}); so at most {most:,.0f} durable puts/s "
            f"from {writers} writers on this disk")
    if official_rate:
        line += f", {most / official_rate:.1f}x the official's {writers}-writer rate in this run"
    return line
