"""ipisim: a fast, deterministic simulator of SMP memory management and IPIs.

>>> import ipisim
>>> r = ipisim.run("shootdown", machine="host-2cpu", kernel="linux-6.18", sets={"batch": 33})
>>> r.interrupts["TLB"]
[0, 16]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipisim import _native
from ipisim._native import ConfigError

__version__: str = _native.__version__
__all__ = ["ConfigError", "RunResult", "Trace", "describe", "list_builtins", "run"]

Sets = Mapping[str, object] | Iterable[tuple[str, object]]


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

    def to_json(self) -> str:
        """The result as pretty JSON text; byte-identical for the same inputs."""
        return json.dumps(self.data, indent=2) + "\n"


def run(
    scenario: str,
    *,
    machine: str | None = None,
    kernel: str | None = None,
    sets: Sets = (),
    seed: int = 1,
    trace_window: tuple[float, float] | None = None,
) -> RunResult:
    """Run `scenario` on a machine profile and kernel preset (built-in names or .toml paths).

    With `trace_window=(start_s, end_s)`, also record that span of simulated time as a Trace.
    """
    if trace_window is None:
        text, events = _native.run(scenario, machine, kernel, _set_pairs(sets), seed)
        return RunResult(json.loads(text), events)
    start, end = trace_window
    text, events, chrome, ftrace, cut = _native.run_traced(
        scenario, machine, kernel, _set_pairs(sets), seed, start, end
    )
    return RunResult(json.loads(text), events, Trace(chrome, ftrace, cut))


def list_builtins() -> dict[str, list[dict[str, str]]]:
    """Built-in scenarios, machines and kernel presets, each with a one-line description."""
    result: dict[str, list[dict[str, str]]] = json.loads(_native.list_builtins())
    return result


def describe(thing: str) -> dict[str, Any]:
    """Every parameter of a scenario, machine profile or kernel preset, with units and sources."""
    result: dict[str, Any] = json.loads(_native.describe(thing))
    return result
