"""What ``slatedb check`` reports: findings (an invariant of ``spec/protocols/`` broken by a named
object), garbage (objects nothing references, with their age and whether GC will collect them)
and a few counts. Plain frozen values; :meth:`CheckReport.lines` and :meth:`CheckReport.to_json`
are the two renderings the CLI prints."""

from __future__ import annotations

import attrs


@attrs.frozen
class Finding:
    """One broken invariant: ``invariant`` is its spec id (``GC-4``), ``object`` the key of the
    object at fault (relative to the database root, or a URL for another database)."""

    invariant: str
    object: str
    message: str

    def line(self) -> str:
        return f"{self.invariant} {self.object}: {self.message}"

    def to_json(self) -> dict:
        return {"invariant": self.invariant, "object": self.object, "message": self.message}


@attrs.frozen
class Garbage:
    """An object no manifest, checkpoint, compaction or boundary needs. ``collectable`` says
    whether GC (with the options the check assumed) deletes it: ``"now"`` (old enough),
    ``"later"`` (once ``min_age`` passed: ``in_s`` seconds), or ``"never"`` with ``why``."""

    key: str
    kind: str
    size_bytes: int
    age_s: float
    collectable: str
    in_s: float = 0.0
    why: str = ""

    def line(self) -> str:
        when = {"now": "GC collects it now", "later": f"GC collects it in {self.in_s:.0f} s",
                "never": f"GC never collects it: {self.why}"}[self.collectable]
        extra = f" ({self.why})" if self.why and self.collectable != "never" else ""
        return f"garbage {self.key} ({self.kind}, {self.size_bytes} bytes, age {self.age_s:.0f} s): {when}{extra}"

    def to_json(self) -> dict:
        return attrs.asdict(self)


@attrs.frozen
class CheckReport:
    url: str
    findings: tuple[Finding, ...]
    garbage: tuple[Garbage, ...]
    latest_manifest_id: int
    deep: bool
    counts: dict = attrs.field(factory=dict, eq=False)

    @property
    def healthy(self) -> bool:
        return not self.findings

    def invariants(self) -> set[str]:
        return {f.invariant for f in self.findings}

    def about(self, invariant: str) -> list[Finding]:
        return [f for f in self.findings if f.invariant == invariant]

    def lines(self, *, garbage: bool = True) -> list[str]:
        out = [f.line() for f in self.findings]
        if garbage:
            out += [g.line() for g in self.garbage]
        never = sum(1 for g in self.garbage if g.collectable == "never")
        summary = (f"{self.url}: manifest {self.latest_manifest_id}, "
                   f"{'healthy' if self.healthy else f'{len(self.findings)} finding(s)'}"
                   f"{' (deep)' if self.deep else ''}; {len(self.garbage)} garbage object(s)"
                   f"{f', {never} GC never collects' if never else ''}; "
                   + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())))
        return out + [summary]

    def to_json(self, garbage: bool = True) -> dict:
        """The report as JSON; ``garbage=False`` (``--no-garbage``) leaves the garbage list out."""
        out = {"url": self.url, "healthy": self.healthy, "deep": self.deep,
               "latest_manifest_id": self.latest_manifest_id,
               "findings": [f.to_json() for f in self.findings],
               "garbage": [g.to_json() for g in self.garbage], "counts": dict(self.counts)}
        if not garbage:
            del out["garbage"]
        return out

    def describe(self) -> str:
        """The findings, one per line (for assertion messages)."""
        return "\n".join(f.line() for f in self.findings) or "healthy"
