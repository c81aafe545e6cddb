"""Fixtures of the interop tests: ``official`` runs scripts against the official wheel."""

from __future__ import annotations

import pytest

from .official import Official, OfficialUnavailable, ensure_official_venv


@pytest.fixture(scope="session")
def official() -> Official:
    try:
        python = ensure_official_venv()
    except OfficialUnavailable as e:
        pytest.fail(str(e))
    return Official(python)
