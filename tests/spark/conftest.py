"""Every Spark test of this package uses the process's one session (tests/conftest.py
``spark_session``: local[2,2], so a task can be retried) with the slatedb source registered.
After every test, each database it left there passes
``slatedb check --deep`` (issue 26: a failed load's leftovers are garbage, never a finding)."""

from __future__ import annotations

import pytest

import slatedb
from tests.checker.assertions import assert_databases_healthy


@pytest.fixture()
def spark(spark_session):
    slatedb.spark.register(spark_session)
    return spark_session


@pytest.fixture(autouse=True)
def checked_afterwards(request, tmp_path):
    yield
    marker = request.node.get_closest_marker("check_allows")
    assert_databases_healthy(tmp_path, allow=frozenset(marker.args) if marker is not None else frozenset())
