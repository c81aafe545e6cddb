"""``./just bench-s3`` end to end against the suite's SeaweedFS: every figure printed, the data
check passed (a durable put's row is read back by a scan)."""

from __future__ import annotations

import re

import pytest

from slatedb.bench import durable_s3

pytestmark = pytest.mark.xdist_group("s3-servers")


def test_bench_s3_prints_every_figure_and_checks_the_data(seaweedfs_server, capsys) -> None:
    o = seaweedfs_server.options()
    durable_s3.main(["--n", "8", "--endpoint-url", o["endpoint_url"], "--bucket", "contract",
                     "--access-key", o["access_key_id"], "--secret-key", o["secret_access_key"]])
    out = capsys.readouterr().out
    assert re.search(r"conditional create .* p50 +[\d.]+ ms", out), out
    assert re.search(r"durable=True.* p50 +[\d.]+ ms", out), out
    assert re.search(r"durable p50 / create p50 +[\d.]+x", out), out
    assert re.search(r"16 threads of durable puts +[\d.]+ puts/s", out), out
    assert out.strip().endswith("data check: OK")
