"""Tables in the grammar of mmtests' compare-kernels.sh (2015 era, as in Mel Gorman's postings)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ipisim import RunResult

FIELD_LENGTH = 12
COUNTER_FIELD_LENGTH = 15
STAT = "Ops"


@dataclass(frozen=True)
class Series:
    """One kernel variant's results: a column of every table."""

    label: str
    ops: Mapping[str, float | None]
    user_s: float
    system_s: float
    elapsed_s: float
    counters: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Metric:
    """A benchmark metric: a key of Series.ops and which direction is an improvement."""

    name: str
    lower_is_better: bool


def split_label(label: str) -> tuple[str, str]:
    """Split a series name into its two header lines at the first dash, keeping a following -rcN."""
    index = label.find("-")
    if index < 0:
        return "", label
    rc = re.match(r"-rc\d+", label[index:])
    if rc:
        index += rc.end()
    return label[:index], label[index + 1 :]


def _number(value: float | None) -> float:
    """The value, with None as NaN: both mean missing."""
    return math.nan if value is None else float(value)


def pdiff(new: float, base: float) -> float:
    """Percent gain where higher is better; mmtests' VMR::Stat::pdiff, edge cases included."""
    if new == base or new == 0:
        return 0.0
    if base == 0:
        return 100.0
    return new * 100 / base - 100


def pndiff(new: float, base: float) -> float:
    """Percent gain where lower is better; mmtests' VMR::Stat::pndiff, edge cases included."""
    if new == base:
        return 0.0
    if new == 0:
        return 100.0
    if base == 0:
        return -99.0
    return 100 - new * 100 / base


def _header(series: Sequence[Series], lead: int, widths: Sequence[int]) -> list[str]:
    """The two header lines: `lead` blanks, then each label part right-aligned to its width."""
    parts = [split_label(s.label) for s in series]
    return [
        " " * lead + "".join(f"{p[line]:>{w}}" for p, w in zip(parts, widths, strict=True)) for line in (0, 1)
    ]


def render_compare(
    series: Sequence[Series],
    metrics: Sequence[Metric],
    percent_width: int = 7,
    field_length: int = FIELD_LENGTH,
) -> str:
    """The benchmark table: each metric per series with its % gain over the first series."""
    w2 = max((len(m.name) for m in metrics), default=0)
    width = field_length + percent_width + 4
    lines = _header(series, len(STAT) + 1 + w2, [width] * len(series))
    for m in metrics:
        row = f"{STAT} {m.name:<{w2}}"
        base = _number(series[0].ops.get(m.name))
        for s in series:
            value = _number(s.ops.get(m.name))
            if math.isnan(value):
                value, gain = 0.0, 0.0
            elif math.isnan(base):
                gain = 0.0
            else:
                gain = pndiff(value, base) if m.lower_is_better else pdiff(value, base)
            row += f"{value:{field_length}.2f} ({gain:{percent_width}.2f}%)"
        lines.append(row)
    return "\n".join(lines) + "\n"


def _widths(series: Sequence[Series], minimum: int) -> list[int]:
    """Column widths of at least `minimum`, widened so long label parts keep a blank before them."""
    return [max(minimum, *(len(part) + 1 for part in split_label(s.label))) for s in series]


def render_duration(series: Sequence[Series]) -> str:
    """The Duration monitor: User, System and Elapsed seconds per series, no comparison."""
    rows = [
        ("User", [s.user_s for s in series]),
        ("System", [s.system_s for s in series]),
        ("Elapsed", [s.elapsed_s for s in series]),
    ]
    lead = max(len(name) for name, _ in rows) + 1
    widths = _widths(series, FIELD_LENGTH)
    lines = _header(series, lead, widths)
    for name, values in rows:
        lines.append(f"{name:<{lead}}" + "".join(f"{v:{w}.2f}" for v, w in zip(values, widths, strict=True)))
    return "\n".join(lines) + "\n"


def render_counters(series: Sequence[Series], names: Sequence[str]) -> str:
    """Simulator counters per series, no comparison, like mmtests' vmstat monitor; absent counts as 0."""
    w2 = max((len(n) for n in names), default=0)
    widths = _widths(series, COUNTER_FIELD_LENGTH)
    lines = _header(series, len(STAT) + 1 + w2, widths)
    for name in names:
        cells = "".join(f"{s.counters.get(name, 0.0):{w}.2f}" for s, w in zip(series, widths, strict=True))
        lines.append(f"{STAT} {name:<{w2}}" + cells)
    return "\n".join(lines) + "\n"


# ---- From simulation results to table columns.


def metrics_of(data: Mapping[str, Any]) -> list[Metric]:
    """The result's benchmark metrics; without a "metrics" list, every numeric op, lower is better."""
    if "metrics" in data:
        return [Metric(m["name"], m["better"] == "lower") for m in data["metrics"]]
    return [Metric(k, True) for k, v in data["ops"].items() if _is_number(v)]


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def series_of(label: str, r: RunResult) -> Series:
    """One variant's column: its numeric ops, CPU times and simulator counters."""
    ops = {k: float(v) for k, v in r.ops.items() if _is_number(v)}
    counters: dict[str, float] = {}
    if "interrupts_per_s_steady" in ops:
        counters["Interrupts/sec (steady)"] = ops["interrupts_per_s_steady"]
    counters["TLB shootdown IPIs"] = sum(r.interrupts.get("TLB", []))
    counters["Function call IPIs"] = sum(r.interrupts.get("CAL", []))
    counters.update((k, v) for k, v in r.vmstat.items() if k.startswith("nr_tlb_"))
    # drain_all_pages() and its seed-004 debug counters, for variants that drained at all.
    if r.vmstat.get("pcp_global_drain"):
        counters.update((k, v) for k, v in r.vmstat.items() if k.startswith("pcp_global_"))
    if "drained_reclaim_p50_us" in ops:
        counters["Drained direct reclaim p50 (us)"] = ops["drained_reclaim_p50_us"]
    # Direct reclaimers' too_many_isolated() sleeps, for variants that slept at all.
    for name in ("writeback:writeback_congestion_wait", "vmscan:mm_vmscan_throttled"):
        if count := r.data.get("tracepoints", {}).get(name):
            counters[name.split(":")[1]] = count
    return Series(label, ops, r.user_s, r.system_s, r.elapsed_s, counters)
