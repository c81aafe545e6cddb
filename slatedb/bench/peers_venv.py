"""The venv holding the embedded C-backed engines the Db benchmark compares with: LevelDB
(``plyvel``), RocksDB (``rocksdict``) and LMDB (``lmdb``), pinned, installed by the benchmark on
first use (like the official wheel's venv, :mod:`slatedb.bench.official_venv`) and reused. Each
peer runs in a child process of its own (``db_workload_peers.py --engine NAME``) with ``python -I``.
"""

from __future__ import annotations

from pathlib import Path

from slatedb.bench.official_venv import CACHE_DIR, ensure_venv

#: Engine -> the pinned requirement that provides it.
PEERS: dict[str, str] = {"plyvel": "plyvel==1.5.1", "rocksdict": "rocksdict==0.3.29", "lmdb": "lmdb==3.0.0"}
VENV_DIR = CACHE_DIR / "peers-venv"


def ensure_peers_venv() -> Path:
    """Create (once, under a lock) the peers' venv; return its python."""
    reqs = sorted(PEERS.values())
    marker = VENV_DIR / (".installed-" + "-".join(r.replace("==", "-") for r in reqs))
    return ensure_venv(VENV_DIR, reqs, marker, CACHE_DIR / "peers-venv.lock")
