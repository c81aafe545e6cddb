"""What a reader may see: per key, the set of values it may return (``None`` = absent).

A key is certain (one candidate) until something makes it uncertain: a write with a TTL that has
already run out (ours never returns an expired row; the official engine filters expiry against
its own logical clock and may still return it: spec/protocols/writer.md), or a writer killed with
writes that were not yet durable (each of them may or may not have survived). A read of a key
uncertain because of a kill resolves it to what the engine returned; an expired row stays
uncertain until overwritten."""

from __future__ import annotations

import copy

import attrs

Value = str | None


@attrs.define
class Model:
    values: dict[str, Value] = attrs.field(factory=dict)
    maybe: dict[str, set] = attrs.field(factory=dict)  # uncertain keys -> candidates
    expiring: set[str] = attrs.field(factory=set)
    since_durable: dict[str, list] = attrs.field(factory=dict)
    at_durable: dict[str, set] = attrs.field(factory=dict)
    #: Keys whose crash uncertainty a read resolved: what survived a kill may differ between
    #: twin stores, so they are compared between engines again only once written again.
    resolved: set[str] = attrs.field(factory=set)

    def candidates(self, key: str) -> set:
        if key in self.maybe:
            return set(self.maybe[key])
        return {self.values.get(key)}

    def write(self, key: str, value: Value, *, expired: bool = False) -> None:
        if key not in self.since_durable:
            self.at_durable.setdefault(key, self.candidates(key))
        self.since_durable.setdefault(key, []).append(value)
        self.values[key] = value
        self.maybe.pop(key, None)
        self.expiring.discard(key)
        self.resolved.discard(key)
        if expired:
            self.maybe[key] = {value, None}
            self.expiring.add(key)

    def durable(self) -> None:
        self.since_durable.clear()
        self.at_durable.clear()

    def crash(self) -> None:
        """A writer died: each write since the last durable point may be lost (a prefix is kept)."""
        for key, written in self.since_durable.items():
            cands = set(self.at_durable.get(key, {None})) | set(written)
            if key in self.expiring:
                cands.add(None)
            self.maybe[key] = cands
        self.durable()

    def observe(self, key: str, got: Value) -> bool:
        """Is ``got`` allowed for ``key``? Resolves a crash-uncertain key to it."""
        cands = self.candidates(key)
        if got not in cands:
            return False
        if key in self.maybe and key not in self.expiring:
            self.values[key] = got
            del self.maybe[key]
            self.resolved.add(key)
        return True

    def frozen(self) -> "Model":
        return copy.deepcopy(self)

    def certain(self, key: str) -> bool:
        """One value is allowed, and it is the same on a twin store (no kill decided it)."""
        return key not in self.maybe and key not in self.resolved
