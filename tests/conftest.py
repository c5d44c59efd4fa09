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
def dask_cluster(tmp_path: Path) -> Iterator[str]:
    """A real Dask scheduler and two one-thread workers on 127.0.0.1; yields its address."""
    pytest.importorskip("distributed")
    if shutil.which("dask") is None:
        pytest.skip("no dask command")
    info = tmp_path / "scheduler.json"
    procs = [
        subprocess.Popen(
            [
                "dask",
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(info),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        for _ in range(300):
            if info.exists() and info.stat().st_size > 0:
                break
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    ["dask", "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
