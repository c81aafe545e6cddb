"""The LSM read side every engine shares, below the writer (``slatedb.db``) and every other engine
(reader, compactor, GC, clone, projection, destroy, Spark): SST views built from a manifest
(:mod:`.view`), where each SST lives (:mod:`.paths`), the block cache (:mod:`.cache`), merged scans
(:mod:`.scan`) and the read path over a :class:`~.read_path.ReadState` (:mod:`.read_path`).
Nothing here imports an engine."""
