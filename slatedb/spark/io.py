"""Run one protocol function on a fresh trio loop with a production runtime and the store the
URL names (Spark calls the data source from plain threads and worker processes)."""

from __future__ import annotations

from typing import Awaitable, Callable, Mapping, TypeVar

import trio

from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import resolve_store
from slatedb.runtime import Runtime, with_max_retries
from slatedb.runtime.production import ProductionRuntime

T = TypeVar("T")


def run_io(url: str, store_options: Mapping[str, str] | None,
           fn: Callable[[ObjectStore, Runtime], Awaitable[T]], *, max_retries: int | None = None) -> T:
    async def main() -> T:
        rt = with_max_retries(ProductionRuntime("spark"), max_retries)
        store = resolve_store(url, options=store_options, clock_ms=rt.now_ms)
        try:
            return await fn(store, rt)
        finally:
            with trio.CancelScope(shield=True):
                await store.aclose()

    return trio.run(main)

