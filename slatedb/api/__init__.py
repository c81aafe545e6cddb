"""What the front-ends share (``slatedb.Db``/``slatedb.DbReader`` and their trio twins in
``slatedb.aio``): the runtime thread, the service runner and the default runtime
(:mod:`.portal`), and the read API over the engines' shared read path (:mod:`.sync_reads`,
:mod:`.async_reads`). Each front-end module is a thin wrapper over these and its engine.
"""
