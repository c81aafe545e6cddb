"""The write-ahead log: ``wal/<id:020>.sst`` objects, writer fencing and replay.

Protocol and invariants: ``spec/protocols/wal-fencing.md`` (FENCE-1..4, DUR-1); model:
``models/wal_fencing.pml``.
"""

from .writer import WAL_DIR, WalWriter, list_wal_ids, replay_wal, wal_key

__all__ = ["WAL_DIR", "WalWriter", "list_wal_ids", "replay_wal", "wal_key"]
