"""A sweep survives faults: a Dask worker killed mid-sweep, and the sweep process itself killed
with SIGKILL and resumed. Either way every point is in results.parquet exactly once, and the
table equals a clean run's."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("distributed")

from ipisim import grid  # noqa: E402

# 12 small points (shootdown runs of a few hundredths of a second each).
GRID = """
scenario = "shootdown"
machine = "xeon-2s-2013"
kernels = ["linux-6.18", "linux-4.3"]
seeds = [1, 2]

[axes]
remote_threads = [1, 4, 16]
"""


def table(path: Path) -> list[dict[str, object]]:
    return list(pq.read_table(path).to_pylist())


@pytest.fixture
def grid_file(tmp_path: Path) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    return path


@pytest.fixture
def clean(grid_file: Path, tmp_path: Path) -> list[dict[str, object]]:
    """The table of an undisturbed sweep."""
    return table(grid.sweep(grid.load_grid(grid_file), tmp_path / "clean", workers=2))


def check_complete(result: list[dict[str, object]], clean: list[dict[str, object]], g: grid.Grid) -> None:
    ids = [r["point"] for r in result]
    assert len(ids) == len(set(ids)) == len(g.points), "a point lost or duplicated"
    assert result == clean


def test_a_worker_killed_mid_sweep_loses_nothing(
    grid_file: Path,
    tmp_path: Path,
    clean: list[dict[str, object]],
    dask_workers: tuple[str, list[subprocess.Popen[bytes]]],
) -> None:
    address, procs = dask_workers
    g = grid.load_grid(grid_file)
    killed_at: list[int] = []

    def progress(done: int, total: int) -> None:
        # After the first results, while the rest are queued or running on both workers.
        if done == 2 and not killed_at:
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(timeout=10)
            killed_at.append(done)

    result = grid.sweep(g, tmp_path / "dask", scheduler=address, progress=progress)
    assert killed_at == [2] and procs[0].returncode == -signal.SIGKILL
    check_complete(table(result), clean, g)


def test_a_sweep_killed_with_sigkill_resumes_to_the_same_table(
    grid_file: Path, tmp_path: Path, clean: list[dict[str, object]]
) -> None:
    g = grid.load_grid(grid_file)
    out = tmp_path / "killed"
    runs = out / "runs"
    rng = random.Random()
    stop_at = rng.randint(1, len(g.points) - 1)
    cmd = [sys.executable, "-m", "ipisim.cli", "sweep", str(grid_file), "--out", str(out), "--workers", "2"]
    # Its own process group: SIGKILL takes the sweep and its pool's processes at once, as a crash would.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if runs.is_dir() and len(list(runs.glob("*.parquet"))) >= stop_at:
                time.sleep(rng.uniform(0, 0.05))
                break
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the sweep ended before it could be killed"
    finished = len(list(runs.glob("*.parquet")))
    assert finished >= stop_at, f"killed at {stop_at}: {finished} results kept"
    # A leftover temporary file of a write cut short is not a result; the rerun overwrites it.
    resumed = grid.sweep(g, out, workers=2)
    check_complete(table(resumed), clean, g)
