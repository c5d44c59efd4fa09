"""`--trace`: Chrome trace-event JSON that Perfetto can load, and ftrace text in the kernel's format."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import ipisim
from ipisim.cli import main

FTRACE = re.compile(
    r"^ {0,16}\S+-\d+ +\[\d{3}\] [.d][.N][.h][.0-9]\. +\d+\.\d{6}: "
    r"(tlb_flush: pages:-?\d+ reason:[a-zA-Z ]+ \(\d\)"
    r"|ipi_send_cpu: cpu=\d+ callsite=\S+ callback=\S+"
    r"|ipi_send_cpumask: cpumask=[0-9,-]+ callsite=\S+ callback=\S+)$"
)


def check_chrome_trace(doc: dict[str, object]) -> list[dict[str, object]]:
    """Well-formed events, slices that nest per track, and every flow with a source and a target."""
    events = doc["traceEvents"]
    assert isinstance(events, list)
    by_tid: dict[int, list[tuple[float, float]]] = defaultdict(list)
    flows: dict[int, list[str]] = defaultdict(list)
    for e in events:
        assert e["ph"] in {"M", "X", "s", "f", "C"}, e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["name"]
            by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
        if e["ph"] in {"s", "f"}:
            flows[e["id"]].append(e["ph"])
    for spans in by_tid.values():
        stack: list[float] = []
        for start, end in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-9, "slices on one track must nest"
            stack.append(end)
    assert flows and all(sorted(v) == ["f", "s"] for v in flows.values())
    return events


def test_shootdown_trace_has_one_flow_per_ipi_and_kernel_format_lines(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert (
        main(["run", "shootdown", "--set", "batch=33", "--set", "remote_threads=1", "--trace", str(out)]) == 0
    )
    events = check_chrome_trace(json.loads(out.read_text()))
    flows = {e["id"] for e in events if e["ph"] == "s"}
    r = ipisim.run("shootdown", sets={"batch": 33})
    assert len(flows) == r.data["ipis_sent"] == 16
    handlers = [e for e in events if e["ph"] == "X" and e["name"] == "call_function_interrupt"]
    assert len(handlers) == 16 and all(e["tid"] == 1001 for e in handlers)
    lines = [ln for ln in out.with_suffix(".txt").read_text().splitlines() if not ln.startswith("#")]
    assert lines and all(FTRACE.match(ln) for ln in lines), [ln for ln in lines if not FTRACE.match(ln)][:3]
    assert sum("reason:remote shootdown (1)" in ln for ln in lines) == 16
    assert sum("ipi_send_cpu: cpu=1 " in ln for ln in lines) == 16
    # native_flush_tlb_multi() -> on_each_cpu_cond_mask(): its callsite, and the 6.3+ callback.
    sends = [ln.split(": ", 1)[1] for ln in lines if "ipi_send_cpu:" in ln]
    callback = "callback=generic_smp_call_function_single_interrupt"
    assert set(sends) == {f"ipi_send_cpu: cpu=1 callsite=on_each_cpu_cond_mask {callback}"}


def test_membarrier_ipis_come_from_smp_call_function_many() -> None:
    sets = {"remote_threads": 3, "calls": 50, "settle": "1ms"}
    r = ipisim.run("membarrier", machine="xeon-4n-48c-64g", sets=sets, trace_window=(0.0, 0.01))
    assert r.trace is not None
    masks = [ln for ln in r.trace.ftrace.splitlines() if "ipi_send_cpumask:" in ln]
    assert masks and all("callsite=smp_call_function_many " in ln for ln in masks), masks[:2]


def test_a_window_keeps_only_its_span(tmp_path: Path) -> None:
    r = ipisim.run("shootdown", sets={"batch": 33}, trace_window=(0.0, 0.0005))
    assert r.trace is not None
    events = json.loads(r.trace.chrome_json)["traceEvents"]
    assert all(e["ts"] <= 500 for e in events if "ts" in e)
    assert r.trace.ftrace.count("tlb_flush") < 16 * 3


def test_lru_trace_shows_reclaim_and_batched_flushes(tmp_path: Path) -> None:
    sets = {"scale": 0.002}
    r = ipisim.run(
        "vm-scalability/lru-file-mmap-read",
        machine="xeon-4n-48c-64g",
        kernel="linux-4.3",
        sets=sets,
        trace_window=(0.0, 0.02),
    )
    assert r.trace is not None
    check_chrome_trace(json.loads(r.trace.chrome_json))
    assert "reason:remote shootdown (1)" in r.trace.ftrace
    assert "usemem-" in r.trace.ftrace


@pytest.mark.parametrize("window", ["5", "2:1", "a:b", "-1:2"])
def test_bad_window_is_one_line_exit_2(
    window: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "shootdown", "--trace", str(tmp_path / "x.json"), "--trace-window", window]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--trace-window" in err
