"""The simulated world: runtime, store, choices, process pieces, trace, events, probes, invariant ids."""
