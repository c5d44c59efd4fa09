"""Fixtures shared by several test modules."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def dask_workers(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A real Dask scheduler and two one-thread workers on 127.0.0.1, yielding its address and the
    workers' processes; without nannies, so killing a worker's process kills the worker and
    nothing restarts it."""
    pytest.importorskip("distributed")
    if shutil.which("dask") is None:
        pytest.skip("no dask command")
    info = tmp_path / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    cmd = ["dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"]
    scheduler = subprocess.Popen([*cmd, "--scheduler-file", str(info)], **quiet)  # type: ignore[call-overload]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(300):
            if info.exists() and info.stat().st_size > 0:
                break
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        for _ in range(2):
            cmd = ["dask", "worker", address, "--host", "127.0.0.1", "--no-nanny", "--nthreads", "1"]
            procs.append(subprocess.Popen([*cmd, "--no-dashboard"], **quiet))  # type: ignore[call-overload]
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address, procs
    finally:
        # Workers first: one left without its scheduler retries for a while before it exits.
        for p in [*procs, scheduler]:
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


@pytest.fixture
def dask_cluster(dask_workers: tuple[str, list[subprocess.Popen[bytes]]]) -> str:
    """The address of a real Dask scheduler with two workers on 127.0.0.1."""
    return dask_workers[0]
