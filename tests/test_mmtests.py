"""mmtests compare-kernels tables: golden output from Mel Gorman's 2015 postings, and `ipisim compare`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ipisim.cli import main
from ipisim.mmtests import (
    Metric,
    Series,
    pdiff,
    pndiff,
    render_compare,
    render_counters,
    render_duration,
    series_of,
    split_label,
)

GOLDEN = Path(__file__).parent / "golden"
LRU = "lru-file-mmap-read-"
LRU_METRICS = [Metric(LRU + name, True) for name in ("elapsed", "time_range", "time_stddv")]


def lru(
    label: str, ops: tuple[float, float, float], duration: tuple[float, float, float] = (0, 0, 0)
) -> Series:
    return Series(label, {m.name: v for m, v in zip(LRU_METRICS, ops, strict=True)}, *duration)


def test_flushfull_v7_posting_is_reproduced_exactly() -> None:
    # The posting shows rounded numbers: 0.6445 prints as 0.64 and gives its 90.38 %.
    # Its table predates mmtests a235bf52: 9-wide values, 6-wide percentages.
    base = lru("4.2.0-rc1-vanilla", (159.62, 30.59, 6.70), (581.00, 5804.93, 161.03))
    new = lru("4.2.0-rc1-flushfull-v7", (120.68, 2.80, 0.6445), (611.43, 4111.76, 122.12))
    text = render_compare([base, new], LRU_METRICS, percent_width=6, field_length=9)
    text += "\n" + render_duration([base, new])
    assert text == (GOLDEN / "flushfull-v7-2015.txt").read_text()


def test_swapcluster_v7r17_posting_negative_gains_are_reproduced_exactly() -> None:
    # linux-mm, 9 Jul 2015, "Re: [PATCH 4/4] mm: Increase SWAP_CLUSTER_MAX to batch TLB flushes".
    base = lru("4.2.0-rc1-batchdirty-v7r17", (20.47, 0.59, 0.19))
    new = lru("4.2.0-rc1-swapcluster-v7r17", (20.36, 0.72, 0.220894))
    text = render_compare([base, new], LRU_METRICS, percent_width=6, field_length=25)
    assert text == (GOLDEN / "swapcluster-v7r17-2015.txt").read_text()


def test_default_widths_are_12_and_7() -> None:
    series = [lru("4.2.0-rc1-vanilla", (100, 1, 1)), lru("4.2.0-rc1-new", (50, 1, 1))]
    assert render_compare(series, LRU_METRICS[:1]).splitlines() == [
        " " * 30 + "              4.2.0-rc1              4.2.0-rc1",
        " " * 30 + "                vanilla                    new",
        "Ops lru-file-mmap-read-elapsed      100.00 (   0.00%)       50.00 (  50.00%)",
    ]


@pytest.mark.parametrize(
    ("lower_is_better", "new", "cell"),
    [
        (True, 80.0, "80.00 (  20.00%)"),
        (True, 125.0, "125.00 ( -25.00%)"),
        (False, 125.0, "125.00 (  25.00%)"),
        (False, 80.0, "80.00 ( -20.00%)"),
        (True, 100.0, "100.00 (   0.00%)"),
    ],
)
def test_positive_percent_is_an_improvement(lower_is_better: bool, new: float, cell: str) -> None:
    series = [Series("a", {"x": 100.0}, 0, 0, 0), Series("b", {"x": new}, 0, 0, 0)]
    row = render_compare(series, [Metric("x", lower_is_better)]).splitlines()[2]
    assert row == "Ops x      100.00 (   0.00%)" + f"{cell:>23}"


def test_division_edge_cases_follow_vmr_stat() -> None:
    assert (pdiff(0, 5), pdiff(5, 0), pdiff(7, 7)) == (0, 100, 0)
    assert (pndiff(0, 5), pndiff(5, 0), pndiff(7, 7)) == (100, -99, 0)


@pytest.mark.parametrize("missing", [None, math.nan])
def test_missing_value_prints_zero_with_zero_gain(missing: float | None) -> None:
    series = [
        Series("a", {"x": 10.0}, 0, 0, 0),
        Series("b", {"x": missing}, 0, 0, 0),
        Series("c", {}, 0, 0, 0),
    ]
    row = render_compare(series, [Metric("x", True)]).splitlines()[2]
    assert row == "Ops x       10.00 (   0.00%)        0.00 (   0.00%)        0.00 (   0.00%)"


def test_missing_baseline_shows_values_without_gain() -> None:
    series = [Series("a", {"x": None}, 0, 0, 0), Series("b", {"x": 5.0}, 0, 0, 0)]
    row = render_compare(series, [Metric("x", True)]).splitlines()[2]
    assert row == "Ops x        0.00 (   0.00%)        5.00 (   0.00%)"


@pytest.mark.parametrize(
    ("label", "lines"),
    [
        ("4.2.0-rc1-vanilla", ("4.2.0-rc1", "vanilla")),
        ("4.2.0-rc1-flushfull-v7", ("4.2.0-rc1", "flushfull-v7")),
        ("4.2.0-vanilla", ("4.2.0", "vanilla")),
        ("4.3.0-rc10-vanilla", ("4.3.0-rc10", "vanilla")),
        ("linux-4.3", ("linux", "4.3")),
        ("4.2.0-rc1", ("4.2.0-rc1", "")),
        ("vanilla", ("", "vanilla")),
    ],
)
def test_header_splits_at_the_first_dash_keeping_rc(label: str, lines: tuple[str, str]) -> None:
    assert split_label(label) == lines


def test_duration_header_is_widened_so_long_names_do_not_run_together() -> None:
    series = [Series("4.2.0-rc1-batchdirty-v7r17", {}, 58.2, 76.97, 22.5)]
    series.append(Series("4.2.0-rc1-swapcluster-v7r17", {}, 57.13, 78.09, 22.45))
    assert render_duration(series).splitlines() == [
        "                4.2.0-rc1         4.2.0-rc1",
        "         batchdirty-v7r17 swapcluster-v7r17",
        "User                58.20             57.13",
        "System              76.97             78.09",
        "Elapsed             22.50             22.45",
    ]


def test_counters_have_no_compare_and_absent_counts_as_zero() -> None:
    series = [Series("base", {}, 0, 0, 0, {"TLB shootdown IPIs": 16}), Series("new", {}, 0, 0, 0, {})]
    assert render_counters(series, ["TLB shootdown IPIs"]).splitlines() == [
        " " * 22 + "               " + "               ",
        " " * 22 + "           base" + "            new",
        "Ops TLB shootdown IPIs" + "          16.00" + "           0.00",
    ]


def test_drain_counters_appear_only_for_variants_that_drained() -> None:
    from ipisim import RunResult

    def result(drains: int) -> RunResult:
        vmstat = {"nr_tlb_remote_flush": 0, "pcp_global_drain": drains, "pcp_global_ipi_saved": 0}
        ops = {"hackbench_s": 1.0, "drained_reclaim_p50_us": 31.5}
        times = {"user_s": 0.0, "system_s": 0.0, "elapsed_s": 1.0}
        return RunResult({"ops": ops, "vmstat": vmstat, "interrupts": {"CAL": [3, 4]}, **times}, 0)

    drained, idle = series_of("after", result(17)).counters, series_of("idle", result(0)).counters
    assert (drained["pcp_global_drain"], drained["pcp_global_ipi_saved"]) == (17, 0)
    assert drained["Drained direct reclaim p50 (us)"] == 31.5
    assert drained["Function call IPIs"] == 7
    assert "pcp_global_drain" not in idle and "pcp_global_ipi_saved" not in idle


def test_compare_prints_both_labels_and_a_user_row(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "compare",
        "shootdown",
        "--kernel",
        "a=linux-6.18",
        "--kernel",
        "b=linux-4.3",
        "--set",
        "batch=33",
    ]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[1].split() == ["a", "b"]
    assert any(line.startswith("User ") for line in lines)
    assert "Ops TLB shootdown IPIs" in out
    # With two jobs either may finish first.
    done = sorted(line.split(":")[0].split()[-1] for line in err.splitlines() if "done after" in line)
    assert done == ["a", "b"] and "variant 2/2 " in err


def test_compare_profile_is_a_perf_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "c.json"
    argv = ["compare", "shootdown", "--kernel", "a=linux-6.18", "--kernel", "b=linux-4.3"]
    assert main([*argv, "--set", "batch=33", "--profile", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out.split("# Baseline")[1].splitlines()
    assert text[0].split()[:2] == ["Delta", "b"]
    share = [
        {f["function"]: f["percent"] for f in v["result"]["profile"]}
        for v in json.loads(out_json.read_text())["variants"]
    ]
    for line in text[1:]:
        base, delta, *symbol = line.split()
        a, b = share[0].get(symbol[-1], 0.0), share[1].get(symbol[-1], 0.0)
        assert float(base.rstrip("%")) == pytest.approx(a, abs=0.006)
        assert float(delta.rstrip("%")) == pytest.approx(b - a, abs=0.011)


def test_compare_json_has_every_variant_with_its_own_sets(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    argv = ["compare", "shootdown", "--kernel", "a=linux-6.18", "--kernel", "b=linux-4.3,batch=1"]
    assert main([*argv, "--set", "batch=33", "--json", str(out)]) == 0
    variants = json.loads(out.read_text())["variants"]
    assert [(v["label"], v["kernel"]) for v in variants] == [("a", "linux-6.18"), ("b", "linux-4.3")]
    assert [v["sets"] for v in variants] == [[["batch", "33"]], [["batch", "33"], ["batch", "1"]]]
    assert [v["result"]["config"]["batch"] for v in variants] == [33, 1]


def test_compare_counts_too_many_isolated_sleeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h.json"
    argv = ["compare", "hackbench", "--machine", "kvm-8cpu", "--kernel", "a=linux-3.4"]
    argv += ["--kernel", "b=linux-3.4,kernel.isolated_throttle=reclaim_throttle"]
    # A footprint at which this small run's direct reclaimers throttle; which one does moves with
    # the model (the first assertion below says when to pick another). 196, seed 004's quick set
    # (197 until hackbench's parent held a footprint too).
    for kv in ("groups=2", "loops=5", "machine.mem_per_node=64MiB", "footprint=196"):
        argv += ["--set", kv]
    assert main([*argv, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    traces = [v["result"]["tracepoints"] for v in json.loads(out.read_text())["variants"]]
    waits = traces[0]["writeback:writeback_congestion_wait"]
    assert waits > 0 and traces[1]["writeback:writeback_congestion_wait"] == 0
    row = next(line for line in text.splitlines() if line.startswith("Ops writeback_congestion_wait"))
    assert row.split()[2:] == [f"{waits:.2f}", "0.00"]


def test_compare_jobs_do_not_change_the_result(tmp_path: Path) -> None:
    argv = ["compare", "shootdown", "--kernel", "a=linux-6.18", "--kernel", "b=linux-4.3"]
    argv += ["--kernel", "c=linux-4.2,batch=1"]
    outs = [tmp_path / f"j{jobs}.json" for jobs in (1, 3)]
    for jobs, out in zip((1, 3), outs, strict=True):
        assert main([*argv, "--jobs", str(jobs), "--json", str(out)]) == 0
    assert outs[0].read_bytes() == outs[1].read_bytes()
    labels = [v["label"] for v in json.loads(outs[1].read_text())["variants"]]
    assert labels == ["a", "b", "c"]


@pytest.mark.parametrize(
    "argv",
    [["compare", "shootdown", "--kernel", "a=linux-6.18"], ["check", "shootdown", "--seeds", "1"]],
)
def test_jobs_below_one_is_a_usage_error(argv: list[str]) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "ipisim.cli", *argv, "--jobs", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["ipisim: error: --jobs: must be at least 1, got 0"]


@pytest.mark.parametrize(
    ("kernels", "message"),
    [
        (["linux-4.3"], "expected LABEL=PRESET"),
        (["=linux-4.3"], "expected LABEL=PRESET"),
        (["a="], "expected LABEL=PRESET"),
        (["a=linux-4.3,batch"], "expected key=value after the preset"),
        (["a=linux-4.3", "a=linux-6.18"], "duplicate label 'a'"),
        ([], "required: --kernel"),
    ],
)
def test_bad_kernel_syntax_is_one_line_and_exit_2(kernels: list[str], message: str) -> None:
    argv = ["compare", "shootdown"] + [arg for k in kernels for arg in ("--kernel", k)]
    p = subprocess.run(
        [sys.executable, "-m", "ipisim.cli", *argv], capture_output=True, text=True, check=False
    )
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert message in lines[0]


def test_quick_lru_compare_batched_flush_cuts_interrupts(tmp_path: Path) -> None:
    # The seed 000 experiment, scaled down to 1/250 of the machine's memory.
    out = tmp_path / "lru.json"
    args = ["compare", "vm-scalability/lru-file-mmap-read", "--machine", "xeon-4n-48c-64g"]
    args += ["--kernel", "vanilla=linux-4.2", "--kernel", "flushfull=linux-4.3", "--scale", "0.004"]
    assert main([*args, "--json", str(out)]) == 0
    vanilla, flushfull = (v["result"] for v in json.loads(out.read_text())["variants"])
    # Batching cuts the TLB-flush IPIs (one per CPU per 32 pages instead of one per page). At this
    # scale drain_all_pages IPIs (CAL) are a large part of flushfull's remaining interrupts.
    tlb = [sum(r["interrupts"]["TLB"]) for r in (vanilla, flushfull)]
    assert tlb[1] < tlb[0] / 3
    rate = [r["ops"]["interrupts_per_s_steady"] for r in (vanilla, flushfull)]
    assert rate[1] < rate[0] / 2
    assert flushfull["elapsed_s"] < vanilla["elapsed_s"]
    for r in (vanilla, flushfull):
        assert r["check"]["violations"] == 0


def test_migrate_compare_table_is_golden(capsys: pytest.CaptureFixture[str]) -> None:
    # Batched migration flushing (6.4) against a flush per page (6.3), at 32 MiB: the table is
    # pinned byte for byte, so any change to the model's migration path shows here.
    args = ["compare", "migrate", "--kernel", "before=linux-6.3", "--kernel", "after=linux-6.4"]
    assert main([*args, "--set", "scale=0.01", "--set", "memory=32MiB", "--set", "passes=2"]) == 0
    assert capsys.readouterr().out == (GOLDEN / "migrate-6.3-vs-6.4-32MiB.txt").read_text()
