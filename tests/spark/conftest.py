"""Every Spark test of this package uses the process's one session (tests/conftest.py
``spark_session``: local[2,2], so a task can be retried) with the slatedb source registered."""

from __future__ import annotations

import pytest

import slatedb


@pytest.fixture()
def spark(spark_session):
    slatedb.spark.register(spark_session)
    return spark_session
