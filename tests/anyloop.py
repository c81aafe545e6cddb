"""``@pytest.mark.anyloop``: an ``async def`` test that runs under trio and under asyncio.

The test is parametrized ``[trio]`` / ``[asyncio]`` (fixture ``async_lib``, which the test may
take). The trio copy runs as every async test of this suite does (pytest-trio's trio mode); the
asyncio copy is turned into a plain function calling ``asyncio.run`` before pytest-trio marks
coroutine tests. :func:`sleep` and :func:`to_thread` are the two library-neutral helpers such
tests need.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable

import pytest
import sniffio
import trio

ASYNC_LIBS = ("trio", "asyncio")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "anyloop: run this async test under trio and under asyncio")


def pytest_generate_tests(metafunc) -> None:
    if metafunc.definition.get_closest_marker("anyloop") and inspect.iscoroutinefunction(metafunc.function):
        if "async_lib" not in metafunc.fixturenames:
            metafunc.fixturenames.append("async_lib")
        metafunc.parametrize("async_lib", ASYNC_LIBS)


def _under_asyncio(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(**kwargs: Any) -> Any:
        return asyncio.run(fn(**kwargs))

    run.__name__ = fn.__name__
    return run


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("async_lib") == "asyncio" and inspect.iscoroutinefunction(item.obj):
            item.obj = _under_asyncio(item.obj)


def running() -> str:
    return sniffio.current_async_library()


async def sleep(seconds: float) -> None:
    if running() == "trio":
        await trio.sleep(seconds)
    else:
        await asyncio.sleep(seconds)


async def to_thread(fn: Callable[..., Any], *args: Any) -> Any:
    if running() == "trio":
        return await trio.to_thread.run_sync(fn, *args)
    return await asyncio.to_thread(fn, *args)
