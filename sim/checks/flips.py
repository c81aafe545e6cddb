"""The bit-flip oracle (FLIP-1, docs/simulation.md "Bit flips"): what a flipped bit in a stored
object may do to a run, and what it did."""

from __future__ import annotations

from typing import Any

import attrs

from slatedb.errors import CorruptionError

from sim.world.store import BitFlip
from sim.world.trace import Trace


class FlipOracle:
    """What a flipped bit may do, and what it did.

    After a bit of a stored object flipped (:func:`sim.world.store.flip_one_bit`), a read that
    returns data must still match the model (DUR-1, LIN: unchanged), but a
    :class:`~slatedb.errors.CorruptionError` is an acceptable answer: the process that meets it
    stops (event ``corruption``, counted as ``bitflip.detected``) and the final check skips what
    it cannot read (a database whose manifest or replayed WAL object is damaged cannot be
    opened at all). For an SST or WAL SST, whose every block and metadata carry a CRC32, the
    error must name the flipped object (FLIP-1). A flipped manifest or ``.compactions`` object
    that still *decodes*, to different values, cannot be detected (flatbuffers, no checksum):
    what goes wrong after such a flip is reported as ``bitflip.silent-damage``, not as the
    run's failure. Without a flip, a CorruptionError is a failure as before."""

    def __init__(self) -> None:
        self.flip: BitFlip | None = None
        self.detected: list[str] = []

    def allows(self, e: CorruptionError, process: str, trace: Trace) -> bool:
        """Account for a CorruptionError ``process`` met; False if it must fail the run."""
        if self.flip is None:
            return False
        trace.record(process, "corruption", object=e.object_name, reason=e.reason)
        self.detected.append(e.object_name)
        if self.flip.how == "crc" and e.object_name != self.flip.key:
            raise AssertionError(f"FLIP-1: {process} met corruption in {e.object_name!r} ({e.reason}) but the "
                                 f"flipped object is {self.flip.key!r}") from e
        return True

    def silent(self) -> bool:
        return self.flip is not None and self.flip.how == "silent"


def after_flip(result: Any, flips: FlipOracle | None) -> Any:
    """A run that failed after a flip the format cannot detect (a manifest or .compactions that
    decodes to other values) is counted as silent damage, not as the run's failure."""
    if flips is None:
        return result
    if flips.flip is not None:
        f = flips.flip
        result = attrs.evolve(result, figures={**result.figures, "flip": f"{f.kind}:{f.how}:{f.key}"})
    if result.ok or not flips.silent() or any(v.startswith("AssertionError: FLIP-") for v in result.violations):
        return result
    faults = dict(result.faults, **{"bitflip.silent-damage": 1})
    return attrs.evolve(result, ok=True, faults=faults, violations=(),
                        figures={**result.figures, "silent_damage": result.violations})
