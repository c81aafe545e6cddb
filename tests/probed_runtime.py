"""A production runtime that records the coverage probes its engine reports (production ignores
them): for unit tests asserting that a rare branch was taken (sim/world/probes.py UNIT_REACHED)."""

from __future__ import annotations

from slatedb.runtime.production import ProductionRuntime


class ProbedRuntime(ProductionRuntime):
    def __init__(self) -> None:
        super().__init__("test")
        self.hits: list[str] = []

    def probe(self, name: str) -> None:
        self.hits.append(name)
