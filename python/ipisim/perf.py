"""Simulated profiles printed as perf prints real ones: `perf report` (optionally `--comm`) of one
run, and `perf diff` of several runs against the first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ipisim._native import ConfigError


def profile_rows(data: Mapping[str, Any], comm: str | None) -> tuple[list[dict[str, Any]], str]:
    """A result's profile rows, most first, of all CPUs or of one command's tasks, and what they
    cover; a command that never ran is a ConfigError naming the ones that did."""
    if comm is None:
        return list(data["profile"]), "simulated CPU time, all CPUs"
    by_comm = {c["comm"]: c["functions"] for c in data["profile_by_comm"]}
    if comm not in by_comm:
        raise ConfigError(f"--comm: no task named {comm!r} ran (commands: {', '.join(by_comm)})")
    return list(by_comm[comm]), f"simulated CPU time of comm {comm}"


def _symbol(function: str) -> str:
    return function if function.startswith("[") else f"[k] {function}"


def render_report(data: Mapping[str, Any], comm: str | None = None, top: int = 20) -> str:
    """`perf report`: each function's share, with `_raw_spin_lock`'s callers beneath it."""
    rows, what = profile_rows(data, comm)
    lines = [f"# Overhead  Symbol  ({what})"]
    for row in rows[:top]:
        lines.append(f"{row['percent']:9.2f}%  {_symbol(row['function'])}")
        lines += [f"{'':13}- {c['percent']:.2f}% {c['function']}" for c in row.get("callers", [])]
    return "\n".join(lines) + "\n"


def render_diff(
    labels: Sequence[str], results: Sequence[Mapping[str, Any]], comm: str | None = None, top: int = 20
) -> str:
    """`perf diff`: the first result's share of each function, then every other one's change in
    points; the `top` functions with the largest share in any result, the baseline's largest first."""
    shares = []
    what = ""
    for data in results:
        rows, what = profile_rows(data, comm)
        shares.append({row["function"]: float(row["percent"]) for row in rows})
    peak = {f: max(s.get(f, 0.0) for s in shares) for s in shares for f in s}
    chosen = sorted(peak, key=lambda f: -peak[f])[:top]
    chosen.sort(key=lambda f: (-shares[0].get(f, 0.0), -peak[f]))
    head = "# Baseline" + "".join(f"  {'Delta ' + label:>14}" for label in labels[1:])
    lines = [f"{head}  Symbol  ({what}; baseline {labels[0]})"]
    for f in chosen:
        base = shares[0].get(f, 0.0)
        deltas = "".join(f"  {s.get(f, 0.0) - base:+13.2f}%" for s in shares[1:])
        lines.append(f"{base:9.2f}%{deltas}  {_symbol(f)}")
    return "\n".join(lines) + "\n"
