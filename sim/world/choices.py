"""Every random choice of a simulated world, recorded, replayable and shrinkable.

A scenario never builds a ``random.Random`` of its own: it asks its world's :class:`Choices`
for a **stream** (``choices.stream("workload", "w1")``, ``choices.stream("store", "w1")``), one
per process and purpose, as ``derive_rng`` used to hand out. A stream is a ``random.Random``
(so protocol code and ``random``'s helpers keep working) whose every draw is a **typed choice**
recorded in order: an integer in ``[lo, hi]`` (``randint``, ``randrange``, ``choice`` as an
index, ``getrandbits``), a boolean with its probability (``boolean(p)``, what ``random() < p``
means), a real in ``[lo, hi]`` (``random``, ``uniform``) or bytes (``randbytes``). This is
hypothesis's ``ConjectureData`` (``docs/simulation.md``, "Shrinking"), cut down to what the
simulator needs.

Three modes, one class:

* **generate** (``Choices(seed)``): each stream draws from ``random.Random("<seed>:<name>")``,
  exactly the values ``derive_rng(seed, name)`` gave, so a seed's trace digest does not depend
  on whether its draws are recorded;
* **replay** (``Choices(seed, prefix)``): each stream returns its recorded values in order; a
  value that no longer fits what is asked (another kind, out of range: the run took another
  path) counts as a *misalignment* and is replaced by the simplest value, and past the end of
  its prefix a stream returns simplest values (the lowest integer, ``False``, the low end of a
  range, zero bytes). Any edited sequence therefore still runs, and a shorter or smaller one
  describes a simpler world: fewer operations, no more faults, shorter pauses;
* streams made with ``shrink=False`` (object ids, the scheduler's seed) always draw from the
  seed, in both modes: they are replayed by regenerating them, never edited.

The scheduler of trio is seeded by one choice (:meth:`Choices.scheduler_seed`), drawn like the
others (not shrunk: any change reshuffles every interleaving).

A run's choices are saved as :meth:`Choices.saved` (per stream its values, trailing simplest
values dropped, since replay supplies those) and replayed with ``Choices(seed, saved)``: that is
what ``sim run --keep FILE`` and the tests written by ``sim shrink --write-test`` do.
"""

from __future__ import annotations

import json
import random
from typing import Any, Iterator, Sequence

#: Kinds of node: ("i", lo, hi) integer, ("b", p) boolean, ("r", lo, hi) real, ("y", n) bytes.
_MISSING = object()

#: Streams whose names start with one of these are never edited (regenerated from the seed).
FIXED_STREAMS = ("ids", "scheduler")


class Overrun(Exception):
    """A replayed run drew far more choices than any run of its seed should (a candidate that
    loops on simplest values): the run is abandoned."""


class ChoiceStream(random.Random):
    """One named stream of choices (see the module docstring)."""

    def __init__(self, owner: "Choices", label: str, inner_seed: str, *, fresh: bool,
                 prefix: Sequence[Any] = ()) -> None:
        super().__init__(0)
        self._owner = owner
        self.label = label
        self._inner = random.Random(inner_seed)
        self._fresh = fresh  # past the prefix: draw from the seed (True) or the simplest value
        self._prefix = prefix
        self._pos = 0
        self.values: list[Any] = []
        self.kinds: list[tuple] = []
        self.spans: list[tuple[str, int, int]] = []
        # The fresh draws' last kind tuples, reused while the bounds are the same objects (a
        # store's latency bounds, its fault rates: most of a run's draws). The recorded kinds
        # are equal either way; reused, they are not thousands of tuples left for the cyclic
        # collector when the run's world is freed.
        self._r_kind: tuple = (None, None, None)
        self._r_a: Any = None
        self._r_b: Any = None
        self._b_kind: tuple = (None, None)
        self._i_kinds: dict[int, tuple] = {}
        if fresh and not prefix:
            # Generating (no prefix to replay, every value drawn from the seed): the hot draws
            # skip the replay step and the ``fresh`` closure, with the same values and records.
            self.uniform = self._uniform_fresh  # type: ignore[method-assign]
            self.boolean = self._boolean_fresh  # type: ignore[method-assign]
            self.outcome = self._outcome_fresh  # type: ignore[method-assign]
            self.choice = self._choice_fresh  # type: ignore[method-assign]

    # -- the one draw ---------------------------------------------------------------------

    def _replayed(self) -> Any:
        pos = self._pos
        if pos < len(self._prefix):
            self._pos = pos + 1
            return self._prefix[pos]
        return _MISSING

    def _record(self, value: Any, kind: tuple) -> Any:
        self.values.append(value)
        self.kinds.append(kind)
        owner = self._owner
        owner.drawn += 1
        if owner.drawn > owner.max_draws:
            raise Overrun(f"more than {owner.max_draws} choices drawn")
        return value

    def _misaligned(self) -> None:
        self._owner.misaligned += 1

    # -- typed draws ------------------------------------------------------------------------

    def _integer(self, lo: int, hi: int, fresh: Any) -> int:
        v = self._replayed()
        if v is _MISSING:
            v = fresh() if self._fresh else lo
        elif type(v) is not int or not lo <= v <= hi:
            self._misaligned()
            v = lo
        return self._record(v, ("i", lo, hi))

    def randint(self, a: int, b: int) -> int:
        if a > b:
            return super().randint(a, b)  # raises as random does
        return self._integer(a, b, lambda: self._inner.randint(a, b))

    def randrange(self, start: int, stop: Any = None, step: int = 1) -> int:  # type: ignore[override]
        if stop is None:
            start, stop = 0, start
        if step != 1 or stop <= start:
            # Rare shapes (none in the simulator): draw an index, as random does.
            n = len(range(start, stop, step))
            if n <= 0:
                return self._inner.randrange(start, stop, step)  # raises ValueError
            return start + step * self._integer(0, n - 1, lambda: self._inner._randbelow(n))
        return self._integer(start, stop - 1, lambda: self._inner.randrange(start, stop))

    def choice(self, seq: Sequence[Any]) -> Any:
        n = len(seq)
        if not n:
            raise IndexError("Cannot choose from an empty sequence")
        return seq[self._integer(0, n - 1, lambda: self._inner._randbelow(n))]

    def count(self, lo: int, default: int) -> int:
        """A size of the scenario's shape (processes, rounds, operations): ``default`` in every
        generated world (no draw from the seed, so adding one changes no digest), editable down
        to ``lo`` by the shrinker."""
        return self._integer(lo, max(lo, default), lambda: default)

    def getrandbits(self, k: int) -> int:
        return self._integer(0, (1 << k) - 1, lambda: self._inner.getrandbits(k))

    def boolean(self, p: float) -> bool:
        """True with probability ``p`` (the draw ``random() < p`` made, same stream position);
        simplest ``False``."""
        v = self._replayed()
        if v is _MISSING:
            v = (self._inner.random() < p) if self._fresh else False
        elif type(v) is not bool:
            self._misaligned()
            v = False
        return self._record(v, ("b", p))

    def outcome(self, rates: Sequence[float]) -> int:
        """One of ``len(rates) + 1`` outcomes: ``1 + i`` with probability ``rates[i]``, else 0
        (the draw ``r = random()`` compared with the running sums made); simplest 0."""
        v = self._replayed()
        n = len(rates)
        if v is _MISSING:
            v = 0
            if self._fresh:
                r, acc = self._inner.random(), 0.0
                for i, rate in enumerate(rates):
                    acc += rate
                    if r < acc:
                        v = i + 1
                        break
        elif type(v) is not int or not 0 <= v <= n:
            self._misaligned()
            v = 0
        return self._record(v, ("i", 0, n))

    def _real(self, lo: float, hi: float, fresh: Any) -> float:
        v = self._replayed()
        if v is _MISSING:
            v = fresh() if self._fresh else lo
        elif type(v) is not float or not min(lo, hi) <= v <= max(lo, hi):
            self._misaligned()
            v = lo
        return self._record(v, ("r", lo, hi))

    def random(self) -> float:
        return self._real(0.0, 1.0, self._inner.random)

    def uniform(self, a: float, b: float) -> float:
        return self._real(float(a), float(b), lambda: self._inner.uniform(a, b))

    def randbytes(self, n: int) -> bytes:
        v = self._replayed()
        if v is _MISSING:
            v = self._inner.randbytes(n) if self._fresh else bytes(n)
        elif type(v) is not bytes or len(v) != n:
            self._misaligned()
            v = bytes(n)
        return self._record(v, ("y", n))

    def seed(self, *args: Any, **kwargs: Any) -> None:  # random.Random.__init__ calls it
        super().seed(*args, **kwargs)

    # -- generating: the same draws as above with an empty prefix and ``fresh`` --------------

    # Each records its draw as _record does, inline (a call fewer per draw: a store request
    # draws three to five times).

    def _uniform_fresh(self, a: float, b: float) -> float:
        kind = self._r_kind
        if a is not self._r_a or b is not self._r_b:
            kind = self._r_kind = ("r", float(a), float(b))
            self._r_a, self._r_b = a, b
        value = a + (b - a) * self._inner.random()  # random.Random.uniform's formula, inline
        self.values.append(value)
        self.kinds.append(kind)
        owner = self._owner
        owner.drawn += 1
        if owner.drawn > owner.max_draws:
            raise Overrun(f"more than {owner.max_draws} choices drawn")
        return value

    def _boolean_fresh(self, p: float) -> bool:
        kind = self._b_kind
        if kind[1] is not p:
            kind = self._b_kind = ("b", p)
        value = self._inner.random() < p
        self.values.append(value)
        self.kinds.append(kind)
        owner = self._owner
        owner.drawn += 1
        if owner.drawn > owner.max_draws:
            raise Overrun(f"more than {owner.max_draws} choices drawn")
        return value

    def _outcome_fresh(self, rates: Sequence[float]) -> int:
        v = 0
        r, acc = self._inner.random(), 0.0
        for i, rate in enumerate(rates):
            acc += rate
            if r < acc:
                v = i + 1
                break
        n = len(rates)
        kind = self._i_kinds.get(n)
        if kind is None:
            kind = self._i_kinds[n] = ("i", 0, n)
        self.values.append(v)
        self.kinds.append(kind)
        owner = self._owner
        owner.drawn += 1
        if owner.drawn > owner.max_draws:
            raise Overrun(f"more than {owner.max_draws} choices drawn")
        return v

    def _choice_fresh(self, seq: Sequence[Any]) -> Any:
        n = len(seq)
        if not n:
            raise IndexError("Cannot choose from an empty sequence")
        return seq[self._record(self._inner._randbelow(n), ("i", 0, n - 1))]

    # -- structure --------------------------------------------------------------------------

    def span(self, label: str) -> "_Span":
        """``with stream.span("op"):`` marks the draws made inside as one unit (an operation,
        a fault decision) that the shrinker may delete whole."""
        return _Span(self, label)


class _Span:
    __slots__ = ("stream", "label", "start")

    def __init__(self, stream: ChoiceStream, label: str) -> None:
        self.stream, self.label = stream, label

    def __enter__(self) -> None:
        self.start = len(self.stream.values)

    def __exit__(self, *exc: Any) -> None:
        end = len(self.stream.values)
        if end > self.start:
            self.stream.spans.append((self.label, self.start, end))


def boolean(rng: random.Random, p: float) -> bool:
    """``rng.random() < p`` as a typed choice when ``rng`` is a :class:`ChoiceStream`."""
    return rng.boolean(p) if isinstance(rng, ChoiceStream) else rng.random() < p


def outcome(rng: random.Random, rates: Sequence[float]) -> int:
    """:meth:`ChoiceStream.outcome` for any ``random.Random`` (same values)."""
    if isinstance(rng, ChoiceStream):
        return rng.outcome(rates)
    r, acc = rng.random(), 0.0
    for i, rate in enumerate(rates):
        acc += rate
        if r < acc:
            return i + 1
    return 0


def simplest(kind: tuple) -> Any:
    tag = kind[0]
    if tag == "i" or tag == "r":
        return kind[1]
    if tag == "b":
        return False
    return bytes(kind[1])


def complexity(value: Any, kind: tuple) -> float:
    """How far a value is from its kind's simplest (0): the shortlex order's per-node index."""
    tag = kind[0]
    if tag == "i":
        return value - kind[1]
    if tag == "b":
        return 1 if value else 0
    if tag == "r":
        lo, hi = kind[1], kind[2]
        return abs(value - lo) / (abs(hi - lo) or 1.0)
    return 0 if not any(value) else 1


class Choices:
    """The choices of one simulated world (see the module docstring).

    ``prefix`` maps stream labels to values to replay (``None``: generate from ``seed``).
    """

    def __init__(self, seed: int, prefix: dict[str, Sequence[Any]] | None = None, *,
                 max_draws: int = 50_000_000) -> None:
        self.seed = int(seed)
        self.prefix = prefix
        self.max_draws = max_draws
        self.streams: dict[str, ChoiceStream] = {}
        self.drawn = 0
        self.misaligned = 0
        #: The world's trace (set by its first runtime), for reports on a replayed run.
        self.trace: Any = None

    @property
    def replaying(self) -> bool:
        return self.prefix is not None

    def stream(self, *names: str) -> ChoiceStream:
        """The stream for ``names``. Asking twice for the same names gives a second stream
        with the same fresh values (as two ``derive_rng`` calls did), labelled ``name#2``."""
        base = ":".join(names)
        label, n = base, 1
        while label in self.streams:
            n += 1
            label = f"{base}#{n}"
        fixed = names[0] in FIXED_STREAMS if names else False
        fresh = fixed or self.prefix is None
        prefix = () if fixed or self.prefix is None else self.prefix.get(label, ())
        s = ChoiceStream(self, label, ":".join([str(self.seed), *names]), fresh=fresh, prefix=prefix)
        self.streams[label] = s
        return s

    def scheduler_seed(self) -> int:
        """trio's scheduler seed: one choice, the world seed itself unless edited."""
        return self.stream("scheduler")._integer(0, (1 << 63) - 1, lambda: self.seed)

    def unread(self) -> list[str]:
        """The replayed prefix's streams this run never asked for (a sequence saved from another
        scenario, seed or code names streams this world does not have)."""
        return sorted(set(self.prefix or ()) - set(self.streams))

    # -- reading a run's choices ------------------------------------------------------------

    def shrinkable(self) -> dict[str, ChoiceStream]:
        return {k: s for k, s in self.streams.items() if k.split(":", 1)[0].split("#", 1)[0] not in FIXED_STREAMS}

    def saved(self) -> dict[str, list[Any]]:
        """The editable streams' values in stream order, each without its trailing simplest
        values (a replay supplies them): enough to replay this run with ``Choices(seed, ...)``."""
        out: dict[str, list[Any]] = {}
        for label in sorted(self.shrinkable()):
            s = self.streams[label]
            n = len(s.values)
            while n and complexity(s.values[n - 1], s.kinds[n - 1]) == 0:
                n -= 1
            if n:
                out[label] = list(s.values[:n])
        return out

    def size(self) -> tuple[int, int]:
        """(choices drawn in editable streams, of which not the simplest value)."""
        total = nontrivial = 0
        for s in self.shrinkable().values():
            total += len(s.values)
            nontrivial += sum(1 for v, k in zip(s.values, s.kinds) if complexity(v, k) != 0)
        return total, nontrivial

    def sort_key(self) -> tuple:
        """Hypothesis's shortlex order: fewer choices first, then smaller ones, stream by stream."""
        streams = self.shrinkable()
        flat: list[float] = []
        for label in sorted(streams):
            s = streams[label]
            flat.extend(complexity(v, k) for v, k in zip(s.values, s.kinds))
        return (len(flat), tuple(flat))

    def spans(self) -> Iterator[tuple[str, str, int, int]]:
        for label, s in self.shrinkable().items():
            for name, start, end in s.spans:
                yield label, name, start, end


# -- saving ------------------------------------------------------------------------------------


def _encode(v: Any) -> Any:
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    return v


def _decode(v: Any) -> Any:
    if isinstance(v, dict):
        return bytes.fromhex(v["bytes"])
    return v


def dumps(saved: dict[str, list[Any]]) -> str:
    """A saved choice sequence as compact JSON (floats round-trip exactly)."""
    return json.dumps({k: [_encode(v) for v in vs] for k, vs in saved.items()}, separators=(",", ":"))


def loads(text: str) -> dict[str, list[Any]]:
    data = json.loads(text)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError("a saved choice sequence is a JSON object of lists")
    return {str(k): [_decode(v) for v in vs] for k, vs in data.items()}
