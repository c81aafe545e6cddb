"""The garbage report: every object under the root that nothing needs (not the latest manifest
or one an active checkpoint pins, no SST of those manifests or of an in-flight compaction, no WAL
object GC keeps, not the latest ``.compactions``, no boundary file), with its age and whether GC,
run with ``options``, deletes it. GC's own rules decide (:mod:`slatedb.gc.retention`), so the
report says what GC *will* do, not what it should.

Objects outside SlateDB's directories (``manifest/ wal/ compacted/ compactions/ gc/``) are
reported as never collected: GC does not look at them."""

from __future__ import annotations

from ulid import ULID

from slatedb.config import GarbageCollectorDirectoryOptions, GarbageCollectorOptions
from slatedb.format.layout import (
    COMPACTED_DIR,
    COMPACTIONS_BOUNDARY_KEY,
    COMPACTIONS_DIR,
    COMPACTIONS_SUFFIX,
    DB_DIRECTORIES,
    MANIFEST_BOUNDARY_KEY,
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    SST_SUFFIX,
    WAL_DIR,
    WAL_SUFFIX,
    compactions_key,
    manifest_key,
    parse_id,
    ulid_text,
)
from slatedb.gc.retention import in_flight_sst_ids, manifest_sst_ids, sst_ulid_cutoff_ms, wal_kept
from slatedb.objstore.base import ObjectMeta

from .image import DbImage
from .report import Garbage
from .rules import active


def _sst_id_str(key: str) -> str | None:
    if key.startswith(COMPACTED_DIR) and key.endswith(SST_SUFFIX):
        return key[len(COMPACTED_DIR):-len(SST_SUFFIX)]
    return None


def _verdict(meta: ObjectMeta, now_ms: int, opts: GarbageCollectorDirectoryOptions | None, directory: str,
             extra_never: str = "", extra_wait: str = "") -> tuple[str, float, str]:
    if opts is None:
        return "never", 0.0, f"GC of {directory} is disabled"
    if opts.dry_run:
        return "never", 0.0, f"GC of {directory} is a dry run"
    if extra_never:
        return "never", 0.0, extra_never
    wait = opts.min_age - (now_ms - meta.last_modified_ms) / 1000
    if wait >= 0:
        return "later", wait, extra_wait or f"min_age {opts.min_age:g} s"
    if extra_wait:
        return "later", 0.0, extra_wait
    return "now", 0.0, ""


def garbage(img: DbImage, now_ms: int, options: GarbageCollectorOptions | None = None) -> list[Garbage]:
    opts = options or GarbageCollectorOptions()
    m = img.latest
    out: list[Garbage] = []
    if m is None:
        return out
    now_s = now_ms // 1000
    pinned_ids = {c.manifest_id for c in active(m, now_s)}
    pinned = [img.manifests[i] for i in pinned_ids if i in img.manifests]
    needed_ssts = {ulid_text(s) for s in manifest_sst_ids(m)}
    for p in pinned:
        needed_ssts |= {ulid_text(s) for s in manifest_sst_ids(p)}
    in_flight = {ulid_text(s) for s in in_flight_sst_ids(img.compactions, [m, *pinned])}
    cutoff_ms = sst_ulid_cutoff_ms(m, img.compactions)
    wal_ids = sorted(i for i in (parse_id(k, WAL_DIR, WAL_SUFFIX) for k in img.listing) if i is not None)
    newest_wal = wal_ids[-1] if wal_ids else None
    for key, meta in sorted(img.listing.items()):
        age_s = max(0.0, (now_ms - meta.last_modified_ms) / 1000)

        def add(kind: str, verdict: tuple[str, float, str]) -> None:
            out.append(Garbage(key, kind, meta.size_bytes, age_s, verdict[0], verdict[1], verdict[2]))

        sst = _sst_id_str(key)
        if sst is not None:
            if sst in needed_ssts or sst in in_flight:
                continue
            never = "" if img.compactions is not None else "no .compactions file: GC deletes no SST without one"
            wait = ""
            try:
                if ULID.from_str(sst).milliseconds >= cutoff_ms and not never:
                    wait = "newer than the ULID cutoff (the newest L0 and the oldest compaction)"
            except ValueError:
                never = "not a ULID name"
            add("sst", _verdict(meta, now_ms, opts.compacted_options, COMPACTED_DIR, never, wait))
            continue
        mid = parse_id(key, MANIFEST_DIR, MANIFEST_SUFFIX)
        if mid is not None:
            if mid == img.latest_id or mid in pinned_ids or mid > img.latest_id:
                continue
            add("manifest", _verdict(meta, now_ms, opts.manifest_options, MANIFEST_DIR))
            continue
        wid = parse_id(key, WAL_DIR, WAL_SUFFIX)
        if wid is not None:
            if wid == newest_wal or wal_kept(wid, m, pinned):
                continue
            fence = meta.size_bytes == 0
            add("wal fence" if fence else "wal",
                _verdict(meta, now_ms, opts.wal_fence_options if fence else opts.wal_options,
                         "wal/ fences (wal_fence_options)" if fence else WAL_DIR))
            continue
        cid = parse_id(key, COMPACTIONS_DIR, COMPACTIONS_SUFFIX)
        if cid is not None:
            if img.compactions_ids and cid >= img.compactions_ids[-1]:
                continue
            add("compactions", _verdict(meta, now_ms, opts.compactions_options, COMPACTIONS_DIR))
            continue
        if key in (MANIFEST_BOUNDARY_KEY, COMPACTIONS_BOUNDARY_KEY):
            continue
        if key.startswith(COMPACTIONS_DIR + "failed/"):
            continue  # why a compaction failed: ours, kept for the operator
        inside = any(key.startswith(d) for d in DB_DIRECTORIES)
        add("unknown", ("never", 0.0, "not a SlateDB object name" if inside else "outside SlateDB's directories"))
    return out


__all__ = ["garbage", "manifest_key", "compactions_key"]
