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
    bulk-load/<load ULID>/<name>        a bulk load's open marker and intents (bulk-load.md)
    shards/<load ULID>/<partition:06>-<attempt>-<ULID>/...   a sharded load's shard databases

Nothing else under a root is the database's (:func:`is_db_key`): another database nested below
it, a user's file. A destroy deletes the database's objects only (destroy.md DESTROY-8).
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
#: SlateDB's engine directories of a root (a bulk load adds two more: DB_OBJECT_DIRECTORIES).
DB_DIRECTORIES = (MANIFEST_DIR, WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR, GC_DIR)
LOAD_INTENTS_DIR = "bulk-load/"
SHARDS_DIR = "shards/"
#: Every top-level directory a database's objects (:func:`is_db_key`) lie in: GC's removal of a
#: destroyed database lists these (destroy.md S5), a hard destroy the whole root (H4).
DB_OBJECT_DIRECTORIES = (*DB_DIRECTORIES, LOAD_INTENTS_DIR, SHARDS_DIR)
#: Directories whose every object directly inside (no deeper ``/``) is the database's, whatever
#: its name: besides the names above, an engine's temp or leftover files there (the official
#: engine's local store stages ``<key>#<n>``) are the database's too.
_FLAT_DIRECTORIES = frozenset(d[:-1] for d in (*DB_DIRECTORIES, FAILED_REASONS_DIR))


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


def _is_ulid_text(text: str) -> bool:
    if len(text) != 26:
        return False
    try:
        ULID.from_str(text)
    except ValueError:
        return False
    return True


def _is_shard_name(name: str) -> bool:
    """``<partition:06d>-<attempt>-<ULID>``: a sharded load's shard database (slatedb/spark/sharded.py)."""
    parts = name.split("-")
    return (len(parts) == 3 and len(parts[0]) == 6 and parts[0].isascii() and parts[0].isdigit()
            and parts[1].isascii() and parts[1].isdigit() and _is_ulid_text(parts[2]))


@functools.lru_cache(maxsize=16384)  # a pure function of a string, called for every key a destroy lists
def is_db_key(key: str) -> bool:
    """Is ``key`` (relative to a database root) an object of the database's own layout -- one this
    engine or the official one writes under its root (the module docstring) -- rather than
    something else stored below the root: another database nested there (``b/manifest/...`` of a
    database at ``<root>/b``), a user's file? Destroys delete only these (destroy.md H4, S5,
    DESTROY-8), and only these tell a leftover of a database from a path that is none (H1).

    Objects directly inside ``manifest/``, ``wal/``, ``compacted/``, ``compactions/`` (and its
    ``failed/``), ``gc/``; a bulk load's ``bulk-load/<load ULID>/<name>``; the objects of a sharded
    load's shard databases, ``shards/<load ULID>/<shard>/<an object of the shard's layout>``.
    A database nested at one of these directories (``<root>/wal/x``) keeps its objects: they lie
    one level deeper than ours."""
    directory, sep, name = key.rpartition("/")
    if not sep or not name:
        return False  # a file directly at the root: no SlateDB object lives there
    if directory in _FLAT_DIRECTORIES:
        return True
    parts = key.split("/", 3)
    if parts[0] == LOAD_INTENTS_DIR[:-1]:
        return len(parts) == 3 and _is_ulid_text(parts[1]) and bool(parts[2])
    if parts[0] == SHARDS_DIR[:-1]:
        return len(parts) == 4 and _is_ulid_text(parts[1]) and _is_shard_name(parts[2]) and is_db_key(parts[3])
    return False
