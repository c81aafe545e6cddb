"""On-store formats of SlateDB 0.17.0: FlatBuffers metadata, SSTs, manifest, compactions.

The generated FlatBuffers accessors live in :mod:`slatedb.format.fb` (regenerate them with
``./just gen``); the hand-written codecs turn them into the frozen value types of
:mod:`slatedb.format.types`.
"""
