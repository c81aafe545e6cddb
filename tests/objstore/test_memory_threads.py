"""The memory store shared by two threads (a sync ``Db``'s engine thread and a compactor or
admin on the caller's): a conditional put's check and update are one step.

Before the bucket's lock, ``put_now`` read the key, then called the clock and the ETag counter
(Python code: the interpreter may switch threads there), then stored the object. Two threads
creating one manifest id could both succeed, the later overwriting the earlier. That is how
``tests/db/test_db.py::test_writes_wait_while_l0_is_full_and_resume_when_the_compactor_catches_up``
once failed with ``CompactorEpochError: .compactions 65 already carries our epoch 13``: the
compactor's ``compactor_epoch`` claim (manifest N+1) was overwritten by the Db thread's L0 flush
(manifest N+1 with the old epoch), so the next round's compactor claimed the same epoch again
and met its predecessor's ``.compactions`` file. The interleaving is forced here: the first
thread's clock call runs the second thread's create to completion (or until it blocks).
"""

from __future__ import annotations

import threading

import trio

from slatedb.checkpoint import CheckpointOptions, create_checkpoint
from slatedb.compactor import Compactor
from slatedb.config import Settings
from slatedb.errors import ObjectAlreadyExistsError, PreconditionFailedError
from slatedb.format.types import ManifestV2
from slatedb.manifest.store import ManifestStore
from slatedb.objstore import CREATE_IF_ABSENT, OVERWRITE, PutMode
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime

KEY = "manifest/00000000000000000002.manifest"


def _race(bucket: MemoryBucket, mode: PutMode, first: bytes, second: bytes) -> tuple[list[str], MemoryStore]:
    """Thread A's put of ``first`` calls the clock between its check and its update; that call
    starts thread B's put of ``second`` and waits for it (at most 0.3 s: with the lock, B blocks
    until A is done). Returns each put's outcome, in completion order."""
    outcomes: list[str] = []
    b: list[threading.Thread] = []

    def put(data: bytes, who: str) -> None:
        try:
            store.put_now(KEY, data, mode)
            outcomes.append(f"{who} ok")
        except (ObjectAlreadyExistsError, PreconditionFailedError) as e:
            outcomes.append(f"{who} {type(e).__name__}")

    def clock() -> int:
        if not b:
            b.append(threading.Thread(target=put, args=(second, "B")))
            b[0].start()
            b[0].join(0.3)
        return 0

    store = MemoryStore(bucket, clock)
    put(first, "A")
    b[0].join(5)
    return outcomes, store


def test_two_threads_cannot_both_create_one_key() -> None:
    outcomes, store = _race(MemoryBucket(), CREATE_IF_ABSENT, b"claim epoch 13", b"flush with epoch 12")
    assert sorted(outcomes) == ["A ok", "B ObjectAlreadyExistsError"], outcomes
    assert store.get_now(KEY).data == b"claim epoch 13"


def test_two_threads_cannot_both_update_one_version() -> None:
    bucket = MemoryBucket()
    etag = MemoryStore(bucket, lambda: 0).put_now(KEY, b"v0").etag
    outcomes, store = _race(bucket, PutMode.update_if_match(etag), b"A's update", b"B's update")
    assert sorted(outcomes) == ["A ok", "B PreconditionFailedError"], outcomes
    assert store.get_now(KEY).data == b"A's update"


def test_the_lock_is_not_part_of_a_bucket_s_equality() -> None:
    assert MemoryBucket() == MemoryBucket()


class _RacyStore(MemoryStore):
    """Remembers the key of the put in progress, for the clock to decide when to interleave."""

    current_key = ""

    def put_now(self, key, data, mode=OVERWRITE):
        self.current_key = key
        return super().put_now(key, data, mode)


def test_a_compactor_never_meets_its_own_epoch_through_a_lost_manifest_update() -> None:
    """The reported failure end to end. Thread A (the Db's thread) commits a manifest (a
    checkpoint, epoch unchanged); between its create's check and its update, thread B (a
    compactor starting on the caller's thread, as ``compact_all_l0`` does) claims the next
    compactor epoch in that same manifest id and writes ``.compactions`` with it. Without the
    lock A's manifest then overwrites B's claim, and the next compactor computes B's epoch again
    and meets B's ``.compactions``: ``CompactorEpochError: .compactions N already carries our
    epoch E``. With the lock B's claim waits, conflicts, and lands above A's manifest."""
    bucket = MemoryBucket()
    trio.run(ManifestStore(MemoryStore(bucket, lambda: 0), ProductionRuntime("setup")).create_initial,
             ManifestV2(initialized=True))
    b: list[threading.Thread] = []
    epochs: list[int] = []

    def compactor_starts() -> None:
        epochs.append(trio.run(Compactor(MemoryStore(bucket, lambda: 0), ProductionRuntime("c1"), Settings()).start))

    def clock() -> int:
        if not b and store.current_key.startswith("manifest/"):
            b.append(threading.Thread(target=compactor_starts))
            b[0].start()
            b[0].join(0.3)  # with the lock, B waits for A's update
        return 0

    store = _RacyStore(bucket, clock)
    trio.run(create_checkpoint, ManifestStore(store, ProductionRuntime("writer")), ProductionRuntime("writer"),
             CheckpointOptions(lifetime_s=60))
    b[0].join(10)
    assert epochs == [1]
    # The next compactor takes the next epoch (it raised CompactorEpochError without the lock).
    assert trio.run(Compactor(MemoryStore(bucket, lambda: 0), ProductionRuntime("c2"), Settings()).start) == 2
