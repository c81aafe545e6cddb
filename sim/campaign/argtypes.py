"""argparse types shared by the simulator's commands (``sim`` and ``sim mutate``): whole numbers
with a floor, finite numbers above or at least 0, each refusing bad input with argparse's usage
and exit 2."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole(minimum: int, what: str = "") -> Callable[[str], int]:
    """argparse type: a whole number at least ``minimum`` (``what``: what that minimum means)."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}{what}, not {n}")
        return n
    return parse


def number(positive: bool, what: str = "") -> Callable[[str], float]:
    """argparse type: a finite number, above 0 (``positive``) or at least 0."""
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(x) or x < 0 or (positive and x == 0):
            raise argparse.ArgumentTypeError(f"must be {'above' if positive else 'at least'} 0{what}, not {text}")
        return x
    return parse
