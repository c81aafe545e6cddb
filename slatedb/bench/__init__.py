"""Benchmarks runnable as ``python -m slatedb.bench.<name>`` (see the Justfile's bench recipes)."""
