"""The contents oracle of a world with one writer: every write, and per key the highest
acknowledged seq; a final read of a key must return a value the model allows."""

from __future__ import annotations

from collections import defaultdict


class Model:
    """Every write, and per key the highest acknowledged seq. Values are unique."""

    def __init__(self) -> None:
        self.writes: dict[bytes, list[tuple[int, bytes | None]]] = defaultdict(list)
        self.acked_seq: dict[bytes, int] = {}
        self.acked = 0

    def write(self, key: bytes, seq: int, value: bytes | None) -> None:
        self.writes[key].append((seq, value))

    def ack(self, key: bytes, seq: int) -> None:
        self.acked += 1
        self.acked_seq[key] = max(self.acked_seq.get(key, -1), seq)

    def allowed(self, key: bytes) -> list[bytes | None]:
        """The last acknowledged value, or that of any later write (never acknowledged: it may
        or may not have become durable); before any acknowledgement, absent too. Seqs grow across
        writer incarnations above everything durable, so "later" is "higher seq"."""
        a = self.acked_seq.get(key)
        out = [v for s, v in self.writes[key] if a is None or s >= a]
        if a is None:
            out.append(None)
        return out
