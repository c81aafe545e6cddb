"""One Spark session for every test of this package (start-up costs ~10 s): local mode on two
cores with two attempts per task (``local[2,2]``: the retry tests need a second attempt), no
UI, bound to 127.0.0.1."""

from __future__ import annotations

import pytest

import slatedb


@pytest.fixture(scope="session")
def spark():
    spark_engine = pytest.importorskip("sim.spark_engine")
    with spark_engine.spark_session("local[2,2]", app_name="slatedb-spark-test") as session:
        slatedb.spark.register(session)
        yield session
