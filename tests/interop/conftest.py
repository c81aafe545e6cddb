"""Fixtures of the interop tests: ``official`` runs scripts against the official wheel; after
every test, ``slatedb check --deep`` on each database it left (``check_allows`` marks a known
defect's invariant as tolerated, with the reason)."""

from __future__ import annotations

import pytest

from tests.checker.assertions import assert_databases_healthy

from .official import Official, OfficialUnavailable, ensure_official_venv


@pytest.fixture(scope="session")
def official() -> Official:
    try:
        python = ensure_official_venv()
    except OfficialUnavailable as e:
        pytest.fail(str(e))
    return Official(python)


@pytest.fixture(autouse=True)
def checked_afterwards(request, tmp_path):
    """Every database under the test's ``tmp_path`` passes ``slatedb check --deep`` afterwards."""
    yield
    marker = request.node.get_closest_marker("check_allows")
    allow = frozenset(marker.args) if marker is not None else frozenset()
    assert_databases_healthy(tmp_path, allow=allow)
