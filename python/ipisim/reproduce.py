"""`ipisim reproduce`: run every seed experiment and compare with the published figures.

The published figures and their sources live in data/published.json. Each metric is either a
simulated value (`kind: value`) or the mmtests gain of one variant over another (`kind: gain`,
100 - new * 100 / base: positive is better), checked against a relative, absolute or factor
tolerance, or a lower bound (`min`) where the source states one.
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import ipisim
from ipisim import ConfigError
from ipisim.calibration import FreeCost, parse_free, split_variant_path
from ipisim.mmtests import metrics_of, pdiff, pndiff, render_compare, render_duration, series_of

CALIBRATED_SUFFIX = "-calibrated"


@dataclass(frozen=True)
class Entry:
    """One published figure next to the simulated ones: physics-only and on the calibrated profile.

    A `target` is a baseline figure the calibrated profile was fitted to: it has a residual, not a
    verdict, in the calibrated column. Every other figure is a prediction.
    """

    id: str
    experiment: str
    metric: str
    unit: str
    published: float
    tolerance: str
    expect: str
    target: bool
    physics: float
    physics_pass: bool
    calibrated: float
    calibrated_pass: bool | None  # None for a calibration target


@dataclass(frozen=True)
class CalibrationSpec:
    """A calibration declared in published.json: what `ipisim calibrate --experiment ID` runs."""

    machine_profile: str
    experiment: str
    variant: str
    scenario: str
    kernel: str
    sets: list[tuple[str, str]]
    measured: dict[str, float]
    free: list[FreeCost]
    inner_scale: str | None
    # A calibration on several variants of one kernel (e.g. one per thread count): label -> sets,
    # and `measured` keys are LABEL:PATH. Empty for a one-variant calibration.
    variant_sets: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # Starting points of the fit (`ipisim calibrate --starts`).
    starts: int = 1

    def targets(self) -> list[tuple[str, str]]:
        """(variant label, result path) of every fitted figure."""
        if not self.variant_sets:
            return [(self.variant, path) for path in self.measured]
        return [split_variant_path(key, self.variant_sets) for key in self.measured]


def _load() -> dict[str, Any]:
    text = resources.files("ipisim").joinpath("data/published.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def load_published() -> list[dict[str, Any]]:
    """The experiments of data/published.json."""
    experiments: list[dict[str, Any]] = _load()["experiments"]
    return experiments


def load_calibrations() -> list[CalibrationSpec]:
    """The calibrations of data/published.json, one per machine profile."""
    experiments = {e["id"]: e for e in load_published()}
    out = []
    for c in _load()["calibrations"]:
        e = experiments[c["experiment"]]
        labels = c.get("variants") or [c["variant"]]
        vs = [next(v for v in e["variants"] if v["label"] == label) for label in labels]
        v = vs[0]
        if any(x["kernel"] != v["kernel"] for x in vs):
            raise ConfigError(f"published.json: calibration of {e['id']}: its variants must share a kernel")
        multi = "variants" in c
        out.append(
            CalibrationSpec(
                machine_profile=c["machine_profile"],
                experiment=e["id"],
                variant=v["label"],
                scenario=e["scenario"],
                kernel=v["kernel"],
                sets=[] if multi else sorted(v["sets"].items()),
                measured={k: float(x) for k, x in c["figures"].items()},
                free=[parse_free(f) for f in c["free"]],
                inner_scale=c["inner_scale"],
                variant_sets={x["label"]: sorted(x["sets"].items()) for x in vs} if multi else {},
                starts=int(c.get("starts", 1)),
            )
        )
    return out


def calibration_spec(experiment: str) -> CalibrationSpec:
    """The calibration of `experiment`'s machine profile (ConfigError if it has none)."""
    experiments = {e["id"]: e for e in load_published()}
    if experiment not in experiments:
        raise ConfigError(f"--experiment: unknown {experiment!r} (one of {', '.join(experiments)})")
    machine = experiments[experiment]["machine_profile"]
    spec = next((c for c in load_calibrations() if c.machine_profile == machine), None)
    if spec is None:
        raise ConfigError(f"--experiment {experiment}: published.json declares no calibration of {machine}")
    return spec


def _tolerance_text(tol: Mapping[str, float]) -> str:
    if "min" in tol:
        return f"at least {tol['min']:g}"
    if "factor" in tol:
        return f"within {tol['factor']:g}x"
    if "relative" in tol:
        return f"±{tol['relative']:.0%}"
    return f"±{tol['absolute']:g} points"


def _check(published: float, simulated: float, tol: Mapping[str, float]) -> tuple[bool, str]:
    if "min" in tol:
        ok = simulated >= tol["min"]
    elif "factor" in tol:
        ok = published / tol["factor"] <= simulated <= published * tol["factor"]
    elif "relative" in tol:
        ok = abs(simulated - published) <= tol["relative"] * abs(published)
    else:
        ok = abs(simulated - published) <= tol["absolute"]
    return ok, _tolerance_text(tol)


Expect = str | Mapping[str, str] | None


def _expect_text(expect: Expect) -> str:
    if expect is None:
        return ""
    if isinstance(expect, str):
        return "> 0" if expect == "positive" else "< 0"
    (rel, other), *_ = expect.items()
    return f"{'<' if rel == 'below' else '>'} {other}"


def _direction_holds(expect: Expect, value: float, values: Mapping[str, float]) -> bool:
    """What the publication asserts besides the number: a sign, or an order against another figure."""
    if expect is None:
        return True
    if isinstance(expect, str):
        return value > 0 if expect == "positive" else value < 0
    (rel, other), *_ = expect.items()
    return value < values[other] if rel == "below" else value > values[other]


def _values(experiment: Mapping[str, Any], results: Mapping[str, ipisim.RunResult]) -> dict[str, float]:
    """Every metric of one experiment, keyed by id, from its variants' results keyed by label."""
    out = {}
    for m in experiment["metrics"]:
        new = results[m["variant"]].value(m["path"])
        if m["kind"] == "value":
            out[m["id"]] = new
        else:
            # "gain": lower is better (times); "rise": higher is better (throughput).
            diff = pndiff if m["kind"] == "gain" else pdiff
            out[m["id"]] = diff(new, results[m["base"]].value(m["path"]))
    return out


def evaluate(
    experiment: Mapping[str, Any],
    physics: Mapping[str, ipisim.RunResult],
    calibrated: Mapping[str, ipisim.RunResult],
    calibrations: Sequence[CalibrationSpec] = (),
) -> list[Entry]:
    """Every metric of one experiment, physics-only and calibrated, each checked on its tolerance and
    on the direction its publication asserts."""
    targets = {(c.experiment, label, path) for c in calibrations for label, path in c.targets()}
    p_values, c_values = _values(experiment, physics), _values(experiment, calibrated)
    entries = []
    for m in experiment["metrics"]:
        expect = m.get("expect")

        def passes(values: Mapping[str, float], m: Mapping[str, Any] = m, expect: Expect = expect) -> bool:
            ok, _ = _check(m["published"], values[m["id"]], m["tolerance"])
            return ok and _direction_holds(expect, values[m["id"]], values)

        target = m["kind"] == "value" and (experiment["id"], m["variant"], m["path"]) in targets
        entries.append(
            Entry(
                id=m["id"],
                experiment=experiment["id"],
                metric=m["metric"],
                unit=m["unit"],
                published=m["published"],
                tolerance=_tolerance_text(m["tolerance"]),
                expect=_expect_text(expect),
                target=target,
                physics=p_values[m["id"]],
                physics_pass=passes(p_values),
                calibrated=c_values[m["id"]],
                calibrated_pass=None if target else passes(c_values),
            )
        )
    return entries


RunKey = tuple[str, str, str, tuple[tuple[str, str], ...]]


def profiles(experiment: Mapping[str, Any], calibrations: Sequence[CalibrationSpec]) -> tuple[str, str]:
    """The physics-only and calibrated machine profiles of an experiment (the same where its machine
    has no calibration)."""
    machine = experiment["machine_profile"]
    calibrated = any(c.machine_profile == machine for c in calibrations)
    return machine, machine + CALIBRATED_SUFFIX if calibrated else machine


def _simulated(machine: str) -> str:
    """What a profile simulates: its parameters and costs, not its name or description. A calibrated
    profile whose fit stayed at the physics-only costs runs as that one, so the run is shared."""
    d = ipisim.describe(machine)
    shown = ("machine.name", "machine.description")
    params = [(p["key"], p["value"]) for p in d["params"] if p["key"] not in shown]
    return json.dumps([params, [(c["key"], c["value"]) for c in d["costs"]]])


def run_all(
    experiments: Sequence[Mapping[str, Any]],
    *,
    quick: bool,
    progress: Callable[[str], None],
    jobs: int = 1,
    calibrations: Sequence[CalibrationSpec] = (),
) -> dict[tuple[str, str], dict[str, ipisim.RunResult]]:
    """Run every variant of every experiment on its physics-only and calibrated profiles (shared runs
    run once), `jobs` at a time; keyed by (experiment id, profile) and label. Each run is
    deterministic, so the order they finish in changes nothing."""
    runs: dict[RunKey, tuple[str, str, dict[str, Any]]] = {}
    keys: dict[tuple[str, str, str], RunKey] = {}
    for e in experiments:
        for machine in dict.fromkeys(profiles(e, calibrations)):
            simulated = _simulated(machine)
            for v in e["variants"]:
                sets = {**v["sets"], **(e["quick_sets"] if quick else {})}
                key: RunKey = (e["scenario"], simulated, v["kernel"], tuple(sorted(sets.items())))
                runs.setdefault(key, (f"{e['id']} {v['label']} on {machine}", machine, sets))
                keys[(e["id"], machine, v["label"])] = key

    done = 0
    lock = threading.Lock()

    def one(key: RunKey) -> ipisim.RunResult:
        nonlocal done
        scenario, _, kernel, _ = key
        name, machine, sets = runs[key]
        t0 = time.perf_counter()
        with lock:  # one line at a time from the pool's threads
            progress(f"{name} ({kernel}) ...")
        r = ipisim.run(scenario, machine=machine, kernel=kernel, sets=sets)
        # A variant that is unsafe as written (seed 001's PFN list) says so beside its time.
        unsafe = f"; TLB check: {r.violations}" if r.violations else ""
        with lock:
            done += 1
            progress(f"[{done}/{len(runs)}] {name}: {time.perf_counter() - t0:.1f} s{unsafe}")
        return r

    # The native runs release the GIL, so threads run them in parallel.
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        cache = dict(zip(runs, pool.map(one, runs), strict=True))
    out: dict[tuple[str, str], dict[str, ipisim.RunResult]] = {}
    for (eid, machine, label), key in keys.items():
        out.setdefault((eid, machine), {})[label] = cache[key]
    return out


def _fmt(x: float, unit: str) -> str:
    """Thousands grouped; a unitless ratio to 4 places, anything else to 2."""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.2f}" if unit else f"{x:.4f}"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _calibrated_cell(e: Entry) -> str:
    """A prediction's verdict, or a calibration target's residual (a fitted figure is no pass)."""
    if e.target:
        return f"target {e.calibrated / e.published - 1:+.1%}"
    return _verdict(e.calibrated_pass is True)


def render_table(entries: Sequence[Entry]) -> str:
    """Published, physics-only and calibrated figures, tolerance, asserted direction and verdicts."""
    head = ("id", "published", "physics-only", "calibrated", "tolerance", "asserts", "physics", "calibrated")
    rows = [
        (
            e.id,
            f"{_fmt(e.published, e.unit)} {e.unit}",
            f"{_fmt(e.physics, e.unit)} {e.unit}",
            f"{_fmt(e.calibrated, e.unit)} {e.unit}",
            e.tolerance,
            e.expect,
            _verdict(e.physics_pass),
            _calibrated_cell(e),
        )
        for e in entries
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i in (0, 5) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [head, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def score(entries: Sequence[Entry], calibrations: Sequence[CalibrationSpec]) -> str:
    """The prediction score on the calibrated profiles, then the physics-only one."""
    predictions = [e for e in entries if not e.target]
    figures = sum(len(c.measured) for c in calibrations)
    free = sum(len(c.free) for c in calibrations)
    return (
        f"predictions: {sum(e.calibrated_pass is True for e in predictions)} of {len(predictions)} within"
        " tolerance;"
        f" calibrated on {figures} baseline figures, {free} free costs\n"
        f"physics-only: {sum(e.physics_pass for e in entries)} of {len(entries)} figures within tolerance\n"
    )


def _bars_svg(entries: Sequence[Entry]) -> str:
    """A horizontal bar chart: each figure, physics-only (upper bar) and calibrated (lower bar), as a
    multiple of the published one; a calibration target's lower bar is grey."""
    width, row = 760, 44
    rows = []
    for i, e in enumerate(entries):
        y = 10 + i * row
        rows.append(f'<text x="0" y="{y + 20}" font-size="12">{html.escape(e.id)}</text>')
        bars = ((e.physics, e.physics_pass, False), (e.calibrated, e.calibrated_pass is True, e.target))
        for k, (value, ok, target) in enumerate(bars):
            ratio = value / e.published if e.published else 0.0
            bar = max(0.0, min(ratio, 4.0)) / 4.0 * 360
            color = "#9e9e9e" if target else "#2e7d32" if ok else "#c62828"
            top = y + k * 18
            rows.append(
                f'<rect x="250" y="{top}" width="{bar:.1f}" height="15" fill="{color}"/>'
                f'<text x="{255 + bar:.1f}" y="{top + 12}" font-size="11">'
                f"{ratio:.2f}x {'calibrated' if k else 'physics-only'}</text>"
            )
    one = 250 + 360 / 4
    height = 20 + row * len(entries)
    axis = f'<line x1="{one}" y1="0" x2="{one}" y2="{height}" stroke="#333" stroke-dasharray="4 3"/>'
    label = f'<text x="{one + 3}" y="{height - 2}" font-size="11">published = 1x</text>'
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
    return svg + "".join(rows) + axis + label + "</svg>"


def _interrupts_svg(runs: Mapping[str, ipisim.RunResult]) -> str:
    """Call-function interrupts taken in each second of each variant's run (`vmstat 1`'s `in` less
    the timer), one line a variant; empty when every run is shorter than 3 s or took none."""
    series = {label: r.data["call_function_interrupts_per_s"] for label, r in runs.items()}
    seconds = max(len(v) for v in series.values())
    top = max(max(v, default=0) for v in series.values())
    if seconds < 3 or top == 0:
        return ""
    width, height, left, bottom = 760, 180, 60, 20
    colors = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + bottom}">']
    # The legend takes the top 20 px; the plot runs from there down to `height`.
    scale_x, scale_y = (width - left) / (seconds - 1), (height - 20) / top
    for i, (label, v) in enumerate(series.items()):
        points = " ".join(f"{left + scale_x * t:.1f},{height - scale_y * n:.1f}" for t, n in enumerate(v))
        color = colors[i % len(colors)]
        parts.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        x = left + 5 + 110 * i
        parts.append(f'<text x="{x}" y="12" font-size="11" fill="{color}">{html.escape(label)}</text>')
    parts.append(f'<text x="0" y="24" font-size="11">{top:,}/s</text>')
    parts.append(f'<text x="0" y="{height}" font-size="11">0</text>')
    caption = f"call-function interrupts per second, 0 to {seconds} s of simulated time"
    parts.append(f'<text x="{left}" y="{height + bottom - 4}" font-size="11">{caption}</text>')
    return "".join(parts) + "</svg>"


def render_html(
    experiments: Sequence[Mapping[str, Any]],
    results: Mapping[tuple[str, str], Mapping[str, ipisim.RunResult]],
    entries: Sequence[Entry],
    calibrations: Sequence[CalibrationSpec],
    *,
    quick: bool,
) -> str:
    """A self-contained report: the score and summary table, then one section per experiment."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>ipisim reproduce</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "pre{background:#f4f4f4;padding:1em;overflow-x:auto}"
        "td,th{padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
        ".PASS{color:#2e7d32}.FAIL{color:#c62828}</style></head><body>",
        f"<h1>ipisim reproduce{' (quick: scaled down)' if quick else ''}</h1>",
        f"<p>ipisim {html.escape(ipisim.__version__)}</p>",
        f"<pre>{html.escape(score(entries, calibrations))}</pre>",
        "<table><tr><th>id</th><th>published</th><th>physics-only</th><th>calibrated</th><th>tolerance</th>"
        "<th>asserts</th><th>physics</th><th>calibrated</th></tr>",
    ]
    for e in entries:
        cell = _calibrated_cell(e)
        parts.append(
            f"<tr><td>{html.escape(e.id)}</td><td>{_fmt(e.published, e.unit)} {html.escape(e.unit)}</td>"
            f"<td>{_fmt(e.physics, e.unit)} {html.escape(e.unit)}</td>"
            f"<td>{_fmt(e.calibrated, e.unit)} {html.escape(e.unit)}</td><td>{html.escape(e.tolerance)}</td>"
            f"<td>{html.escape(e.expect)}</td><td class='{_verdict(e.physics_pass)}'>"
            f"{_verdict(e.physics_pass)}</td><td class='{cell[:4]}'>{html.escape(cell)}</td></tr>"
        )
    parts.append("</table>")
    for exp in experiments:
        mine = [e for e in entries if e.experiment == exp["id"]]
        parts += [
            f"<h2>{html.escape(exp['id'])}: {html.escape(exp['title'])}</h2>",
            f"<p>{html.escape(exp['author'])}, {html.escape(exp['date'])}; {html.escape(exp['machine'])}.<br>"
            f"Source: {html.escape(exp['source'])}.<br>Simulated: <code>{html.escape(exp['scenario'])}</code>"
            f" on <code>{html.escape(exp['machine_profile'])}</code> and its calibration.</p>",
            _bars_svg(mine),
        ]
        for machine in dict.fromkeys(profiles(exp, calibrations)):
            runs = results[(exp["id"], machine)]
            series = [series_of(label, r) for label, r in runs.items()]
            metrics = metrics_of(next(iter(runs.values())).data)
            table = render_compare(series, metrics) + "\n" + render_duration(series)
            parts.append(f"<h3>{html.escape(machine)}</h3><pre>{html.escape(table)}</pre>")
            parts.append(_interrupts_svg(runs))
    parts.append("</body></html>\n")
    return "".join(parts)


def render_markdown(entries: Sequence[Entry], calibrations: Sequence[CalibrationSpec], *, quick: bool) -> str:
    """docs/fidelity.md: the score, the table, and each calibration's free costs."""
    lines = [
        "# Fidelity: physics-only and calibrated figures against the published ones",
        "",
        f"Made by `ipisim reproduce{' --quick' if quick else ''} --markdown docs/fidelity.md`; "
        "run it again whenever a full-scale figure moves.",
        "A calibration target is a baseline figure the calibrated profile was fitted to "
        "(its residual, never a pass); every other figure is a prediction.",
        "",
        "```",
        score(entries, calibrations).rstrip(),
        "```",
        "",
        "| id | published | physics-only | calibrated | tolerance | asserts | physics | calibrated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        lines.append(
            f"| {e.id} | {_fmt(e.published, e.unit)} {e.unit} | {_fmt(e.physics, e.unit)} {e.unit} | "
            f"{_fmt(e.calibrated, e.unit)} {e.unit} | {e.tolerance} | {e.expect} | "
            f"{_verdict(e.physics_pass)} | {_calibrated_cell(e)} |"
        )
    lines += ["", "## Calibrations", ""]
    for c in calibrations:
        free = ", ".join(f"`{f.spec()}`" for f in c.free)
        figures = ", ".join(f"`{k}` = {v:g}" for k, v in c.measured.items())
        lines.append(
            f"- `{c.machine_profile}{CALIBRATED_SUFFIX}`: `ipisim calibrate --experiment {c.experiment}` "
            f"fits {free} on {c.experiment} {c.variant}'s {figures}."
        )
    return "\n".join(lines) + "\n"


def reproduce(
    *,
    quick: bool,
    out_dir: Path,
    json_path: Path | None,
    progress: Callable[[str], None],
    jobs: int = 1,
    markdown: Path | None = None,
    only: Sequence[str] = (),
) -> list[Entry]:
    """Run everything (or the experiments `only` names), `jobs` runs at a time; write
    DIR/report.html and the JSON (and the Markdown table where asked); return the entries."""
    experiments = load_published()
    if only:
        known = [e["id"] for e in experiments]
        for x in only:
            if x not in known:
                raise ConfigError(f"--experiment: unknown {x!r} (one of {', '.join(known)})")
        experiments = [e for e in experiments if e["id"] in only]
    calibrations = load_calibrations()
    results = run_all(experiments, quick=quick, progress=progress, jobs=jobs, calibrations=calibrations)
    entries = []
    for e in experiments:
        physics, calibrated = profiles(e, calibrations)
        entries += evaluate(e, results[(e["id"], physics)], results[(e["id"], calibrated)], calibrations)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.html").write_text(
        render_html(experiments, results, entries, calibrations, quick=quick)
    )
    records = [asdict(e) for e in entries]
    (json_path or out_dir / "reproduce.json").write_text(json.dumps(records, indent=2) + "\n")
    if markdown is not None:
        markdown.write_text(render_markdown(entries, calibrations, quick=quick))
    return entries
