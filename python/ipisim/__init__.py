"""ipisim: a fast, deterministic simulator of SMP memory management and IPIs.

>>> import ipisim
>>> r = ipisim.run("shootdown", machine="host-2cpu", kernel="linux-6.18", sets={"batch": 33})
>>> r.interrupts["TLB"]
[0, 16]
>>> c = ipisim.compare("shootdown", {"new": "linux-6.18", "old": "linux-4.3"}, sets={"remote": "sleeping"})
>>> print(c.table())  # the mmtests compare-kernels table; c.to_pandas() for a DataFrame
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipisim import _native
from ipisim._native import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from ipisim.calibration import Calibration, FreeCost
    from ipisim.grid import Grid

__version__: str = _native.__version__
__all__ = [
    "CheckResult",
    "Comparison",
    "ConfigError",
    "RunResult",
    "SweepResult",
    "Trace",
    "Variant",
    "calibrate",
    "check",
    "check_config",
    "check_seed",
    "compare",
    "describe",
    "list_builtins",
    "parse_variant",
    "run",
    "sweep",
]

Sets = Mapping[str, object] | Iterable[tuple[str, object]]


#: Seeds are unsigned 64-bit integers, as the core's RNG takes them.
SEED_MAX = 2**64 - 1


def check_seed(seed: object, what: str = "seed") -> int:
    """`seed` as an int in [0, 2^64 - 1], or a ConfigError naming `what`, the value and the range."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ConfigError(f"{what}: {seed!r} is out of range [0, {SEED_MAX}]")
    return seed


def _set_pairs(sets: Sets) -> list[tuple[str, str]]:
    items = sets.items() if isinstance(sets, Mapping) else sets
    out = []
    for k, v in items:
        text = str(v).lower() if isinstance(v, bool) else str(v)
        out.append((str(k), text))
    return out


@dataclass(frozen=True)
class Trace:
    """A recorded window of a run: Chrome trace-event JSON (opens in Perfetto) and ftrace text."""

    chrome_json: str
    ftrace: str
    truncated: bool

    def write(self, path: str | Path) -> tuple[Path, Path]:
        """Write PATH (the JSON) and PATH with suffix .txt (the ftrace text); return both."""
        json_path = Path(path)
        text_path = json_path.with_suffix(".txt")
        json_path.write_text(self.chrome_json)
        text_path.write_text(self.ftrace)
        return json_path, text_path


@dataclass(frozen=True)
class RunResult:
    """One simulation's result: the parsed result JSON plus convenient views of it."""

    data: dict[str, Any]
    events: int
    trace: Trace | None = None

    @property
    def elapsed_s(self) -> float:
        return float(self.data["elapsed_s"])

    @property
    def user_s(self) -> float:
        return float(self.data["user_s"])

    @property
    def system_s(self) -> float:
        return float(self.data["system_s"])

    @property
    def interrupts(self) -> dict[str, list[int]]:
        return dict(self.data["interrupts"])

    @property
    def vmstat(self) -> dict[str, int]:
        return dict(self.data["vmstat"])

    @property
    def tracepoints(self) -> dict[str, int]:
        return dict(self.data["tracepoints"])

    @property
    def ops(self) -> dict[str, Any]:
        return dict(self.data["ops"])

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.data["config"])

    @property
    def violations(self) -> str:
        """The TLB-coherence checker's count by kind, e.g. '1,024 violations (1,024 use-after-free)',
        or '' for a clean run."""
        c = self.data["check"]
        kinds = ", ".join(f"{n:,} {k}" for k, n in c["by_kind"].items() if n)
        return f"{c['violations']:,} violations ({kinds})" if c["violations"] else ""

    def value(self, path: str) -> float:
        """One figure by dotted path: `elapsed_s`, `ops.NAME`, `vmstat.NAME`, `interrupts.ROW` (summed
        over CPUs) or `profile.FUNCTION` (its percent of CPU time, 0 if it has none). KeyError if absent."""
        head, _, rest = path.partition(".")
        if head == "profile":
            return float(next((p["percent"] for p in self.data["profile"] if p["function"] == rest), 0.0))
        value = self.data[head] if not rest else self.data[head][rest]
        return float(sum(value)) if isinstance(value, list) else float(value)

    def to_json(self) -> str:
        """The result as pretty JSON text; byte-identical for the same inputs."""
        return json.dumps(self.data, indent=2) + "\n"

    def profile_report(self, comm: str | None = None, top: int = 20) -> str:
        """The profile as `perf report` prints it, of all CPUs or of one command's tasks."""
        from ipisim.perf import render_report

        return render_report(self.data, comm, top)

    def row(self) -> dict[str, Any]:
        """The result as one flat row: times, numeric ops, interrupt rows summed, vmstat, config."""
        row: dict[str, Any] = {"scenario": self.data["scenario"], "machine": self.data["machine"]}
        row["kernel"] = self.data["kernel"]
        row |= {"elapsed_s": self.elapsed_s, "user_s": self.user_s, "system_s": self.system_s}
        row |= {f"ops.{k}": float(v) for k, v in self.ops.items() if _is_number(v)}
        row |= {f"interrupts.{k}": sum(v) for k, v in self.interrupts.items()}
        row |= {f"vmstat.{k}": v for k, v in self.vmstat.items()}
        row["ipis_sent"] = self.data["ipis_sent"]
        return row

    def to_pandas(self) -> pd.DataFrame:
        """A one-row DataFrame of row()."""
        import pandas as pd

        return pd.DataFrame([self.row()])


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def run(
    scenario: str,
    *,
    machine: str | None = None,
    kernel: str | None = None,
    sets: Sets = (),
    seed: int = 1,
    trace_window: tuple[float, float] | None = None,
    max_memory: str | int | None = None,
) -> RunResult:
    """Run `scenario` on a machine profile and kernel preset (built-in names or .toml paths).

    With `trace_window=(start_s, end_s)`, also record that span of simulated time as a Trace.
    `max_memory` (bytes, or a size such as "4GiB") caps the host memory the run may need; by
    default it is what /proc/meminfo calls available. A run that would need more is refused.
    """
    seed = check_seed(seed)
    limit = None if max_memory is None else str(max_memory)
    if trace_window is None:
        text, events = _native.run(scenario, machine, kernel, _set_pairs(sets), seed, limit)
        return RunResult(json.loads(text), events)
    start, end = trace_window
    text, events, chrome, ftrace, cut = _native.run_traced(
        scenario, machine, kernel, _set_pairs(sets), seed, start, end, limit
    )
    return RunResult(json.loads(text), events, Trace(chrome, ftrace, cut))


def check_config(
    scenario: str,
    *,
    machine: str | None = None,
    kernel: str | None = None,
    sets: Sets = (),
    seed: int = 1,
    max_memory: str | int | None = None,
) -> None:
    """Raise ConfigError where `run` would, with the same arguments, without simulating anything."""
    limit = None if max_memory is None else str(max_memory)
    _native.check(scenario, machine, kernel, _set_pairs(sets), check_seed(seed), limit)


def calibrate(
    scenario: str,
    *,
    measured: Mapping[str, float],
    free: Iterable[str | FreeCost],
    machine: str | None = None,
    kernel: str | None = None,
    sets: Sets = (),
    inner_scale: str | None = None,
    jobs: int = 1,
    scheduler: str | None = None,
    progress: Callable[[str], None] | None = None,
    variants: Mapping[str, Sets] | None = None,
    starts: int = 1,
) -> Calibration:
    """Fit at most three costs of `machine` (`"machine.cost.NAME[=LO:HI]"`,
    `"machine.cost.NAME>=OTHER"` or FreeCost) so that a run of `scenario` gives the `measured`
    figures (result path -> value), as `ipisim calibrate` does; `.profile_toml` is the calibrated
    profile, `.table()` what the command prints. With `variants` (label -> sets added to `sets`),
    each figure is `LABEL:PATH` of that variant's run. With `starts` > 1 the fit also starts from
    points spread over the bounds and keeps the best."""
    from ipisim.calibration import FreeCost, parse_free
    from ipisim.calibration import calibrate as fit

    return fit(
        scenario,
        measured=measured,
        free=[f if isinstance(f, FreeCost) else parse_free(f) for f in free],
        machine=machine,
        kernel=kernel,
        sets=_set_pairs(sets),
        inner_scale=inner_scale,
        jobs=jobs,
        scheduler=scheduler,
        progress=progress,
        variants={k: _set_pairs(v) for k, v in variants.items()} if variants else None,
        starts=starts,
    )


def list_builtins() -> dict[str, list[dict[str, str]]]:
    """Built-in scenarios, machines and kernel presets, each with a one-line description."""
    result: dict[str, list[dict[str, str]]] = json.loads(_native.list_builtins())
    return result


def describe(thing: str) -> dict[str, Any]:
    """Every parameter of a scenario, machine profile or kernel preset, with units and sources."""
    result: dict[str, Any] = json.loads(_native.describe(thing))
    return result


@dataclass(frozen=True)
class Variant:
    """One kernel variant of a comparison: its label, preset, its own sets and its result."""

    label: str
    kernel: str
    sets: list[tuple[str, str]]
    result: RunResult


@dataclass(frozen=True)
class Comparison:
    """Kernel variants of one scenario, run alike: what `ipisim compare` prints."""

    scenario: str
    variants: list[Variant]

    def table(self) -> str:
        """The mmtests compare-kernels table, the User/System/Elapsed block and the counters."""
        from ipisim.mmtests import metrics_of, render_compare, render_counters, render_duration, series_of

        series = [series_of(v.label, v.result) for v in self.variants]
        names = list(dict.fromkeys(name for s in series for name in s.counters))
        return "\n".join(
            [
                render_compare(series, metrics_of(self.variants[0].result.data)),
                render_duration(series),
                render_counters(series, names),
            ]
        )

    def profile_diff(self, comm: str | None = None, top: int = 20) -> str:
        """The variants' profiles as `perf diff` prints them against the first."""
        from ipisim.perf import render_diff

        labels = [v.label for v in self.variants]
        return render_diff(labels, [v.result.data for v in self.variants], comm, top)

    def to_json(self) -> str:
        """Every variant's full result, as `ipisim compare --json` writes it."""
        records = [
            {"label": v.label, "kernel": v.kernel, "sets": v.sets, "result": v.result.data}
            for v in self.variants
        ]
        return json.dumps({"scenario": self.scenario, "variants": records}, indent=2) + "\n"

    def to_pandas(self) -> pd.DataFrame:
        """One row per variant (RunResult.row()), indexed by label."""
        import pandas as pd

        return pd.DataFrame([v.result.row() for v in self.variants], index=[v.label for v in self.variants])


def parse_variant(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Split "PRESET[,key=value...]" into the preset and the variant's own sets."""
    preset, *pairs = text.split(",")
    if not preset.strip():
        raise ConfigError(f"kernel variant {text!r}: expected PRESET[,key=value...]")
    sets = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"kernel variant {text!r}: expected key=value after the preset, got {pair!r}")
        sets.append((key.strip(), value.strip()))
    return preset.strip(), sets


def compare(
    scenario: str,
    kernels: Mapping[str, str],
    *,
    machine: str | None = None,
    sets: Sets = (),
    seed: int = 1,
    trace_window: tuple[float, float] | None = None,
    jobs: int = 1,
    progress: Callable[[Variant, int, int], None] | None = None,
) -> Comparison:
    """Run `scenario` once per kernel variant, {label: "PRESET[,key=value...]"}, `jobs` at a time.

    `sets` apply to every variant before the variant's own; `progress(variant, i, n)` is called
    as each one finishes (the i-th to finish). The variants keep their given order, and each run
    is deterministic, so the result does not depend on `jobs`.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    common = _set_pairs(sets)
    parsed = [(label, *parse_variant(text)) for label, text in kernels.items()]
    # Every variant is checked before any runs: a mistake in the last one costs no full run.
    for _, preset, own in parsed:
        check_config(scenario, machine=machine, kernel=preset, sets=common + own, seed=seed)

    def one(label: str, preset: str, own: list[tuple[str, str]]) -> Variant:
        both = common + own
        r = run(scenario, machine=machine, kernel=preset, sets=both, seed=seed, trace_window=trace_window)
        return Variant(label, preset, both, r)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, *item) for item in parsed]
        for i, done in enumerate(as_completed(futures), 1):
            if progress:
                progress(done.result(), i, len(futures))
        return Comparison(scenario, [f.result() for f in futures])


@dataclass(frozen=True)
class SweepResult:
    """A finished sweep: its Parquet table, one row per point in grid order."""

    table: Path

    def rows(self) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        rows: list[dict[str, Any]] = pq.read_table(self.table).to_pylist()
        return rows

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.read_parquet(self.table)

    def plot(self, x: str, y: str, out: str | Path) -> Path:
        """A PNG of column `y` against column `x`, one line per kernel."""
        from ipisim import grid

        return grid.plot(self.table, x, y, Path(out))


def sweep(
    grid_file: str | Path | Grid,
    out: str | Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Run every point of a grid file not yet under OUT (locally, or on the Dask `scheduler`)."""
    from ipisim import grid

    g = grid_file if isinstance(grid_file, grid.Grid) else grid.load_grid(Path(grid_file))
    table = grid.sweep(g, Path(out), scheduler=scheduler, workers=workers, progress=progress or _quiet)
    return SweepResult(table)


def _quiet(done: int, total: int) -> None:
    pass


@dataclass(frozen=True)
class CheckResult:
    """A seed search by the TLB-coherence checker: the seeds run, and the first that failed."""

    scenario: str
    machine: str | None
    kernel: str | None
    seeds_run: int
    sets: list[tuple[str, str]]
    failing_seed: int | None
    failure: RunResult | None

    @property
    def clean(self) -> bool:
        return self.failing_seed is None

    def reproduce(self) -> str:
        """The `ipisim run` command that replays the failing seed."""
        from shlex import quote

        parts = ["ipisim", "run", self.scenario]
        parts += ["--machine", self.machine] if self.machine else []
        parts += ["--kernel", self.kernel] if self.kernel else []
        for k, v in self.sets:
            parts += ["--set", f"{k}={v}"]
        parts += ["--seed", str(self.failing_seed), "--json", "violation.json"]
        return " ".join(quote(p) for p in parts)


def check(
    scenario: str,
    *,
    seeds: int = 1000,
    first_seed: int = 1,
    machine: str | None = None,
    kernel: str | None = None,
    sets: Sets = (),
    jitter: float = 0.05,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> CheckResult:
    """Run `scenario` for seeds first_seed.. until one breaks a TLB-coherence invariant.

    Each seed perturbs timing (busy steps stretched by up to `jitter`) and shuffles the threads
    over the CPUs. The scenario's small check shape applies first, then `sets`. Seeds run `jobs`
    at a time; the lowest failing seed is reported, whatever the order they finished in.
    """
    from concurrent.futures import ThreadPoolExecutor

    check_seed(first_seed, "first_seed")
    if seeds >= 1:
        check_seed(first_seed + seeds - 1, "first_seed + seeds - 1")
    shape = [(k, str(v)) for k, v in describe(scenario)["check"].items()]
    perturb = [("sched.jitter", str(jitter)), ("sched.placement", "shuffled")]
    all_sets = shape + perturb + _set_pairs(sets)

    def one(seed: int) -> RunResult:
        return run(scenario, machine=machine, kernel=kernel, sets=all_sets, seed=seed)

    done, jobs = 0, max(1, jobs)
    # Seeds go out in chunks of four per worker, so a failure stops the search soon.
    chunk_size, end = jobs * 4, first_seed + seeds
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for start in range(first_seed, end, chunk_size):
            chunk = range(start, min(start + chunk_size, end))
            for seed, r in zip(chunk, pool.map(one, chunk), strict=True):
                done += 1
                if r.data["check"]["violations"]:
                    return CheckResult(scenario, machine, kernel, done, all_sets, seed, r)
            if progress:
                progress(done, seeds)
    return CheckResult(scenario, machine, kernel, done, all_sets, None, None)
