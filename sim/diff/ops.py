"""Seeded operation sequences for the differential campaign. A sequence is a list of plain dicts
(JSON: printable, replayable, shrinkable by deleting items); nothing in an operation depends on a
result (a checkpoint or snapshot is named by its index, and an operation whose target does not
exist at replay is skipped), so any sub-list is another valid sequence."""

from __future__ import annotations

from sim.world.choices import Choices

N_KEYS = 24
SHARED = "shared"
TWIN = "twin"

#: (op, weight); ``switch`` only on the shared store.
WEIGHTS = (
    ("put", 24), ("delete", 6), ("batch", 6), ("put_ttl", 3), ("put_expired", 2),
    ("get", 12), ("scan", 8), ("snapshot", 2), ("snap_scan", 3),
    ("flush_wal", 4), ("flush_l0", 4), ("checkpoint", 2), ("read_checkpoint", 3),
    ("compact", 2), ("clone", 1), ("union", 1), ("reopen", 2), ("switch", 6), ("kill", 2),
)


def key(i: int) -> str:
    return "k%02d" % i


def generate(seed: int, steps: int, mode: str) -> list[dict]:
    rng = Choices(seed).stream("diff", mode)
    ops = [o for o in WEIGHTS if mode == SHARED or o[0] != "switch"]
    total = sum(w for _, w in ops)
    out: list[dict] = [{"op": "open", "engine": rng.choice(["ours", "official"])}] if mode == SHARED else []
    for step in range(steps):
        pick = rng.randrange(total)
        for name, w in ops:
            if pick < w:
                break
            pick -= w
        k = key(rng.randrange(N_KEYS))
        big = rng.randrange(8) == 0
        value = f"s{seed}-{step}-" + ("x" * 1500 if big else "v" * rng.randrange(1, 40))
        if name == "put":
            out.append({"op": "put", "key": k, "value": value})
        elif name == "put_ttl":
            out.append({"op": "put", "key": k, "value": value, "ttl_ms": 3600 * 1000})
        elif name == "put_expired":
            out.append({"op": "put", "key": k, "value": value, "ttl_ms": 1})
        elif name == "delete":
            out.append({"op": "delete", "key": k})
        elif name == "batch":
            items = []
            for j in range(rng.randint(2, 5)):
                bk = key(rng.randrange(N_KEYS))
                items.append({"op": "delete", "key": bk} if rng.randrange(4) == 0
                             else {"op": "put", "key": bk, "value": f"{value}-b{j}"})
            out.append({"op": "batch", "ops": items})
        elif name == "get":
            out.append({"op": "get", "key": k})
        elif name == "scan":
            a, b = sorted((rng.randrange(N_KEYS + 1), rng.randrange(N_KEYS + 1)))
            b = max(b, a + 1)
            out.append({"op": "scan", "start": key(a) if a else None, "end": key(b) if b < N_KEYS else None})
        elif name in ("read_checkpoint", "snap_scan"):
            out.append({"op": name, "index": rng.randrange(4), "by": rng.choice(["ours", "official"])})
        elif name == "union":
            out.append({"op": "union", "by": rng.choice(["ours", "official"]), "cut": key(rng.randrange(1, N_KEYS)),
                        "compact_with": rng.choice(["ours", "official", None])})
        elif name == "kill":
            out.append({"op": "kill", "reopen_with": rng.choice(["ours", "official"])})
        else:
            out.append({"op": name})
    return out
