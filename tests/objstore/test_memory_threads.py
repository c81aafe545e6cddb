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

from slatedb.errors import ObjectAlreadyExistsError, PreconditionFailedError
from slatedb.objstore import CREATE_IF_ABSENT, PutMode
from slatedb.objstore.memory import MemoryBucket, MemoryStore

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
