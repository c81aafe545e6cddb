"""``split_checkpoints``: a manifest's checkpoints at a second, those that still pin and the
others (expired, or a stale writer checkpoint), each in the manifest's order; within a simulated
run the answer for the same manifest object and second is remembered."""

from __future__ import annotations

import uuid

from slatedb.format import memo
from slatedb.format.types import ManifestV2
from slatedb.manifest.checkpoints import active_checkpoints, make_checkpoint, split_checkpoints, writer_checkpoint


def _manifest() -> ManifestV2:
    never = make_checkpoint(uuid.uuid4(), 1, 0)
    soon = make_checkpoint(uuid.uuid4(), 1, 0, lifetime_s=10.0)  # expires after second 10
    stale = writer_checkpoint(uuid.uuid4(), 1, epoch=1, now_ms=0)  # the writer is at epoch 2
    later = make_checkpoint(uuid.uuid4(), 1, 0, lifetime_s=100.0)
    return ManifestV2(initialized=True, writer_epoch=2, checkpoints=(never, soon, stale, later))


def test_the_checkpoints_that_pin_and_the_others_in_order() -> None:
    m = _manifest()
    never, soon, stale, later = m.checkpoints
    assert split_checkpoints(m, 5) == ((never, soon, later), (stale,))
    assert split_checkpoints(m, 11) == ((never, later), (soon, stale))
    assert active_checkpoints(m, 11) == (never, later)


def test_remembered_within_a_run_by_manifest_object_and_second() -> None:
    m = _manifest()
    never, soon, stale, later = m.checkpoints
    with memo.remembering():
        first = split_checkpoints(m, 5)
        assert split_checkpoints(m, 5) is first
        assert split_checkpoints(m, 11) == ((never, later), (soon, stale))  # another second
        other = ManifestV2(initialized=True, writer_epoch=1, checkpoints=m.checkpoints)  # an equal-looking other
        assert split_checkpoints(other, 5) == ((never, soon, stale, later), ())
    assert split_checkpoints(m, 5) is not first  # the run ended: worked out again
