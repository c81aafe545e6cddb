"""Running the checks: :func:`check_store` over an open store, :func:`check` over a URL.

The image is read without locks while writers, compactors and GC may run. A check whose latest
manifest or ``.compactions`` id changed while it ran is done again (up to ``attempts`` times), so
that a finding is never an artefact of reading two different states; an object that disappears
between the listing and its read counts as missing only when the state stayed the same."""

from __future__ import annotations

import os
from typing import Callable

import trio

from slatedb.config import GarbageCollectorOptions
from slatedb.errors import ObjectStoreError
from slatedb.format.layout import COMPACTIONS_DIR, COMPACTIONS_SUFFIX, MANIFEST_DIR, MANIFEST_SUFFIX
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import resolve_store
from slatedb.runtime.production import ProductionRuntime

from .rules import (
    ObjectChecker,
    boundaries,
    checkpoints,
    compactions,
    external_dbs,
    history,
    manifest_present,
    runs,
    ssts,
    wal,
)
from .garbage import garbage
from .image import CheckAccessError, _ids, load_image, local_dir_of
from .report import CheckReport, Finding
from slatedb.redact import shown_url


async def _once(store: ObjectStore, *, deep: bool, now_ms: int, gc_options) -> CheckReport:
    img = await load_image(store)
    now_s = now_ms // 1000
    findings: list[Finding] = []
    findings += manifest_present(img)
    findings += boundaries(img)
    findings += history(img)
    findings += checkpoints(img, now_s)
    findings += runs(img)
    chk = ObjectChecker(img, deep)
    try:
        findings += await ssts(chk, now_s)
        findings += await wal(chk, now_s)
        findings += await external_dbs(chk, now_s)
        findings += await compactions(chk)
    finally:
        await chk.aclose()
    counts = {"manifests": len(img.manifest_ids), "objects": len(img.listing), **chk.counts}
    return CheckReport(shown_url(store.url), tuple(findings), tuple(garbage(img, now_ms, gc_options)), img.latest_id, deep,
                       counts)


async def _heads(store: ObjectStore) -> tuple[int, int]:
    m = await _ids(store, MANIFEST_DIR, MANIFEST_SUFFIX)
    c = await _ids(store, COMPACTIONS_DIR, COMPACTIONS_SUFFIX)
    return (m[-1] if m else 0, c[-1] if c else 0)


async def check_store(store: ObjectStore, *, deep: bool = False, now_ms: int | Callable[[], int],
                      gc_options: GarbageCollectorOptions | None = None, attempts: int = 5) -> CheckReport:
    """Check the database rooted at ``store`` (read-only). ``now_ms`` (or a clock) decides which
    checkpoints are active and the garbage ages. Raises :class:`CheckAccessError` when there is
    nothing to check or the store cannot be read."""
    clock = now_ms if callable(now_ms) else (lambda: now_ms)
    report = None
    try:
        for _ in range(attempts):
            before = await _heads(store)
            report = await _once(store, deep=deep, now_ms=clock(), gc_options=gc_options)
            if report.healthy or await _heads(store) == before:
                return report
    except ObjectStoreError as e:
        raise CheckAccessError(f"cannot read {shown_url(store.url)}: {e}") from e
    assert report is not None
    return report


def check(url: str, *, deep: bool = False, gc_options: GarbageCollectorOptions | None = None,
          store: ObjectStore | None = None) -> CheckReport:
    """``slatedb.check(url)``: check the database at ``url`` (any engine's; local directory, S3 or
    memory). Read-only. Returns a :class:`CheckReport` (``.healthy``, ``.findings``,
    ``.garbage``); raises :class:`CheckAccessError` when ``url`` holds no database or cannot be
    read, :class:`~slatedb.errors.InvalidUrlError` when ``url`` is malformed (as an open does)."""
    made: ObjectStore | None = None
    if store is None:
        # The URL is checked first (a host, a '..' segment, a fragment: InvalidUrlError, as any
        # open refuses it); then a local directory that does not exist is no database (opening
        # nothing: the store is built, not used, and creates nothing).
        made = resolve_store(url)
        path = local_dir_of(url)
        if path is not None and not os.path.isdir(path):
            raise CheckAccessError(f"no database at {shown_url(url)}: {path} is not a directory")

    async def main() -> CheckReport:
        s = store if store is not None else made
        assert s is not None
        try:
            return await check_store(s, deep=deep, now_ms=ProductionRuntime().now_ms, gc_options=gc_options)
        finally:
            if store is None:
                await s.aclose()

    return trio.run(main)
