"""The simulated object store: the memory backend behind a seeded fault layer.

Every operation is a request that travels to the "server", applies atomically there, and
travels back. The layer draws, from its own seeded random stream only, how long each leg takes
on the virtual clock and what goes wrong:

- ``transient``: the request fails before it applies (nothing changed);
- ``ambiguous``: the request applies, but the caller gets a transient error anyway (the reply
  was lost). This is the case that makes retried conditional puts dangerous;
- ``stall``: one leg takes much longer than usual (seconds to minutes of virtual time).

Every decision and every outcome is recorded in the trace, so a run can be replayed and read.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Coroutine, TypeVar

import attrs
import trio

from slatedb.errors import ObjectStoreError, TransientObjectStoreError
from slatedb.objstore.base import OVERWRITE, GetResult, ObjectMeta, ObjectStore, PutMode
from slatedb.objstore.memory import MemoryStore

from sim.world import fastclock
from sim.world.choices import ChoiceStream, boolean, outcome
from sim.world.trace import Trace, format_of

T = TypeVar("T")


@attrs.frozen
class StoreFaults:
    """Fault rates of one simulated store view. All zero means a perfect (but slow) store."""

    latency_min_s: float = 0.001
    latency_max_s: float = 0.020
    transient_rate: float = 0.0
    ambiguous_rate: float = 0.0
    stall_rate: float = 0.0
    stall_max_s: float = 0.0

    def __attrs_post_init__(self) -> None:
        assert 0 <= self.latency_min_s <= self.latency_max_s, self
        for rate in (self.transient_rate, self.ambiguous_rate, self.stall_rate):
            assert 0.0 <= rate <= 1.0, self
        assert self.transient_rate + self.ambiguous_rate <= 1.0, self
        assert self.stall_max_s >= 0, self

    @staticmethod
    def swarm(rng: random.Random) -> "StoreFaults":
        """A random subset of faults with random rates (swarm testing): each seed stresses
        a different mix, which finds more bugs than every fault at a fixed rate."""
        on = lambda: boolean(rng, 0.5)  # noqa: E731
        return StoreFaults(
            latency_min_s=0.0005,
            latency_max_s=rng.choice([0.002, 0.02, 0.2]),
            transient_rate=rng.uniform(0.01, 0.2) if on() else 0.0,
            ambiguous_rate=rng.uniform(0.01, 0.1) if on() else 0.0,
            stall_rate=rng.uniform(0.001, 0.02) if on() else 0.0,
            stall_max_s=rng.choice([5.0, 60.0, 900.0]),
        )


#: A request's fate by :func:`sim.world.choices.outcome` index (0, the simplest, is no fault).
_DECISIONS = ("ok", "transient", "ambiguous")

#: A request event's (kind, rendering format) by (op, its extra fields' names); the result's
#: and lost reply's formats (:meth:`sim.world.trace.Trace.emit`).
_REQUEST: dict[tuple[str, ...], tuple[str, str]] = {}
_RESULT = format_of("n", "outcome")
_REPLY_LOST = format_of("n")


class ProcessCrashed(BaseException):
    """Raised into a simulated process whose process crashed: every store call fails at once.

    A ``BaseException`` so that no retry loop or ``except Exception`` of the engine can absorb
    it, and it passes through shielded sections (a crash cannot be shielded against).
    """


class SimObjectStore(ObjectStore):
    """A fault-injecting view of a shared :class:`MemoryStore`, for one simulated process."""

    def __init__(
        self,
        inner: MemoryStore,
        rng: random.Random,
        trace: Trace,
        *,
        process: str,
        faults: StoreFaults = StoreFaults(),
        key_faults: tuple[tuple[str, StoreFaults], ...] = (),
    ) -> None:
        self.inner = inner
        self.url = inner.url
        self.rng = rng
        self.trace = trace
        self.process = process
        self.faults = faults
        #: Fault rates for keys under these prefixes instead of ``faults`` (e.g. the seqmeta
        #: scenario's ``gc/`` boundary files); the first matching prefix wins.
        self.key_faults = key_faults
        self._request_faults = faults  # the rates of the request being decided
        #: When False, the layer injects nothing but latency (used to heal the world).
        self.faults_enabled = True
        #: Set by :meth:`crash`: the process is dead; requests already sent still land.
        self.crashed = False

    def crash(self) -> None:
        """The process dies: later calls raise :class:`ProcessCrashed`; a request already on the
        wire still applies at the server, but its reply is never seen."""
        self.crashed = True
        self.trace.record(self.process, "crash")

    def _faults_for(self, key: str) -> StoreFaults:
        for prefix, faults in self.key_faults:
            if key.startswith(prefix):
                return faults
        return self.faults

    def _leg_s(self) -> float:
        f = self._request_faults
        delay = self.rng.uniform(f.latency_min_s, f.latency_max_s)
        if self.faults_enabled and f.stall_rate and boolean(self.rng, f.stall_rate):
            delay += self._stall_s(f)
        return delay

    def _stall_s(self, f: StoreFaults) -> float:
        stall_s = self.rng.uniform(0.0, f.stall_max_s)
        self.trace.record(self.process, "fault.stall", seconds=round(stall_s, 6))
        return stall_s

    async def _op(self, op: str, key: str, apply: Callable[[], T], **fields: Any) -> T:
        if self.crashed:
            raise ProcessCrashed(self.process)
        trace = self.trace
        process = self.process
        # trace.next_request(process), inline: one sequence per process, over all its stores
        requests = trace._requests
        n = requests[process] = requests.get(process, 0) + 1
        f = self._request_faults = self._faults_for(key) if self.key_faults else self.faults
        rng = self.rng
        # a ChoiceStream's own draws called directly (what outcome() and boolean() call for one)
        streamed = isinstance(rng, ChoiceStream)
        # the request's fate, then self._leg_s() twice, inline while _leg_s is this class's
        # (the same draws in the same order: the outcome, then each leg's latency and stall)
        if self.faults_enabled:
            rates = (f.transient_rate, f.ambiguous_rate)
            decision = _DECISIONS[rng.outcome(rates) if streamed else outcome(rng, rates)]
        else:
            decision = "ok"
        if type(self)._leg_s is _LEG_S:
            lo, hi = f.latency_min_s, f.latency_max_s
            stall = f.stall_rate if self.faults_enabled else 0.0
            out_s = rng.uniform(lo, hi)
            if stall and (rng.boolean(stall) if streamed else boolean(rng, stall)):
                out_s += self._stall_s(f)
            back_s = rng.uniform(lo, hi)
            if stall and (rng.boolean(stall) if streamed else boolean(rng, stall)):
                back_s += self._stall_s(f)
        else:
            out_s, back_s = self._leg_s(), self._leg_s()
        # trace.record(process, f"store.{op}", n=n, key=key, decision=decision, **fields), its
        # kind and format looked up by the op and its extra fields' names
        got = _REQUEST.get((op, *fields))
        if got is None:
            got = _REQUEST[(op, *fields)] = (f"store.{op}", format_of("n", "key", "decision", *fields))
        event = {"n": n, "key": key, "decision": decision}
        if fields:
            event.update(fields)
        trace.emit(process, got[0], event, got[1])
        await fastclock.sleep(out_s)
        if decision == "transient":
            trace.emit(process, "store.result", {"n": n, "outcome": "transient-error"}, _RESULT)
            raise TransientObjectStoreError(key, f"simulated transient error on {op}")
        try:
            result = apply()
        except ObjectStoreError as e:
            trace.emit(process, "store.result", {"n": n, "outcome": type(e).__name__}, _RESULT)
            await fastclock.sleep(back_s)
            raise
        trace.emit(process, "store.result", {"n": n, "outcome": _describe(result)}, _RESULT)
        await fastclock.sleep(back_s)
        if self.crashed:
            raise ProcessCrashed(self.process)
        if decision == "ambiguous":
            trace.emit(process, "store.reply-lost", {"n": n}, _REPLY_LOST)
            raise TransientObjectStoreError(key, f"simulated lost reply on {op} (the operation applied)")
        return result

    # The inner store's *_now methods apply with no await, at the moment the request "arrives".
    # get, head, put, list and delete return ``_op``'s coroutine for the caller to await (one
    # frame fewer for every wake-up of a store call to pass through, as ``async def`` adds one).

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> Coroutine[Any, Any, GetResult]:
        return self._op("get", key, lambda: self.inner.get_now(key, byte_range), range=byte_range)

    def head(self, key: str) -> Coroutine[Any, Any, ObjectMeta]:
        return self._op("head", key, lambda: self.inner.head_now(key))

    def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> Coroutine[Any, Any, ObjectMeta]:
        return self._op("put", key, lambda: self.inner.put_now(key, data, mode), mode=str(mode), size=len(data))

    def list(self, prefix: str = "") -> Coroutine[Any, Any, list[ObjectMeta]]:
        return self._op("list", prefix, lambda: self.inner.list_now(prefix))

    def delete(self, key: str) -> Coroutine[Any, Any, None]:
        return self._op("delete", key, lambda: self.inner.delete_now(key))

    async def copy(self, src_key: str, dst_key: str) -> ObjectMeta:
        def apply() -> ObjectMeta:
            got = self.inner.get_now(src_key)
            return self.inner.put_now(dst_key, got.data, OVERWRITE)

        return await self._op("copy", src_key, apply, dst=dst_key)

    def flip_bit(self, key: str) -> int:
        """Flip one random bit of a stored object (bit rot); returns the bit's index."""
        data = bytearray(self.inner.get_now(key).data)
        if not data:
            return -1
        bit = self.rng.randrange(len(data) * 8)
        data[bit // 8] ^= 1 << (bit % 8)
        self.inner.corrupt_now(key, bytes(data))
        self.trace.record(self.process, "fault.bitflip", key=key, bit=bit)
        return bit


#: Stored objects a bit flip may hit: (kind, key prefix, key suffix, weight).
FLIP_CLASSES = (("wal", "wal/", ".sst", 0.35), ("sst", "compacted/", ".sst", 0.35),
                ("manifest", "manifest/", ".manifest", 0.2), ("compactions", "compactions/", ".compactions", 0.1))


@attrs.frozen
class BitFlip:
    """One flipped bit: which object, which bit, and what the format makes of it (``how``):
    ``crc`` (an SST or WAL SST: every block and the metadata carry a CRC32, so the decoder
    raises or reads the same rows), and for the flatbuffers metadata files, decoded by the
    simulator itself before and after: ``detectable`` (the decoder raises), ``silent`` (it
    decodes to a *different* valid object: the format cannot tell) or ``no-op`` (same value)."""

    key: str
    bit: int
    kind: str
    how: str


def flip_one_bit(bucket: Any, rng: random.Random, kind: str) -> BitFlip | None:
    """Flip one random bit of a non-empty stored object of ``kind`` (another kind if there is
    none yet): the newest one (highest key: the latest manifest, the last WAL object -- the
    ones still to be read) half of the time, else any; None when there is nothing to flip."""
    order = [c for c in FLIP_CLASSES if c[0] == kind] + [c for c in FLIP_CLASSES if c[0] != kind]
    for k, prefix, suffix, _w in order:
        keys = sorted(key for key, (data, _m) in bucket.objects.items()
                      if key.startswith(prefix) and key.endswith(suffix) and data)
        if keys:
            key = keys[-1] if boolean(rng, 0.5) else rng.choice(keys)
            before = bucket.objects[key][0]
            bit = rng.randrange(len(before) * 8)
            after = bytearray(before)
            after[bit // 8] ^= 1 << (bit % 8)
            MemoryStore(bucket, lambda: 0).corrupt_now(key, bytes(after))
            return BitFlip(key, bit, k, _how(k, key, before, bytes(after)))
    return None


def _how(kind: str, key: str, before: bytes, after: bytes) -> str:
    if kind in ("wal", "sst"):
        return "crc"
    from slatedb.errors import CorruptionError
    from slatedb.format.compactions import decode_compactions
    from slatedb.format.manifest import decode_manifest_v2

    decode = decode_manifest_v2 if kind == "manifest" else decode_compactions
    try:
        changed = decode(after, key) != decode(before, key)
    except CorruptionError:
        return "detectable"
    return "silent" if changed else "no-op"


_LEG_S = SimObjectStore._leg_s  # _op draws the legs inline while a subclass keeps this one


def _describe(result: object) -> str:
    kind = type(result)  # the exact types first (a store call's results), then any subclass
    if kind is GetResult:
        return f"ok size={len(result.data)} etag={result.meta.etag}"  # type: ignore[attr-defined]
    if kind is ObjectMeta:
        return f"ok etag={result.etag}"  # type: ignore[attr-defined]
    if kind is list:
        return f"ok n={len(result)}"  # type: ignore[arg-type]
    if isinstance(result, ObjectMeta):
        return f"ok etag={result.etag}"
    if isinstance(result, GetResult):
        return f"ok size={len(result.data)} etag={result.meta.etag}"
    if isinstance(result, list):
        return f"ok n={len(result)}"
    return "ok"
