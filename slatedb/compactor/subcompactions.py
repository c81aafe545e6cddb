"""Splitting one compaction into subcompactions (key ranges), as the official worker does.

Anchor keys are sampled from the input SSTs' indexes (at most :data:`MAX_ANCHORS_PER_SST` per
SST, evenly spread over its blocks); each anchor carries an equal share of its SST's size. The
anchors are walked in key order and a range is closed at the first anchor where the bytes
accumulated since the last cut reach the target ``max(total_bytes / max_subcompactions, largest
input SST)``. Ranges are ``(-inf, b1)``, ``[b1, b2)``, ..., ``[bk, +inf)``: they tile the key
space without overlap (COMPACT-6), and every version of a key falls in exactly one range.
"""

from __future__ import annotations

from typing import Sequence

import attrs

from slatedb.errors import InvalidArgumentError
from slatedb.format.types import BytesRange

from .lifecycle import make_range

MAX_ANCHORS_PER_SST = 128


@attrs.frozen
class InputSst:
    """What the planner needs of one input SST view: its size and its index's block first keys
    clipped to the view (empty keys and keys outside the view removed)."""

    size_bytes: int
    anchors: tuple[bytes, ...]


def sample(first_keys: Sequence[bytes], limit: int = MAX_ANCHORS_PER_SST) -> tuple[bytes, ...]:
    keys = [k for k in first_keys if k]
    if len(keys) <= limit:
        return tuple(keys)
    step = len(keys) / limit
    return tuple(keys[int(i * step)] for i in range(limit))


def target_bytes(inputs: Sequence[InputSst], max_subcompactions: int) -> int:
    total = sum(i.size_bytes for i in inputs)
    largest = max((i.size_bytes for i in inputs), default=0)
    return max(-(-total // max_subcompactions), largest, 1)


def plan_boundaries(inputs: Sequence[InputSst], max_subcompactions: int) -> list[bytes]:
    """The cut keys ``b1 < b2 < ... < bk`` (at most ``max_subcompactions - 1`` of them)."""
    if max_subcompactions < 1:
        raise InvalidArgumentError(f"max_subcompactions must be >= 1, got {max_subcompactions}")
    target = target_bytes(inputs, max_subcompactions)
    weighted: list[tuple[bytes, float]] = []
    for sst in inputs:
        if sst.anchors:
            share = sst.size_bytes / len(sst.anchors)
            weighted += [(a, share) for a in sst.anchors]
    weighted.sort(key=lambda t: t[0])
    cuts: list[bytes] = []
    acc = 0.0
    for key, share in weighted:
        if len(cuts) >= max_subcompactions - 1:
            break
        if acc >= target and (not cuts or key > cuts[-1]):
            cuts.append(key)
            acc = 0.0
        acc += share
    return cuts


def plan_ranges(inputs: Sequence[InputSst], max_subcompactions: int) -> tuple[BytesRange, ...]:
    cuts = plan_boundaries(inputs, max_subcompactions)
    bounds: list[bytes | None] = [None, *cuts, None]
    return tuple(make_range(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1))
