"""Databases under roots of one bucket: a process's faulty view of one database root.

Trace keys carry the root (``parent/...``), and ``open_url`` stays in the world (a clone
reaching its parent). The world (the gc and rescale scenarios') gives each process its clock
(``clock_of``), its store stream (``choices``), the fault mix (``faults``) and keeps the
stores it made (``stores``) to heal them all at once.
"""

from __future__ import annotations

from typing import Any, Coroutine

from slatedb.objstore.base import OVERWRITE, GetResult, ObjectMeta, PutMode
from slatedb.objstore.memory import MemoryStore

from sim.world.store import SimObjectStore


class RootedStore(SimObjectStore):
    """A process's faulty view of one database root; trace keys carry the root (``parent/...``),
    and ``open_url`` stays in the world (a clone reaching its parent)."""

    def __init__(self, world: Any, process: str, url: str) -> None:
        self.world = world
        self.root = url[len("memory://sim/"):].strip("/") + "/"
        rt_clock = world.clock_of(process)
        inner = MemoryStore(world.bucket, rt_clock, root=self.root, url=url)
        super().__init__(inner, world.choices.stream("store", process, url), world.trace, process=process,
                         faults=world.faults)
        self.faults_enabled = not world.healed
        world.stores.append(self)

    def open_url(self, url: str):
        return self.world.store(self.process, url)

    # as SimObjectStore's: ``_op``'s coroutine, for the caller to await

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> Coroutine[Any, Any, GetResult]:
        return self._op("get", self.root + key, lambda: self.inner.get_now(key, byte_range), range=byte_range)

    def head(self, key: str) -> Coroutine[Any, Any, ObjectMeta]:
        return self._op("head", self.root + key, lambda: self.inner.head_now(key))

    def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> Coroutine[Any, Any, ObjectMeta]:
        return self._op("put", self.root + key, lambda: self.inner.put_now(key, data, mode), mode=str(mode),
                        size=len(data))

    def list(self, prefix: str = "") -> Coroutine[Any, Any, list[ObjectMeta]]:
        return self._op("list", self.root + prefix, lambda: self.inner.list_now(prefix))

    def delete(self, key: str) -> Coroutine[Any, Any, None]:
        return self._op("delete", self.root + key, lambda: self.inner.delete_now(key))

    async def copy(self, src_key: str, dst_key: str) -> ObjectMeta:
        def apply() -> ObjectMeta:
            return self.inner.put_now(dst_key, self.inner.get_now(src_key).data, OVERWRITE)

        return await self._op("copy", self.root + src_key, apply, dst=dst_key)
