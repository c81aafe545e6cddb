"""Durable writes against a real S3 server (``./just bench-s3``): does a durable put cost about
one object PUT (issue 23 item 2)?

In one run, on one server: the p50/p90 of a conditional create (``If-None-Match: *``, what a
WAL object write is) of a WAL-sized object through our store, then the p50/p90 of
``Db.put(durable=True)`` one at a time, then the throughput of 16 threads doing durable puts
(group commit shares WAL objects between them). The ratio ``durable p50 / PUT p50`` is the
figure: group commit makes a durable put one WAL object write, so it should be near 1.

Without ``--endpoint-url`` the benchmark starts SeaweedFS from this checkout's test servers
(``tests/servers.py``: ``weed`` on 127.0.0.1, stopped by its PID) and removes it afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
from typing import Iterator, Mapping

import trio

import slatedb
from slatedb.objstore import resolve_store
from slatedb.objstore.base import CREATE_IF_ABSENT

WRITERS = 16


def _pcts(ms: list[float]) -> tuple[float, float]:
    s = sorted(ms)
    return statistics.median(s), s[min(len(s) - 1, int(len(s) * 0.9))]


def raw_creates(url: str, options: Mapping[str, str], n: int, size: int) -> list[float]:
    async def main() -> list[float]:
        store = resolve_store(url, options=dict(options))
        out = []
        try:
            for i in range(n):
                t = time.perf_counter()
                await store.put(f"raw/{i:06d}.sst", b"x" * size, CREATE_IF_ABSENT)
                out.append((time.perf_counter() - t) * 1e3)
        finally:
            await store.aclose()
        return out
    return trio.run(main)


def durable_puts(url: str, options: Mapping[str, str], n: int, size: int) -> tuple[list[float], float, int]:
    """(one-at-a-time latencies in ms, 16-writer puts/s, WAL objects written by the 16 writers)."""
    with slatedb.Db.open(url, store_options=dict(options)) as db:
        lat = []
        for i in range(n):
            t = time.perf_counter()
            db.put(b"one%06d" % i, b"v" * size, durable=True)
            lat.append((time.perf_counter() - t) * 1e3)
        per = max(1, n // WRITERS) * 4

        def writer(w: int) -> None:
            for i in range(per):
                db.put(b"w%02d-%06d" % (w, i), b"v" * size, durable=True)
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        rate = WRITERS * per / (time.perf_counter() - t0)
        got = sum(1 for _ in db.scan(b"w", b"x"))
        if got != WRITERS * per:
            raise SystemExit(f"wrong data: {got} rows of {WRITERS * per} durable puts")
    return lat, rate, WRITERS * per


@contextlib.contextmanager
def _server(endpoint_url: str | None, access_key: str | None, secret_key: str | None) -> Iterator[Mapping[str, str]]:
    if endpoint_url:
        yield {"endpoint_url": endpoint_url, "region": "us-east-1", "access_key_id": access_key or "",
               "secret_access_key": secret_key or ""}
        return
    try:
        from tests import servers
    except ImportError as e:  # not a checkout: the user names a server
        raise SystemExit(f"no --endpoint-url and no tests/servers.py to start SeaweedFS ({e})") from None
    gen = servers.seaweedfs()
    server = next(gen)
    try:
        yield server.options() | {"_start_bucket": "bench"}
    finally:
        gen.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench-s3", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="one-at-a-time operations of each kind (default 200)")
    ap.add_argument("--size", type=int, default=100, help="value bytes (default 100)")
    ap.add_argument("--endpoint-url", default=None, help="an S3 server to use instead of starting SeaweedFS")
    ap.add_argument("--bucket", default="bench")
    ap.add_argument("--access-key", default=None)
    ap.add_argument("--secret-key", default=None)
    ns = ap.parse_args(argv)
    with _server(ns.endpoint_url, ns.access_key, ns.secret_key) as options:
        options = dict(options)
        if options.pop("_start_bucket", None):
            from tests import servers
            servers.create_bucket(servers.S3Server("seaweedfs", options["endpoint_url"], 0), ns.bucket)
        stamp = time.strftime("%Y%m%d%H%M%S")
        raw = raw_creates(f"s3://{ns.bucket}/raw-{stamp}", options, ns.n, ns.size + 64)
        lat, rate, total = durable_puts(f"s3://{ns.bucket}/db-{stamp}", options, ns.n, ns.size)
    (rp50, rp90), (dp50, dp90) = _pcts(raw), _pcts(lat)
    one = 1e3 / dp50
    print(f"S3 durable writes, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, endpoint "
          f"{ns.endpoint_url or 'SeaweedFS on 127.0.0.1 (started here)'}, n = {ns.n}")
    print(f"  conditional create of a WAL-sized object  p50 {rp50:7.2f} ms   p90 {rp90:7.2f} ms")
    print(f"  Db.put(durable=True), one at a time      p50 {dp50:7.2f} ms   p90 {dp90:7.2f} ms")
    print(f"  durable p50 / create p50                 {dp50 / rp50:7.2f}x   (1.0 = a durable put costs one PUT)")
    print(f"  {WRITERS} threads of durable puts             {rate:9.1f} puts/s ({total} puts; "
          f"{rate / one:.1f}x one writer's {one:.1f}/s)")
    print("data check: OK")


if __name__ == "__main__":
    main()
