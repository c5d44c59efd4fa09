"""The Python API: typed results, overrides, presets."""

from __future__ import annotations

import re

import pytest

import ipisim


def test_run_result_views() -> None:
    r = ipisim.run("shootdown", machine="host-2cpu", kernel="linux-6.18", sets={"batch": 33})
    assert r.interrupts["TLB"] == [0, 16]
    assert r.ops["syscalls"] == 16
    assert r.vmstat["nr_tlb_remote_flush"] == 16
    assert r.elapsed_s > 0 and r.system_s > 0
    assert r.config["kernel.name"] == "linux-6.18"


def test_interrupts_per_second_count_every_call_function_interrupt() -> None:
    # 16 flushes of 33 pages, each one IPI: all within the first second. 6.x counts them in CAL
    # too; before 4.8 /proc/interrupts printed CAL less the TLB row.
    for kernel, cal in [("linux-6.18", [0, 16]), ("linux-4.3", [0, 0])]:
        r = ipisim.run("shootdown", machine="host-2cpu", kernel=kernel, sets={"batch": 33})
        assert r.data["call_function_interrupts_per_s"] == [16]
        assert r.interrupts == {"CAL": cal, "TLB": [0, 16]}


def test_violations_summarise_the_checker() -> None:
    # Seed 001's PFN list as posted INVLPGs physical addresses: each of the 2 x 64 pages is freed
    # while its reader's TLB still holds it. The same list of user addresses is clean.
    sets = {"processes": 2, "pages": 64, "kernel.reclaim_flush": "batch_pfn"}
    r = ipisim.run("reclaim", machine="xeon-4n-48c-64g", kernel="linux-4.3", sets=sets)
    assert r.violations == "128 violations (128 use-after-free)"
    r = ipisim.run(
        "reclaim",
        machine="xeon-4n-48c-64g",
        kernel="linux-4.3",
        sets={**sets, "kernel.reclaim_flush": "batch_addr"},
    )
    assert r.violations == ""


def test_sets_accept_pairs_and_bools() -> None:
    a = ipisim.run("shootdown", sets=[("misalign", True), ("op", "munmap"), ("remote", "sleeping")])
    assert a.config["misalign"] is True
    # A misaligned region spans two PTE tables, freed by two calls. The first IPI finds the idle
    # CPU lazy and switches it to init_mm; the second finds it on the wrong mm and trims it.
    assert a.ops["tlb_shootdowns"] == 2
    assert a.tracepoints["tlb:tlb_flush reason=remote wrong CPU (5)"] == 1


def test_older_kernel_differs_where_the_mechanism_does() -> None:
    new = ipisim.run("shootdown", kernel="linux-6.18", sets={"remote": "sleeping", "op": "mprotect"})
    old = ipisim.run("shootdown", kernel="linux-4.3", sets={"remote": "sleeping", "op": "mprotect"})
    assert sum(new.interrupts["TLB"]) == 0
    assert sum(old.interrupts["TLB"]) == 1


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ipisim.ConfigError, match="batch"):
        ipisim.run("shootdown", sets={"batch": 0})
    assert issubclass(ipisim.ConfigError, ValueError)


def test_check_config_refuses_what_run_refuses_and_runs_nothing() -> None:
    assert ipisim.check_config("shootdown", machine="host-2cpu", sets={"batch": 33}) is None
    with pytest.raises(ipisim.ConfigError, match="remote_threads"):
        # Refused when the workload starts on the machine, not when the keys are parsed.
        ipisim.check_config("shootdown", machine="host-2cpu", sets={"remote_threads": 5})


def test_describe_lists_every_cost_with_a_source() -> None:
    d = ipisim.describe("xeon-4n-48c-64g")
    assert d["kind"] == "machine"
    assert all(c["source"] for c in d["costs"])
    assert {c["key"] for c in d["costs"]} >= {"machine.cost.invlpg", "machine.cost.cr3_flush"}


# "N ns, C cycles at G GHz" in a cost's source (parenthesized asides dropped): a published time
# converted at the profile's clock.
NS_AT_CLOCK = re.compile(r"([\d.]+) ns\s*, ([\d.]+) cycles at ([\d.]+) GHz")


def _ns_conversions(source: str, cycles: float, ghz: float) -> list[bool]:
    """Each conversion in `source`: True if it agrees with the cost's cycles and the profile's clock."""
    return [
        abs(float(ns) * float(g) - float(cyc)) <= 0.5 and float(cyc) == cycles and float(g) == ghz
        for ns, cyc, g in NS_AT_CLOCK.findall(re.sub(r"\([^()]*\)", "", source))
    ]


def test_a_cost_published_in_ns_is_its_cycles_at_the_profiles_clock() -> None:
    assert _ns_conversions("a line 32.42 ns (median), 87.5 cycles at 2.7 GHz", 87.5, 2.7) == [True]
    assert _ns_conversions("a line 32.42 ns, 97.5 cycles at 2.7 GHz", 97.5, 2.7) == [False]
    assert _ns_conversions("a line 32.42 ns, 87.5 cycles at 2.7 GHz", 87.5, 2.9) == [False]
    checked = 0
    for m in ipisim.list_builtins()["machines"]:
        d = ipisim.describe(m["name"])
        ghz = float(next(p["value"] for p in d["params"] if p["key"] == "machine.ghz"))
        for c in d["costs"]:
            agree = _ns_conversions(c["source"], c["value"], ghz)
            assert all(agree), (m["name"], c["key"])
            checked += len(agree)
    assert checked >= 11  # the published line costs of four profiles


def test_compare_runs_each_variant_with_common_then_own_sets() -> None:
    c = ipisim.compare(
        "shootdown",
        {"new": "linux-6.18", "old": "linux-4.3,batch=33"},
        sets={"remote": "sleeping", "op": "mprotect"},
    )
    assert [v.label for v in c.variants] == ["new", "old"]
    assert c.variants[1].sets == [("remote", "sleeping"), ("op", "mprotect"), ("batch", "33")]
    # 6.18 skips the lazy CPU; 4.3 sends it one IPI, on which it leaves the mm (leave_mm).
    assert [sum(v.result.interrupts["TLB"]) for v in c.variants] == [0, 1]
    assert c.table().splitlines()[1].split() == ["new", "old"]


def test_compare_converts_to_pandas() -> None:
    pd = pytest.importorskip("pandas")
    c = ipisim.compare("shootdown", {"a": "linux-6.18", "b": "linux-6.18,batch=512"})
    df = c.to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.index) == ["a", "b"]
    assert list(df["interrupts.TLB"]) == [512, 1]
    assert df.loc["b", "ops.syscalls"] == 1.0
    assert ipisim.run("shootdown").to_pandas().shape[0] == 1


@pytest.mark.parametrize("text", ["", "linux-6.18,batch", "linux-6.18,=3"])
def test_bad_variant_is_a_config_error(text: str) -> None:
    with pytest.raises(ipisim.ConfigError, match="kernel variant"):
        ipisim.compare("shootdown", {"x": text})


def test_profiles_print_as_perf_report_and_perf_diff() -> None:
    c = ipisim.compare("shootdown", {"a": "linux-6.18", "b": "linux-4.3"}, sets={"batch": 33})
    report = c.variants[0].result.profile_report(top=3).splitlines()
    assert report[0] == "# Overhead  Symbol  (simulated CPU time, all CPUs)" and len(report) >= 2
    diff = c.profile_diff(top=3).splitlines()
    assert diff[0].split()[:4] == ["#", "Baseline", "Delta", "b"] and len(diff) == 4
    with pytest.raises(ipisim.ConfigError, match="no task named 'nosuch'"):
        c.profile_diff("nosuch")
