"""`ipisim reproduce`: run every seed experiment and compare with the published figures.

The published figures and their sources live in data/published.json. Each metric is either a
simulated value (`kind: value`) or the mmtests gain of one variant over another (`kind: gain`,
100 - new * 100 / base: positive is better), checked against a relative, absolute or factor
tolerance, or a lower bound (`min`) where the source states one.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import ipisim
from ipisim.mmtests import metrics_of, pdiff, pndiff, render_compare, render_duration, series_of


@dataclass(frozen=True)
class Entry:
    """One published figure next to the simulated one."""

    id: str
    experiment: str
    metric: str
    unit: str
    published: float
    simulated: float
    tolerance: str
    passed: bool


def load_published() -> list[dict[str, Any]]:
    """The experiments of data/published.json."""
    text = resources.files("ipisim").joinpath("data/published.json").read_text()
    experiments: list[dict[str, Any]] = json.loads(text)["experiments"]
    return experiments


def _lookup(data: Mapping[str, Any], path: str) -> float:
    """A number in a result by dotted path; the first dot splits a top-level key only.
    `profile.FUNCTION` is that function's percent of CPU time (0 if it has none)."""
    head, _, rest = path.partition(".")
    if head == "profile":
        return float(next((p["percent"] for p in data["profile"] if p["function"] == rest), 0.0))
    value = data[head] if not rest else data[head][rest]
    return float(value)


def _check(published: float, simulated: float, tol: Mapping[str, float]) -> tuple[bool, str]:
    if "min" in tol:
        return simulated >= tol["min"], f"at least {tol['min']:g}"
    if "factor" in tol:
        f = tol["factor"]
        return published / f <= simulated <= published * f, f"within {f:g}x"
    if "relative" in tol:
        return abs(simulated - published) <= tol["relative"] * abs(published), f"±{tol['relative']:.0%}"
    return abs(simulated - published) <= tol["absolute"], f"±{tol['absolute']:g} points"


def evaluate(experiment: Mapping[str, Any], results: Mapping[str, ipisim.RunResult]) -> list[Entry]:
    """Every metric of one experiment, from its variants' results keyed by label."""
    entries = []
    for m in experiment["metrics"]:
        new = _lookup(results[m["variant"]].data, m["path"])
        if m["kind"] == "value":
            value = new
        else:
            # "gain": lower is better (times); "rise": higher is better (throughput).
            diff = pndiff if m["kind"] == "gain" else pdiff
            value = diff(new, _lookup(results[m["base"]].data, m["path"]))
        ok, tol = _check(m["published"], value, m["tolerance"])
        entries.append(
            Entry(m["id"], experiment["id"], m["metric"], m["unit"], m["published"], value, tol, ok)
        )
    return entries


RunKey = tuple[str, str, str, tuple[tuple[str, str], ...]]


def run_all(
    experiments: Sequence[Mapping[str, Any]],
    *,
    quick: bool,
    progress: Callable[[str], None],
    jobs: int = 1,
) -> dict[str, dict[str, ipisim.RunResult]]:
    """Run every variant of every experiment once (shared variants run once), `jobs` at a time,
    keyed by id and label. Each run is deterministic, so the order they finish in changes nothing."""
    runs: dict[RunKey, tuple[str, dict[str, Any]]] = {}
    keys: dict[tuple[str, str], RunKey] = {}
    for e in experiments:
        for v in e["variants"]:
            sets = {**v["sets"], **(e["quick_sets"] if quick else {})}
            key: RunKey = (e["scenario"], e["machine_profile"], v["kernel"], tuple(sorted(sets.items())))
            runs.setdefault(key, (f"{e['id']} {v['label']}", sets))
            keys[(e["id"], v["label"])] = key

    def one(key: RunKey) -> ipisim.RunResult:
        scenario, machine, kernel, _ = key
        name, sets = runs[key]
        t0 = time.perf_counter()
        progress(f"{name} ({kernel}) ...")
        r = ipisim.run(scenario, machine=machine, kernel=kernel, sets=sets)
        progress(f"{name}: {time.perf_counter() - t0:.1f} s")
        return r

    # The native runs release the GIL, so threads run them in parallel.
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        cache = dict(zip(runs, pool.map(one, runs), strict=True))
    out: dict[str, dict[str, ipisim.RunResult]] = {}
    for (eid, label), key in keys.items():
        out.setdefault(eid, {})[label] = cache[key]
    return out


def _fmt(x: float, unit: str) -> str:
    """Thousands grouped; a unitless ratio to 4 places, anything else to 2."""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.2f}" if unit else f"{x:.4f}"


def render_table(entries: Sequence[Entry]) -> str:
    """Published, simulated, difference, tolerance and PASS/FAIL, one line per figure."""
    head = ("id", "published", "simulated", "difference", "tolerance", "")
    rows = [
        (
            e.id,
            f"{_fmt(e.published, e.unit)} {e.unit}",
            f"{_fmt(e.simulated, e.unit)} {e.unit}",
            f"{_fmt(e.simulated - e.published, e.unit)}",
            e.tolerance,
            "PASS" if e.passed else "FAIL",
        )
        for e in entries
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [head, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _bars_svg(entries: Sequence[Entry]) -> str:
    """A horizontal bar chart: each figure's simulated value as a multiple of the published one."""
    width, row = 720, 34
    rows = []
    for i, e in enumerate(entries):
        ratio = e.simulated / e.published if e.published else 0.0
        y = 10 + i * row
        bar = max(0.0, min(ratio, 4.0)) / 4.0 * 360
        color = "#2e7d32" if e.passed else "#c62828"
        rows.append(
            f'<text x="0" y="{y + 16}" font-size="12">{html.escape(e.id)}</text>'
            f'<rect x="250" y="{y}" width="{bar:.1f}" height="20" fill="{color}"/>'
            f'<text x="{255 + bar:.1f}" y="{y + 15}" font-size="12">{ratio:.2f}x</text>'
        )
    one = 250 + 360 / 4
    height = 20 + row * len(entries)
    axis = f'<line x1="{one}" y1="0" x2="{one}" y2="{height}" stroke="#333" stroke-dasharray="4 3"/>'
    label = f'<text x="{one + 3}" y="{height - 2}" font-size="11">published = 1x</text>'
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
    return svg + "".join(rows) + axis + label + "</svg>"


def render_html(
    experiments: Sequence[Mapping[str, Any]],
    results: Mapping[str, Mapping[str, ipisim.RunResult]],
    entries: Sequence[Entry],
    *,
    quick: bool,
) -> str:
    """A self-contained report: the summary table, then one section per experiment."""
    passed = sum(e.passed for e in entries)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>ipisim reproduce</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
        "pre{background:#f4f4f4;padding:1em;overflow-x:auto}"
        "td,th{padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
        ".PASS{color:#2e7d32}.FAIL{color:#c62828}</style></head><body>",
        f"<h1>ipisim reproduce{' (quick: scaled down)' if quick else ''}</h1>",
        f"<p>ipisim {html.escape(ipisim.__version__)}: {passed} of {len(entries)} published figures"
        " within tolerance.</p>",
        "<table><tr><th>id</th><th>published</th><th>simulated</th><th>tolerance</th><th></th></tr>",
    ]
    for e in entries:
        verdict = "PASS" if e.passed else "FAIL"
        parts.append(
            f"<tr><td>{html.escape(e.id)}</td><td>{_fmt(e.published, e.unit)} {html.escape(e.unit)}</td>"
            f"<td>{_fmt(e.simulated, e.unit)} {html.escape(e.unit)}</td><td>{html.escape(e.tolerance)}</td>"
            f"<td class='{verdict}'>{verdict}</td></tr>"
        )
    parts.append("</table>")
    for exp in experiments:
        mine = [e for e in entries if e.experiment == exp["id"]]
        runs = results[exp["id"]]
        series = [series_of(label, r) for label, r in runs.items()]
        metrics = metrics_of(next(iter(runs.values())).data)
        parts += [
            f"<h2>{html.escape(exp['id'])}: {html.escape(exp['title'])}</h2>",
            f"<p>{html.escape(exp['author'])}, {html.escape(exp['date'])}; {html.escape(exp['machine'])}.<br>"
            f"Source: {html.escape(exp['source'])}.<br>Simulated: <code>{html.escape(exp['scenario'])}</code>"
            f" on <code>{html.escape(exp['machine_profile'])}</code>.</p>",
            _bars_svg(mine),
            f"<pre>{html.escape(render_compare(series, metrics) + chr(10) + render_duration(series))}</pre>",
        ]
    parts.append("</body></html>\n")
    return "".join(parts)


def reproduce(
    *,
    quick: bool,
    out_dir: Path,
    json_path: Path | None,
    progress: Callable[[str], None],
    jobs: int = 1,
) -> list[Entry]:
    """Run everything, `jobs` runs at a time; write DIR/report.html and the JSON; return the entries."""
    experiments = load_published()
    results = run_all(experiments, quick=quick, progress=progress, jobs=jobs)
    entries = [entry for e in experiments for entry in evaluate(e, results[e["id"]])]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.html").write_text(render_html(experiments, results, entries, quick=quick))
    records = [asdict(e) | {"pass": e.passed} for e in entries]
    for r in records:
        del r["passed"]
    (json_path or out_dir / "reproduce.json").write_text(json.dumps(records, indent=2) + "\n")
    return entries
