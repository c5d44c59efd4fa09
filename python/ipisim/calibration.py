"""`ipisim calibrate`: fit at most three declared costs of a machine profile to measured figures.

The fit is scipy's `least_squares` (trust region, bounds) on log(simulated / measured) over the
log of the free costs; its Jacobian is forward differences of whole runs, run in parallel. Runs
may be made at a smaller `--scale` (the inner scale): each figure's full-scale to inner-scale
ratio is then measured at the current costs, the inner fit is corrected by it, and the result is
run again at full scale, until the two agree (a multi-fidelity correction, at most four rounds).
The residuals reported and written are always those of the full-scale run of the written profile.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipisim
from ipisim import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MAX_FREE = 3
# A fit may start from the profile's costs and from up to MAX_STARTS - 1 more points spread over
# the bounds (a Halton sequence in log space): a least-squares fit ends in the minimum nearest
# its start, and the one with the smallest baseline residual is kept.
MAX_STARTS = 16
PREFIX = "machine.cost."
# A machine parameter may be fitted as well when it is a number with no source (machine.smt_yield).
PARAM_PREFIX = "machine."
# Forward-difference step, in log space: 10 % steps over the rounding of costs to picoseconds and
# the run-to-run reordering noise of a discrete-event run (1-2 % in a rate at small scale, which
# with a 2 % step made the Jacobian noisy enough to stall the fit), and is still local.
STEP = math.log(1.1)
# A cost fitted at least as large as another (NAME>=OTHER) is fitted as its ratio to it, up to this.
MAX_RATIO = 10.0
# The inner fit's correction has converged when full-scale and corrected inner figures agree to this.
AGREE = 0.002
ROUNDS = 4
FIGURE_HEADS = ("elapsed_s", "user_s", "system_s", "ops", "vmstat", "interrupts", "profile", "ipis_sent")


def _key(name: str, param: bool) -> str:
    """The `--set` key of a free cost, or of a free machine parameter."""
    return (PARAM_PREFIX if param else PREFIX) + name


@dataclass(frozen=True)
class FreeCost:
    """A cost of the machine profile left to the fit, with its bounds in cycles (None: default), or
    held at least as large as another free cost, `above` (a physical order: a line between sockets
    costs no less than one within a socket). With `param`, `name` is a numeric machine parameter
    (`machine.NAME`, in its own unit) instead of a cost."""

    name: str
    lo: float | None = None
    hi: float | None = None
    above: str | None = None
    param: bool = False

    @property
    def key(self) -> str:
        return _key(self.name, self.param)

    def spec(self) -> str:
        if self.above is not None:
            return f"{self.key}>={self.above}"
        bounds = f"={self.lo:g}:{self.hi:g}" if self.lo is not None and self.hi is not None else ""
        return self.key + bounds


def parse_free(text: str) -> FreeCost:
    """`machine.cost.NAME[=LO:HI]`: a cost to fit, optionally with bounds in cycles; or
    `machine.cost.NAME>=OTHER`: fitted at least as large as the free cost OTHER (at most 10x); or
    `machine.NAME=LO:HI`: a numeric machine parameter, with bounds in its unit."""
    key, sep, bounds = text.partition("=")
    if not key.startswith(PREFIX) and key.startswith(PARAM_PREFIX) and key[len(PARAM_PREFIX) :]:
        if not sep:
            raise ConfigError(f"--free {text}: a machine parameter needs bounds: machine.NAME=LO:HI")
        return FreeCost(key[len(PARAM_PREFIX) :], *_bounds(text, bounds), param=True)
    lower, ge, other = text.partition(">=")
    if ge:
        if not lower.startswith(PREFIX) or not lower[len(PREFIX) :] or not other or "=" in other:
            raise ConfigError(f"--free {text}: expected machine.cost.NAME>=OTHER")
        return FreeCost(lower[len(PREFIX) :], above=other.removeprefix(PREFIX))
    if not key.startswith(PREFIX) or not key[len(PREFIX) :]:
        raise ConfigError(f"--free {text}: expected machine.cost.NAME[=LO:HI]")
    if not sep:
        return FreeCost(key[len(PREFIX) :])
    lo_f, hi_f = _bounds(text, bounds)
    return FreeCost(key[len(PREFIX) :], lo_f, hi_f)


def _bounds(text: str, bounds: str) -> tuple[float, float]:
    lo, colon, hi = bounds.partition(":")
    try:
        lo_f, hi_f = float(lo), float(hi)
    except ValueError:
        lo_f = hi_f = math.nan
    if not colon or not (0 < lo_f < hi_f < math.inf):
        raise ConfigError(f"--free {text}: bounds must be LO:HI with 0 < LO < HI, got {bounds!r}")
    return lo_f, hi_f


def load_measured(path: Path) -> dict[str, float]:
    """Measured figures, result path -> value, from a TOML or JSON file (nested tables are joined
    with dots: `[ops] x = 1` is `ops.x`), or from an mmtests compare-kernels table (its first column:
    `Ops NAME VALUE` rows and User/System/Elapsed)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from e
    table: Mapping[str, Any]
    if path.suffix == ".json":
        try:
            table = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: malformed JSON: {e.msg} (line {e.lineno})") from e
    elif path.suffix == ".toml":
        try:
            table = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: malformed TOML: {e}") from e
    else:
        table = _mmtests_first_column(path, text)
    out: dict[str, float] = {}

    def walk(prefix: str, t: Mapping[str, Any]) -> None:
        for k, v in t.items():
            key = f"{prefix}{k}"
            if isinstance(v, Mapping):
                walk(key + ".", v)
            elif isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
                out[key] = float(v)
            else:
                raise ConfigError(f"{path}: {key}: expected a positive number, got {v!r}")

    walk("", table)
    if not out:
        raise ConfigError(f"{path}: no measured figures")
    for key in out:
        if key.partition(".")[0] not in FIGURE_HEADS:
            raise ConfigError(f"{path}: {key}: not a result path (one of {', '.join(FIGURE_HEADS)}, dotted)")
    return out


def _mmtests_first_column(path: Path, text: str) -> dict[str, float]:
    names = {"User": "user_s", "System": "system_s", "Elapsed": "elapsed_s"}
    out: dict[str, float] = {}
    for line in text.splitlines():
        words = line.split()
        try:
            if len(words) >= 3 and words[0] == "Ops":
                out[f"ops.{words[1]}"] = float(words[2])
            elif len(words) >= 2 and words[0] in names:
                out[names[words[0]]] = float(words[1])
        except ValueError:
            continue
    if not out:
        raise ConfigError(f"{path}: not TOML (.toml), JSON (.json) or an mmtests compare table")
    return out


@dataclass(frozen=True)
class Figure:
    """One measured figure and the calibrated profile's full-scale value of it."""

    path: str
    measured: float
    fitted: float

    @property
    def residual(self) -> float:
        """(fitted - measured) / measured."""
        return self.fitted / self.measured - 1


@dataclass(frozen=True)
class Fitted:
    """One free cost: where the fit started, its bounds, and where it ended, in cycles."""

    name: str
    start: float
    lo: float
    hi: float
    value: float
    above: str | None = None
    param: bool = False

    @property
    def key(self) -> str:
        return _key(self.name, self.param)

    def bounds(self) -> str:
        return f">={self.above}" if self.above is not None else f"{self.lo:g}:{self.hi:g}"


@dataclass(frozen=True)
class Calibration:
    """What `ipisim calibrate` found: the fitted costs, the figures, and the profile to write."""

    command: str
    machine: str
    costs: list[Fitted]
    figures: list[Figure]
    runs: int
    profile_toml: str

    def table(self) -> str:
        """Measured, fitted and residual per figure, then each free cost's start and fitted value."""
        w = max(len(f.path) for f in self.figures)
        lines = [f"{'figure':<{w}}  {'measured':>14}  {'fitted':>14}  {'residual':>9}"]
        lines += [
            f"{f.path:<{w}}  {f.measured:>14.6g}  {f.fitted:>14.6g}  {f.residual:>+9.2%}"
            for f in self.figures
        ]
        c = max(len(p.key) for p in self.costs)
        lines += ["", f"{'cost':<{c}}  {'start':>10}  {'bounds':>19}  {'fitted':>10}  cycles"]
        lines += [f"{p.key:<{c}}  {p.start:>10g}  {p.bounds():>19}  {p.value:>10g}" for p in self.costs]
        return "\n".join(lines) + f"\n\n{self.runs} runs\n"


Evaluate = Callable[[Sequence[Mapping[str, float]], str | None], list[list[float]]]


def _figures(
    scenario: str, machine: str | None, kernel: str | None, sets: list[tuple[str, str]], paths: list[str]
) -> tuple[list[float], dict[str, Any]]:
    """The figures of one run and its resolved machine.* config (module level, for Dask workers)."""
    r = ipisim.run(scenario, machine=machine, kernel=kernel, sets=sets)
    figures = []
    for p in paths:
        try:
            figures.append(r.value(p))
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"--measured {p}: a {scenario} result has no such figure") from None
    return figures, {k: v for k, v in r.config.items() if k.startswith("machine.")}


def _figures_multi(
    scenario: str,
    machine: str | None,
    kernel: str | None,
    runs: Sequence[tuple[list[tuple[str, str]], list[str]]],
) -> tuple[list[float], dict[str, Any]]:
    """The figures of several runs (one per variant: its sets and its paths), concatenated, and the
    first run's resolved machine.* config."""
    figures: list[float] = []
    config: dict[str, Any] = {}
    for i, (sets, paths) in enumerate(runs):
        figs, cfg = _figures(scenario, machine, kernel, sets, paths)
        figures += figs
        if i == 0:
            config = cfg
    return figures, config


def split_variant_path(key: str, variants: Mapping[str, Any]) -> tuple[str, str]:
    """A measured key of a multi-variant calibration, LABEL:PATH, as (label, path)."""
    label, sep, path = key.partition(":")
    if not sep or label not in variants:
        raise ConfigError(f"--measured {key}: give LABEL:PATH with LABEL one of {', '.join(variants)}")
    return label, path


def _cycles_text(x: float) -> str:
    """Cycles as written into sets and the profile: 6 significant digits, so files stay readable."""
    return f"{x:.6g}"


def calibrate(
    scenario: str,
    *,
    measured: Mapping[str, float],
    free: Sequence[FreeCost],
    machine: str | None = None,
    kernel: str | None = None,
    sets: Sequence[tuple[str, str]] = (),
    inner_scale: str | None = None,
    jobs: int = 1,
    scheduler: str | None = None,
    command: str | None = None,
    progress: Callable[[str], None] | None = None,
    variants: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    starts: int = 1,
) -> Calibration:
    """Fit the `free` costs so that the run's figures match `measured` (result path -> value).
    With `starts` > 1 the first round fits from that many starting points (the profile's costs,
    then a Halton sequence over the log bounds) and goes on from the best.

    Raises ConfigError before any run for a bad scenario, machine, kernel, set or cost, more
    than three free costs, or a start value outside the bounds; and after the first runs for a
    path the result does not have, a figure that no free cost moves, or free costs that move
    every figure alike (no figure set of this run can tell them apart).
    """
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    say = progress or (lambda _msg: None)
    if not free:
        raise ConfigError("--free: give at least one machine.cost.NAME to fit")
    if len(free) > MAX_FREE:
        raise ConfigError(f"--free: at most {MAX_FREE} free costs, got {len(free)}")
    names = [f.name for f in free]
    if len(set(names)) != len(names):
        raise ConfigError(f"--free: a cost is named twice in {', '.join(names)}")
    if not measured:
        raise ConfigError("--measured: no figures to fit")
    if not 1 <= starts <= MAX_STARTS:
        raise ConfigError(f"--starts: give 1 to {MAX_STARTS} starting points, got {starts}")
    decls = ipisim.describe("machine")
    known = {c["key"][len(PREFIX) :] for c in decls["costs"]}
    numeric = {p["key"] for p in decls["params"] if p["type"].startswith("number")}
    by_name = {f.name: f for f in free}
    for f in free:
        if f.param and f.key not in numeric:
            raise ConfigError(
                f"--free {f.key}: not a numeric machine parameter (see `ipisim describe machine`)"
            )
        if not f.param and f.name not in known:
            raise ConfigError(f"--free {f.key}: unknown cost (see `ipisim describe machine`)")
        other = by_name.get(f.above or "")
        if f.above is not None and (other is None or other.above is not None):
            raise ConfigError(f"--free {f.spec()}: {f.above} must be another free cost, itself not ordered")
    free_keys = {f.key: f.name for f in free}
    base_sets = [(k, v) for k, v in sets if k not in free_keys]
    ipisim.check_config(scenario, machine=machine, kernel=kernel, sets=base_sets)
    # Several variants (e.g. one per thread count): each figure is LABEL:PATH, and every point of
    # the fit runs each variant once, with its own sets on top of `sets`.
    groups: dict[str, list[str]] = {"": list(measured)}
    if variants:
        groups = {label: [] for label in variants}
        for key in measured:
            label, path = split_variant_path(key, variants)
            groups[label].append(path)
        groups = {label: ps for label, ps in groups.items() if ps}
        for label in groups:
            ipisim.check_config(scenario, machine=machine, kernel=kernel, sets=[*base_sets, *variants[label]])
    if inner_scale is not None:
        scaled = [*base_sets, ("scale", inner_scale)]
        ipisim.check_config(scenario, machine=machine, kernel=kernel, sets=scaled)
    machine_name = machine or _default_machine(scenario)
    profile = ipisim.describe(machine_name)
    start = {c["key"][len(PREFIX) :]: float(c["value"]) for c in profile["costs"]}
    start |= {
        p["key"][len(PARAM_PREFIX) :]: float(p["value"]) for p in profile["params"] if p["key"] in numeric
    }
    # A free cost's --set is where its fit starts.
    start |= {free_keys[k]: float(v) for k, v in sets if k in free_keys}

    # An ordered cost's coordinate is its ratio to the cost below it, in [1, MAX_RATIO].
    def bounds_of(f: FreeCost) -> tuple[float, float]:
        if f.above is not None:
            return 1.0, MAX_RATIO
        lo = f.lo if f.lo is not None else start[f.name] / 10
        return lo, f.hi if f.hi is not None else start[f.name] * 10

    bounds = [bounds_of(f) for f in free]
    for f, (lo, hi) in zip(free, bounds, strict=True):
        if f.above is not None:
            continue
        if start[f.name] <= 0:
            raise ConfigError(f"--free {f.key}: its profile value is 0 cycles; give bounds LO:HI")
        if not lo <= start[f.name] <= hi:
            raise ConfigError(f"--free {f.spec()}: the profile's {start[f.name]:g} cycles is out of bounds")
    keys = [f"{label}:{p}" if label else p for label, ps in groups.items() for p in ps]
    paths = keys
    target = [measured[k] for k in keys]

    # Multi-fidelity correction: figure i at full scale ~ inner figure i x ratio[i].
    ratio = [1.0] * len(measured)
    cache: dict[tuple[str | None, tuple[str, ...]], list[float]] = {}
    configs: dict[tuple[str | None, tuple[str, ...]], dict[str, Any]] = {}
    counter = [0]

    def run_many(points: Sequence[Sequence[str]], scale: str | None) -> list[list[float]]:
        todo = [tuple(p) for p in dict.fromkeys(tuple(p) for p in points) if (scale, tuple(p)) not in cache]

        def sets_of(p: Sequence[str]) -> list[tuple[str, str]]:
            extra = [("scale", scale)] if scale is not None else []
            return [*base_sets, *extra, *((f.key, v) for f, v in zip(free, p, strict=True))]

        def runs_of(p: Sequence[str]) -> list[tuple[list[tuple[str, str]], list[str]]]:
            own = variants or {}
            return [([*sets_of(p), *own.get(label, ())], ps) for label, ps in groups.items()]

        t0 = time.perf_counter()
        if scheduler:
            from distributed import Client

            with Client(scheduler, timeout="10s") as client:
                futures = [
                    client.submit(_figures_multi, scenario, machine, kernel, runs_of(p), pure=False)
                    for p in todo
                ]
                found = client.gather(futures)
        else:
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                found = list(pool.map(lambda p: _figures_multi(scenario, machine, kernel, runs_of(p)), todo))
        took = time.perf_counter() - t0
        for p, (figs, config) in zip(todo, found, strict=True):
            counter[0] += 1
            cache[(scale, p)] = figs
            configs[(scale, p)] = config
            costs = " ".join(f"{n}={v}" for n, v in zip(names, p, strict=True))
            where = f"scale {scale}" if scale is not None else "full scale"
            # Inner runs are shown as their full-scale estimate (times the current ratio).
            scaled = figs if scale is None else [f * r for f, r in zip(figs, ratio, strict=True)]
            errs = " ".join(f"{f / t - 1:+.2%}" for f, t in zip(scaled, target, strict=True))
            say(f"run {counter[0]} ({where}, {took:.1f} s): {costs}: {errs}")
        return [cache[(scale, tuple(p))] for p in points]

    below = [names.index(f.above) if f.above is not None else None for f in free]

    def as_text(u: Sequence[float]) -> list[str]:
        return [_cycles_text(math.exp(x if b is None else x + u[b])) for x, b in zip(u, below, strict=True)]

    def to_u(cycles: Sequence[float]) -> list[float]:
        logs = [math.log(c) for c in cycles]
        return [x if b is None else x - logs[b] for x, b in zip(logs, below, strict=True)]

    lo_u = [math.log(lo) for lo, _ in bounds]
    hi_u = [math.log(hi) for _, hi in bounds]
    # An ordered cost starts at its profile's ratio, brought into [1, MAX_RATIO] (the cost below
    # it is positive: checked above).
    start_cycles = [start[f.name] if f.above is None else max(start[f.name], start[f.above]) for f in free]
    u0 = [min(max(x, lo), hi) for x, lo, hi in zip(to_u(start_cycles), lo_u, hi_u, strict=True)]

    def columns(u: Sequence[float]) -> list[list[float]]:
        """u and each coordinate stepped by STEP (backwards at an upper bound)."""
        pts = [list(u)]
        for j in range(len(u)):
            v = list(u)
            v[j] += STEP if u[j] + STEP <= hi_u[j] else -STEP
            pts.append(v)
        return pts

    def figures_at(us: Sequence[Sequence[float]], scale: str | None) -> list[list[float]]:
        return run_many([as_text(u) for u in us], scale)

    def jacobian(u: Any) -> list[list[float]]:
        """d log(figure) / d log(cost) by forward differences, the steps run in parallel."""
        pts = columns(list(u))
        base, *stepped = figures_at(pts, inner_scale)
        return [
            [math.log(s[i] / base[i]) / (pts[j + 1][j] - pts[0][j]) for j, s in enumerate(stepped)]
            for i in range(len(paths))
        ]

    # Identifiability, at the start: which figures each cost moves, and whether two move them alike.
    for p, value in zip(paths, figures_at([u0], inner_scale)[0], strict=True):
        if value <= 0:
            raise ConfigError(f"--measured {p}: the simulated figure is {value:g}; a fit needs it positive")
    _check_identifiable(paths, [f.key for f in free], jacobian(u0))

    u = list(u0)
    written = as_text(u)
    if inner_scale is not None:
        full, inner = run_many([written], None)[0], run_many([written], inner_scale)[0]
        ratio[:] = [f / i for f, i in zip(full, inner, strict=True)]
    final: list[float] = []
    for round_no in range(1, ROUNDS + 1):
        log_ratio = [math.log(r) for r in ratio]

        def residuals(x: Any, log_ratio: list[float] = log_ratio) -> list[float]:
            figs = figures_at([list(x)], inner_scale)[0]
            return [math.log(f / t) + lr for f, t, lr in zip(figs, target, log_ratio, strict=True)]

        say(f"round {round_no}: fitting {', '.join(names)} on {len(paths)} figure(s)")
        best = None
        n = starts if round_no == 1 else 1  # later rounds go on from the best
        for k, u_start in enumerate(start_points(u, lo_u, hi_u, n)):
            if n > 1:
                say(f"round 1, start {k + 1} of {n}: {' '.join(as_text(u_start))}")
            fit = least_squares(
                residuals,
                u_start,
                jac=jacobian,
                bounds=(lo_u, hi_u),
                method="trf",
                xtol=1e-4,
                ftol=1e-6,
                max_nfev=40,
            )
            if best is None or fit.cost < best.cost:
                best = fit
        assert best is not None
        if n > 1:
            say(f"round 1: best of {n} starts: {' '.join(as_text(best.x))} (cost {best.cost:.4g})")
        written = as_text(best.x)  # what the profile will say, so its residuals are of these values
        u = to_u([float(v) for v in written])
        final = run_many([written], None)[0]
        if inner_scale is None:
            break
        inner = run_many([written], inner_scale)[0]
        new_ratio = [f / i for f, i in zip(final, inner, strict=True)]
        drift = max(abs(math.log(n / r)) for n, r in zip(new_ratio, ratio, strict=True))
        say(f"round {round_no}: full-scale and corrected inner figures differ by up to {drift:.2%}")
        if drift <= AGREE:
            break
        ratio[:] = new_ratio

    figures = [Figure(p, t, f) for p, t, f in zip(paths, target, final, strict=True)]
    fitted = [
        Fitted(f.name, start[f.name], lo, hi, float(v), f.above, f.param)
        for f, (lo, hi), v in zip(free, bounds, written, strict=True)
    ]
    cmd = command or command_line(scenario, machine, kernel, base_sets, free, inner_scale, "FIGURES", starts)
    toml = _profile_toml(configs[(None, tuple(written))], scenario, kernel, fitted, figures, cmd)
    return Calibration(cmd, machine_name, fitted, figures, counter[0], toml)


def start_points(u0: Sequence[float], lo: Sequence[float], hi: Sequence[float], n: int) -> list[list[float]]:
    """`u0`, then n - 1 points of the unscrambled Halton sequence (its first, the lower corner,
    left out) over the box [lo, hi]: the same points every time."""
    from scipy.stats import qmc  # type: ignore[import-untyped]

    points = [list(u0)]
    if n > 1:
        unit = qmc.Halton(d=len(u0), scramble=False).random(n)[1:]
        points += [[a + x * (b - a) for x, a, b in zip(row, lo, hi, strict=True)] for row in unit]
    return points


def _check_identifiable(paths: Sequence[str], keys: Sequence[str], jac: Sequence[Sequence[float]]) -> None:
    """Refuse a figure no free cost moves, and a pair of costs that move every figure alike."""
    for p, row in zip(paths, jac, strict=True):
        if all(abs(d) < 1e-9 for d in row):
            names = ", ".join(k.removeprefix(PREFIX) for k in keys)
            raise ConfigError(f"--measured {p}: depends on none of the free costs ({names})")
    cols = [[row[j] for row in jac] for j in range(len(keys))]
    for j, a in enumerate(cols):
        if all(abs(d) < 1e-9 for d in a):
            raise ConfigError(f"--free {keys[j]}: moves none of the measured figures")
    for j in range(len(cols)):
        for k in range(j + 1, len(cols)):
            a, b = cols[j], cols[k]
            cos = sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
                sum(x * x for x in a) * sum(y * y for y in b)
            )
            if abs(cos) > 0.999:
                raise ConfigError(
                    f"--free {keys[j]} and {keys[k]} move every measured figure alike "
                    f"(cosine {cos:.4f}): no figure set of this run can tell them apart"
                )


def _default_machine(scenario: str) -> str:
    """The machine a run of `scenario` uses when none is given (the scenario's own, else host-2cpu)."""
    probe = ipisim.describe(scenario)
    return str(probe.get("machine") or "host-2cpu")


def command_line(
    scenario: str,
    machine: str | None,
    kernel: str | None,
    sets: Sequence[tuple[str, str]],
    free: Sequence[FreeCost],
    inner_scale: str | None,
    measured_file: str,
    starts: int = 1,
) -> str:
    """The command line that makes this calibration, as written into the profile's sources."""
    words = ["ipisim", "calibrate", scenario]
    words += ["--machine", machine] if machine else []
    words += ["--kernel", kernel] if kernel else []
    for k, v in sets:
        words += ["--set", f"{k}={v}"]
    words += ["--scale", inner_scale] if inner_scale else []
    words += ["--starts", str(starts)] if starts > 1 else []
    for f in free:
        words += ["--free", f.spec()]
    words += ["--measured", measured_file]
    return shlex.join(words)


def _toml_string(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def _profile_toml(
    cfg: Mapping[str, Any],
    scenario: str,
    kernel: str | None,
    fitted: Sequence[Fitted],
    figures: Sequence[Figure],
    command: str,
) -> str:
    """The machine profile of a run's resolved `machine.*` config, with the fitted costs in place."""
    kinds = {p["key"]: p["type"] for p in ipisim.describe("machine")["params"]}
    residuals = ", ".join(f"{f.path} {f.measured:g} {f.residual:+.2%}" for f in figures)
    by_name = {f.name: f for f in fitted if not f.param}
    params = {f.key for f in fitted if f.param}
    lines = [
        f"# Calibrated by `ipisim calibrate` from {cfg['machine.name']}: {len(fitted)} free cost(s)",
        f"# fitted to measured figures of {scenario} with {kernel or 'linux-6.18'}; the rest as there.",
        "[machine]",
    ]
    for key, kind in kinds.items():
        if key.startswith(PREFIX) or key not in cfg:
            continue
        v = cfg[key]
        name = key.partition(".")[2]
        if key == "machine.name":
            v = f"{v}-calibrated"
        elif key == "machine.description":
            v = f"{v}; calibrated: {', '.join(f.name for f in fitted)}"
        if kind.split()[0] == "duration":  # "duration [0, 1e4 s]"
            text = _toml_string(f"{v}ps")
        elif isinstance(v, bool):
            text = "true" if v else "false"
        elif isinstance(v, int | float):
            text = repr(v)
        else:
            text = _toml_string(str(v))
        source = f"  # calibrated: {command}; residuals {residuals}" if key in params else ""
        lines.append(f"{name} = {text}{source}")
    lines.append("")
    lines.append("[cost]")
    for key, v in cfg.items():
        if not key.startswith(PREFIX):
            continue
        name = key[len(PREFIX) :]
        if name in by_name:
            cycles, source = by_name[name].value, f"calibrated: {command}; residuals {residuals}"
        else:
            cycles, source = v["cycles"], v["source"]
        lines.append(f"{name} = {{ cycles = {cycles!r}, source = {_toml_string(source)} }}")
    return "\n".join(lines) + "\n"
