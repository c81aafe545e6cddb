"""Handles on an open database are not values: pickling one raises a ``TypeError`` that says so.

A ``Db``, ``DbReader`` or snapshot (sync or ``slatedb.aio``) handed to another process
(``multiprocessing``, ``concurrent.futures.ProcessPoolExecutor``, a Spark closure) or copied
(``copy.copy``) raised "cannot pickle '_thread.lock' object", which names none of them; the other
process must open the database itself.
"""

from __future__ import annotations

from typing import NoReturn


class Unpicklable:
    __slots__ = ()

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError(
            f"cannot pickle a slatedb {type(self).__name__}: it is a handle on a database open in this process; "
            "give the other process the database's URL (and settings) and open it there (a DbReader reads "
            "beside the writer)")
