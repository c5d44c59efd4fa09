"""A grid of runs (`ipisim sweep GRID.toml`, `ipisim.sweep()`): every point, locally or on a Dask cluster.

A grid file names the scenario, the machine, the kernels, the seeds, fixed `[sets]` and axes of
`--set` values; the points are their product (see examples/sweep-tlb_flush2.toml). Each finished
run is written at once as its own Parquet file under OUT/runs/, so an interrupted sweep keeps what
it finished and a rerun skips it; OUT/results.parquet and OUT/plot.png are made at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import sys
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import ipisim


class GridError(ValueError):
    """A mistake in a grid file; the message names the file and key."""


@dataclass(frozen=True)
class Point:
    """One run of the grid."""

    scenario: str
    machine: str | None
    kernel: str
    seed: int
    sets: tuple[tuple[str, str], ...]

    @property
    def id(self) -> str:
        """A stable name for the point, so a rerun finds its finished result."""
        text = json.dumps([self.scenario, self.machine, self.kernel, self.seed, self.sets])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Grid:
    """A parsed grid file."""

    points: list[Point]
    axes: list[str]
    plot_x: str | None
    plot_y: str | None


#: The keys a grid file may have at its top level, and in its [plot] table.
KEYS = ("scenario", "machine", "kernels", "seeds", "sets", "axes", "plot")
PLOT_KEYS = ("x", "y")
#: Columns every row has besides the axes, the sets and the scenario's metrics and counters.
BASE_COLUMNS = (
    "scenario",
    "machine",
    "kernel",
    "seed",
    "point",
    "elapsed_s",
    "user_s",
    "system_s",
    "ipis_sent",
)


def _columns(scenario: str, names: list[str], fixed: Mapping[str, object]) -> set[str]:
    """The columns a result row of `scenario` will have, known before anything runs."""
    d = ipisim.describe(scenario)
    cols = set(BASE_COLUMNS) | set(names) | set(fixed)
    cols |= {f"ops.{m}" for m in d["metrics"]}
    cols |= {f"interrupts.{r}" for r in d["counters"]["interrupts"]}
    cols |= {f"vmstat.{c}" for c in d["counters"]["vmstat"]}
    return cols


def load_grid(path: Path) -> Grid:
    """Parse GRID.toml; bad input raises GridError naming the file and key."""
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as e:
        raise GridError(f"{path}: cannot read: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{path}: malformed TOML: {e}") from e

    # A typo (`seed` for `seeds`, `[set]` for `[sets]`) would otherwise be silently ignored.
    for key in doc:
        if key not in KEYS:
            raise GridError(f"{path}: {key}: unknown key (one of: {', '.join(KEYS)})")

    def need(key: str, kind: type) -> Any:
        if key not in doc:
            raise GridError(f"{path}: {key}: missing")
        if not isinstance(doc[key], kind):
            raise GridError(f"{path}: {key}: expected {kind.__name__}")
        return doc[key]

    scenario = need("scenario", str)
    kernels = need("kernels", list)
    seeds = doc.get("seeds", [1])
    axes = doc.get("axes", {})
    if not isinstance(axes, dict) or not all(isinstance(v, list) and v for v in axes.values()):
        raise GridError(f"{path}: axes: expected a table of non-empty lists")
    if not kernels or not all(isinstance(k, str) for k in kernels):
        raise GridError(f"{path}: kernels: expected a non-empty list of preset names")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(x, int) for x in seeds):
        raise GridError(f"{path}: seeds: expected a non-empty list of integers")
    for x in seeds:
        try:
            ipisim.check_seed(x, "seeds")
        except ipisim.ConfigError as e:
            raise GridError(f"{path}: {e}") from e
    machine = doc.get("machine")
    if machine is not None and not isinstance(machine, str):
        raise GridError(f"{path}: machine: expected a string")
    if scenario not in {s["name"] for s in ipisim.list_builtins()["scenarios"]}:
        raise GridError(f"{path}: scenario: unknown scenario {scenario!r} (see `ipisim list`)")
    fixed = doc.get("sets", {})
    if not isinstance(fixed, dict):
        raise GridError(f"{path}: sets: expected a table of key = value")
    plot = doc.get("plot", {})
    if not isinstance(plot, dict):
        raise GridError(f"{path}: plot: expected a table with x and y")
    for key, value in plot.items():
        if key not in PLOT_KEYS:
            raise GridError(f"{path}: plot.{key}: unknown key (one of: {', '.join(PLOT_KEYS)})")
        if not isinstance(value, str):
            raise GridError(f"{path}: plot.{key}: expected a column name")
    names = sorted(axes)
    common = tuple((k, str(v)) for k, v in sorted(fixed.items()))
    points = [
        Point(
            scenario,
            machine,
            kernel,
            seed,
            common + tuple((n, str(v)) for n, v in zip(names, values, strict=True)),
        )
        for kernel in kernels
        for values in itertools.product(*(axes[n] for n in names))
        for seed in seeds
    ]
    # Each distinct configuration is checked now, not when its first point runs, maybe hours later.
    for p in {(p.kernel, p.sets): p for p in points}.values():
        try:
            ipisim.check_config(p.scenario, machine=p.machine, kernel=p.kernel, sets=p.sets, seed=p.seed)
        except ipisim.ConfigError as e:
            raise GridError(f"{path}: {e}") from e
    # The plot's columns are checked now too, not after every run has finished.
    columns = _columns(scenario, names, fixed)
    for key, column in plot.items():
        if column not in columns:
            metrics = ", ".join(sorted(c for c in columns if c.startswith("ops.")))
            given = ", ".join([*names, *fixed]) or "none"
            raise GridError(
                f"{path}: plot.{key}: unknown column {column!r} (axes and sets: {given}; metrics: {metrics};"
                " or interrupts.<row>, vmstat.<counter>, elapsed_s, user_s, system_s, ipis_sent)"
            )
    return Grid(points, names, plot.get("x"), plot.get("y"))


def run_point(p: Point) -> dict[str, Any]:
    """Run one point; its row of the results table (flat: axes, times, ops, counters).

    A configuration mistake comes back as {"error": message}: exceptions from the native module
    do not cross process boundaries reliably.
    """
    try:
        r = ipisim.run(p.scenario, machine=p.machine, kernel=p.kernel, sets=p.sets, seed=p.seed)
    except ipisim.ConfigError as e:
        return {"error": str(e)}
    # The grid's own kernel name and sets label the row, so the axes are columns.
    return {"point": p.id} | r.row() | {"kernel": p.kernel, "seed": p.seed} | dict(p.sets)


def _save_row(runs: Path, row: Mapping[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = runs / f".{row['point']}.tmp"
    pq.write_table(pa.Table.from_pylist([dict(row)]), tmp)
    tmp.replace(runs / f"{row['point']}.parquet")


def _execute(
    todo: list[Point], scheduler: str | None, workers: int | None
) -> Generator[dict[str, Any], None, None]:
    """Rows as runs finish, from a local process pool or a Dask cluster."""
    if scheduler:
        from distributed import Client
        from distributed import as_completed as dask_completed

        with Client(scheduler, timeout="10s") as client:
            futures = [client.submit(run_point, p, pure=False) for p in todo]
            for f in dask_completed(futures):
                yield f.result()
        return
    pool = ProcessPoolExecutor(max_workers=workers or os.cpu_count())
    try:
        for f in as_completed([pool.submit(run_point, p) for p in todo]):
            yield f.result()
    finally:
        # Interrupted: drop the queued runs instead of waiting for them.
        pool.shutdown(wait=True, cancel_futures=True)


def sweep(
    grid: Grid,
    out: Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
    stop_after: int | None = None,
) -> Path:
    """Run the points not yet in OUT/runs, then write OUT/results.parquet; returns its path.

    `stop_after` ends the sweep after that many new results (as an interruption would).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    todo = [p for p in grid.points if not (runs / f"{p.id}.parquet").exists()]
    done = len(grid.points) - len(todo)
    progress(done, len(grid.points))
    with contextlib.closing(_execute(todo, scheduler, workers)) as finished:
        for n, row in enumerate(finished, 1):
            if "error" in row:
                raise GridError(row["error"])
            _save_row(runs, row)
            progress(done + n, len(grid.points))
            if stop_after is not None and n >= stop_after:
                raise KeyboardInterrupt
    order = {p.id: i for i, p in enumerate(grid.points)}
    rows = [pq.read_table(f).to_pylist()[0] for f in runs.glob("*.parquet")]
    rows = sorted((r for r in rows if r["point"] in order), key=lambda r: order[r["point"]])
    table = out / "results.parquet"
    pq.write_table(pa.Table.from_pylist(rows), table)
    return table


def plot(table: Path, x: str, y: str, out: Path) -> Path:
    """A PNG of `y` against `x`, one line per kernel (and per value of any other axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pyarrow.parquet as pq

    rows = pq.read_table(table).to_pylist()
    if not rows or x not in rows[0] or y not in rows[0]:
        raise GridError(f"plot: no column {x!r} or {y!r} in {table}")
    fixed = [k for k in rows[0] if k not in {x, y, "point", "seed"} and not k.startswith(("ops.", "vmstat."))]
    fixed = [
        k for k in fixed if k not in {"elapsed_s", "user_s", "system_s", "ipis_sent", "scenario", "machine"}
    ]
    fixed = [k for k in fixed if not k.startswith("interrupts.")]
    # One line per combination of the other columns; seeds are averaged.
    lines: dict[str, dict[float, list[float]]] = {}
    for r in rows:
        label = ", ".join(f"{k}={r[k]}" for k in fixed)
        lines.setdefault(label, {}).setdefault(float(r[x]), []).append(float(r[y]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, by_x in sorted(lines.items()):
        xs = sorted(by_x)
        ax.plot(xs, [sum(by_x[v]) / len(by_x[v]) for v in xs], marker="o", label=label)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"{rows[0]['scenario']} on {rows[0]['machine']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
