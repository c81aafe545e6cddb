"""The database: the writer's engine (:mod:`.core`) and its synchronous API (:mod:`.sync`).

The asynchronous API with the same shape is :mod:`slatedb.aio`.
"""

from .sync import Db, DbIterator, Snapshot, WriteHandle

__all__ = ["Db", "DbIterator", "Snapshot", "WriteHandle"]
