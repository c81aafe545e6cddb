"""The differential campaign against the official SlateDB 0.17 wheel (issue 26 item 3): seeded
operation sequences on a shared store and on twin stores, reads compared with a model and
between engines, ``slatedb check`` after every step, shrunk mismatches. ``./just diff``."""
