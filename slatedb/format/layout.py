"""The object-key layout of a database root: the one place that spells the keys (the official
engine's layout, spec/format/format.md).

::

    manifest/<id:020>.manifest          the manifest versions (sequenced, boundary below)
    wal/<id:020>.sst                    WAL SSTs (and 0-byte fences)
    compacted/<ULID>.sst                L0 and sorted-run SSTs
    compactions/<id:020>.compactions    the compactor's state (sequenced)
    compactions/failed/<ULID>.json      why a compaction failed (ours: the format has no field)
    gc/manifest.boundary                GC boundary files (RFC 004)
    gc/compactions.boundary
"""

from __future__ import annotations

import functools

from ulid import ULID

MANIFEST_DIR = "manifest/"
MANIFEST_SUFFIX = ".manifest"
MANIFEST_BOUNDARY_KEY = "gc/manifest.boundary"
WAL_DIR = "wal/"
WAL_SUFFIX = ".sst"
COMPACTED_DIR = "compacted/"
SST_SUFFIX = ".sst"
COMPACTIONS_DIR = "compactions/"
COMPACTIONS_SUFFIX = ".compactions"
COMPACTIONS_BOUNDARY_KEY = "gc/compactions.boundary"
FAILED_REASONS_DIR = "compactions/failed/"
GC_DIR = "gc/"
#: Every directory of a root (a destroy deletes these, nothing else).
DB_DIRECTORIES = (MANIFEST_DIR, WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR, GC_DIR)


@functools.lru_cache(maxsize=16384, typed=True)  # a pure function, called at every read of a sequenced file
def sequenced_key(directory: str, file_id: int, suffix: str) -> str:
    """``<directory><id:020><suffix>``: the name of a sequenced file (manifest, WAL, compactions)."""
    assert 0 <= file_id < 2**64, file_id
    return f"{directory}{file_id:020d}{suffix}"


@functools.lru_cache(maxsize=8192)  # a pure function of strings, called for every listed key of every poll
def parse_id(key: str, directory: str, suffix: str) -> int | None:
    """The id of ``<directory><id:020><suffix>`` (twenty ASCII digits); None for any other name
    (temp files, digits of other scripts, and twenty digits past the u64 range: no SlateDB id,
    and no id this engine could write after it)."""
    if not (key.startswith(directory) and key.endswith(suffix)):
        return None
    digits = key[len(directory) : len(key) - len(suffix)]
    if len(digits) != 20 or not (digits.isascii() and digits.isdigit()) or int(digits) >= 2**64:
        return None
    return int(digits)


def manifest_key(manifest_id: int) -> str:
    return sequenced_key(MANIFEST_DIR, manifest_id, MANIFEST_SUFFIX)


def wal_key(wal_id: int) -> str:
    return sequenced_key(WAL_DIR, wal_id, WAL_SUFFIX)


def compactions_key(compactions_id: int) -> str:
    return sequenced_key(COMPACTIONS_DIR, compactions_id, COMPACTIONS_SUFFIX)


@functools.lru_cache(maxsize=16384)  # ULIDs are immutable: the text of an equal one is the same
def ulid_text(u: ULID) -> str:
    """``str(u)``, remembered: the ``ulid`` package encodes the 26 characters in Python (about
    2 µs), and the same SST ids are named again and again (keys, events, checks)."""
    return str(u)


def sst_key(sst_id: ULID) -> str:
    return f"{COMPACTED_DIR}{ulid_text(sst_id)}{SST_SUFFIX}"


@functools.lru_cache(maxsize=8192)  # ULIDs are immutable: every caller may share one
def parse_sst_ulid(key: str) -> ULID | None:
    """The ULID of ``compacted/<ULID>.sst``; None for any other name."""
    name = key[len(COMPACTED_DIR):]
    if not (key.startswith(COMPACTED_DIR) and name.endswith(SST_SUFFIX) and "/" not in name):
        return None
    try:
        return ULID.from_str(name[: -len(SST_SUFFIX)])
    except ValueError:
        return None


def failed_reason_key(compaction_id: ULID) -> str:
    return f"{FAILED_REASONS_DIR}{compaction_id}.json"
