"""The contract suite's ``store`` fixture: one fresh, empty store per test, on every backend."""

from __future__ import annotations

import itertools

import pytest

from slatedb.objstore import MemoryRegistry, resolve_store
from tests import servers

BACKENDS = ["memory", "local", "seaweedfs", "moto"]
_names = itertools.count()


@pytest.fixture(scope="session")
def seaweedfs_server():
    gen = servers.seaweedfs()
    server = next(gen)
    servers.create_bucket(server, "contract")
    yield server
    gen.close()


@pytest.fixture(scope="session")
def moto_server():
    gen = servers.moto()
    server = next(gen)
    servers.create_bucket(server, "contract")
    yield server
    gen.close()


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def store_url_and_options(backend, request, tmp_path):
    n = next(_names)
    if backend == "memory":
        return f"memory://contract-{n}", {}
    if backend == "local":
        return f"file://{tmp_path}/store", {}
    server = request.getfixturevalue(f"{backend}_server")
    return f"s3://contract/run-{n}", server.options()


@pytest.fixture
def store(store_url_and_options):
    url, options = store_url_and_options
    return resolve_store(url, options=options, memory_registry=MemoryRegistry())
