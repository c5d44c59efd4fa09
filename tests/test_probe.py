"""`ipisim probe`: the fit from measurements to a loadable profile, and a real run on this host.

The real-hardware tests are skipped where hw.check_available() says this machine cannot run
them (no TLB row, one CPU, no C compiler).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ipisim
from ipisim import hw, probe
from ipisim.cli import main

UNAVAILABLE = hw.unavailable_reason()

needs_hw = pytest.mark.skipif(bool(UNAVAILABLE), reason=UNAVAILABLE)

# One run's measurements (ns), as native/costs.c prints them on a 2-vCPU guest.
SAMPLE = {
    "null_syscall": 166.0,
    "first_touch": 1420.0,
    "file_fault": 215.0,
    "file_fault_single": 900.0,
    "cow_fault": 1870.0,
    "read_page": 180.0,
    "sparse_first_touch": 400.0,
    "pageout": 335.0,
    "page_clear": 150.0,
    "page_copy": 300.0,
    "page_copy_cold": 650.0,
    "reclaim_empty": 10000.0,
    "touch_hot": 1.1,
    "touch_cold": 7.8,
    "madvise_sweep_1": 1850.0,
    "madvise_sweep_256": 69935.0,
    "mprotect_sweep_1": 1980.0,
    "mprotect_sweep_256": 24420.0,
    "munmap_sweep_1": 4670.0,
    "munmap_sweep_256": 75030.0,
    "thp_munmap": 3860.0,
    "context_switch": 2080.0,
    "thread_create": 19500.0,
    "idle_wakeup": 50000.0,
    "madvise_1_busy0": 950.0,
    "madvise_1_busy1": 11000.0,
    "membarrier_alone": 360.0,
    "membarrier_busy0": 500.0,
    "membarrier_busy1": 9000.0,
    "line_round_trip": 60.0,
    "victim_gap": 6000.0,
}

TOPO = probe.Topology(
    cpus=2,
    nodes=1,
    cpus_per_node=2,
    smt=1,
    mem_per_node_mib=6000,
    ghz=2.6,
    idle="haltpoll",
    idle_poll_ns=0,
)


def fake_probe(scale: float = 1.0) -> probe.Probe:
    return probe.Probe(TOPO, {k: [v * scale, v * scale * 1.02, v * scale * 0.99] for k, v in SAMPLE.items()})


def fitted(p: probe.Probe) -> dict[str, probe.Fitted]:
    return {f.key: f for f in probe.fit(p)}


def test_fit_arithmetic() -> None:
    f = fitted(fake_probe())
    g = TOPO.ghz
    assert f["syscall"].cycles == round(166 * g)
    assert f["context_switch"].cycles == round((2080 - 2 * 166) * g)
    assert f["pte_zap"].cycles == round((69935 - 1850) / 255 * g)
    assert f["pmd_zap"].cycles == round(3860 * g)
    assert f["page_copy_cold"].cycles == round(650 * g)
    assert f["reclaim_empty"].cycles == round(10000 * g)
    assert f["line_node"].cycles == round(30 * g)
    assert f["membarrier"].cycles == round((360 - 166) * g)
    assert f["membarrier_mask"].cycles == round(140 * g)
    # ipi_send + wire = membarrier round trip minus csd_queue, half irq entry, four line transfers
    # (the call queue head's to the sender and back, the csd to the handler, its unlock back).
    irq = f["irq_entry_exit"].cycles
    ipi = (9000 - 500) * g - 100 - irq / 2 - 4 * f["line_node"].cycles
    assert abs(f["ipi_send"].cycles + f["ipi_wire_node"].cycles - ipi) <= 2
    assert f["ipi_wire_remote"].cycles == f["ipi_wire_node"].cycles


def test_empty_reclaims_pair_each_tasks_begin_with_its_end() -> None:
    """Two tasks' memcg reclaims interleave; only the calls that freed nothing count."""
    trace = """# tracer: nop
              dd-100   [001] ..... 50.000010: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_KERNEL
              dd-200   [000] ..... 50.000012: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_KERNEL
              dd-100   [001] ..... 50.000020: mm_vmscan_memcg_reclaim_end: nr_reclaimed=0
              dd-200   [000] ..... 50.000042: mm_vmscan_memcg_reclaim_end: nr_reclaimed=5
              dd-100   [001] ..... 50.000050: mm_vmscan_memcg_reclaim_begin: order=0 gfp_flags=GFP_KERNEL
              dd-100   [001] ..... 50.000061: mm_vmscan_memcg_reclaim_end: nr_reclaimed=0
"""
    assert [round(x, 3) for x in probe.empty_reclaims_us(trace)] == [10.0, 11.0]


def test_the_table_gives_a_lock_hand_off_in_line_transfers() -> None:
    p = fake_probe()
    p.runs["lock_handoff_load"] = [60.0] * 3
    p.runs["lock_handoff_claim"] = [90.0] * 3
    # The line is the round trip's half (30 ns); the medians of fake_probe's runs are its values.
    assert "load 2.0, + claim 3.0" in probe.format_table(p)


def test_the_table_gives_a_streaming_readers_loss_per_flush() -> None:
    p = fake_probe()
    # This host's medians (2026-12-01): one page, a 32-page list, a full flush.
    for n, ns in ((1, 5800.0), (32, 8400.0), (64, 4500.0)):
        p.runs[f"reader_flush_{n}"] = [ns] * 3
    table = probe.format_table(p)
    assert "5800.0 / 8400.0 / 4500.0" in table
    assert "full flush -1300 ns against one page" in table
    assert "32-page list +3900 ns against the full flush" in table
    assert "loss per flush IPI" not in probe.format_table(fake_probe())


def test_a_difference_below_zero_is_held_at_its_floor_and_says_so() -> None:
    """A noisy victim gap can exceed the whole round trip: the wire keeps 1 cycle and says why."""
    p = fake_probe()
    p.runs["victim_gap"] = [30000.0] * 3
    f = fitted(p)
    assert f["ipi_wire_node"].cycles == 1 and f["ipi_send"].cycles == 1
    assert "held at 1 cycle(s): the parts subtracted exceed the whole" in f["ipi_wire_node"].source
    assert "held at" not in fitted(fake_probe())["ipi_wire_node"].source


def test_every_entry_has_a_source_and_unmeasured_ones_say_so() -> None:
    fs = probe.fit(fake_probe())
    assert [f.key for f in fs] == [
        c["key"].removeprefix("machine.cost.") for c in ipisim.describe("host-2cpu")["costs"]
    ]
    for f in fs:
        assert f.source.split(":")[0] in {
            "measured",
            "fitted",
            "published",
            "one node",
            "unused",
        } or ("not measured here" in f.source), f
    assert "not measured here" in {f.key: f for f in fs}["invlpg"].source


def test_pmd_zap_is_measured_only_where_thp_gave_huge_pages() -> None:
    """costs.c prints thp_munmap only if every PMD got a huge page; else the template's stays."""
    p = fake_probe()
    del p.runs["thp_munmap"]
    f = fitted(p)["pmd_zap"]
    template = {c["key"]: c["value"] for c in ipisim.describe("host-2cpu")["costs"]}
    assert f.cycles == template["machine.cost.pmd_zap"]
    assert "not measured here" in f.source


def test_fit_scales_with_the_measurements() -> None:
    """Slower measurements give proportionally larger measured costs: the fit reads them."""
    a, b = fitted(fake_probe()), fitted(fake_probe(2.0))
    for key in ("syscall", "pte_zap", "pmd_zap", "fault_anon", "irq_entry_exit", "ipi_wire_node"):
        assert b[key].cycles == pytest.approx(2 * a[key].cycles, rel=0.02), key


def test_written_profile_loads_and_runs(tmp_path: Path) -> None:
    p = fake_probe()
    path = tmp_path / "host.toml"
    path.write_text(probe.profile_toml(p, probe.fit(p), name="host"))
    d = ipisim.describe(str(path))
    costs = {c["key"]: c for c in d["costs"]}
    assert costs["machine.cost.syscall"]["value"] == round(166 * 2.6)
    assert costs["machine.cost.syscall"]["source"].startswith("measured: getppid()")
    r = ipisim.run("membarrier", machine=str(path), sets={"calls": 100})
    assert r.interrupts["CAL"] == [0, 100]


def test_smt_yield_from_the_read_loop_beside_its_sibling(tmp_path: Path) -> None:
    """2 x alone / both, written into [machine] with its measurement; absent, nothing is written."""
    p = probe.Probe(
        dataclasses.replace(TOPO, cpus=4, cpus_per_node=4, smt=2),
        {**fake_probe().runs, "smt_read_alone": [180.0] * 3, "smt_read_both": [240.0] * 3},
    )
    assert probe.smt_yield(p) == 1.5
    assert "read loop: alone / SMT sibling busy" in probe.format_table(p)
    path = tmp_path / "host.toml"
    path.write_text(probe.profile_toml(p, probe.fit(p), name="host"))
    params = {q["key"]: q for q in ipisim.describe(str(path))["params"]}
    assert float(params["machine.smt_yield"]["value"]) == 1.5
    assert int(params["machine.smt"]["value"]) == 2
    slow = probe.Probe(p.topology, {**p.runs, "smt_read_both": [500.0] * 3})
    assert probe.smt_yield(slow) == 1.0  # held at the parameter's floor
    assert probe.smt_yield(fake_probe()) is None
    assert "smt_yield" not in probe.profile_toml(fake_probe(), probe.fit(fake_probe()))


def test_topology_reads_this_host() -> None:
    t = probe.topology()
    assert t.cpus >= 1 and t.nodes >= 1 and t.cpus_per_node * t.nodes <= t.cpus
    assert t.ghz > 0 and t.idle in {"hlt", "haltpoll"}


def test_bad_repeats_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--repeats", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@needs_hw
def test_probe_on_this_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "host.toml"
    # Three runs: probe fits the median, so one run disturbed by the host cannot sink a cost.
    assert main(["probe", "--repeats", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "marginal cost of one membarrier IPI" in text
    assert "lock hand-off in line transfers" in text
    d = ipisim.describe(str(out))
    costs = {c["key"].removeprefix("machine.cost."): c for c in d["costs"]}
    # An IPI round trip takes far longer than a syscall on any x86 machine. The measurements are
    # asserted, not the wire fitted from them: on a noisy host the parts subtracted from the round
    # trip can exceed it, and the source then says the wire was held at its floor.
    wire = costs["ipi_wire_node"]["source"]
    assert wire.startswith("measured: membarrier IPI round trip")
    busy1, busy0 = map(float, re.findall(r"round trip (\d+) - (\d+) ns", wire)[0])
    syscall_ns = float(re.findall(r"getppid\(\) (\d+) ns", costs["syscall"]["source"])[0])
    assert busy1 - busy0 > 5 * syscall_ns
    if costs["ipi_wire_node"]["value"] == 1:
        assert "held at 1 cycle(s)" in wire


def test_invlpg_from_32_page_calls() -> None:
    p = fake_probe()
    p.runs["mprotect_sweep_32"] = [6000.0]
    f = fitted(p)
    slope = (24420 - 1980) / 255
    per_page = (6000 - (1980 - slope)) / 32 - slope
    assert f["invlpg"].cycles == round(per_page * TOPO.ghz)
    assert f["invlpg"].source.startswith("measured: mprotect sweep, 32-page calls")


@pytest.mark.skipif(not shutil.which(os.environ.get("CC", "cc")), reason="no C compiler")
def test_one_usable_cpu_says_what_it_skips() -> None:
    """Pinned to one CPU, probe measures the local costs and names what it could not measure."""
    proc = subprocess.run(
        [sys.executable, "-m", "ipisim.cli", "probe", "--repeats", "1"],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=lambda: os.sched_setaffinity(0, {0}),
    )
    assert proc.returncode == 0, proc.stderr
    assert "skipped: one CPU" in proc.stdout
    assert "membarrier 1 busy thread" in proc.stdout and "skipped" in proc.stdout
    assert "measured: getppid()" in proc.stdout


def test_apic_mode_from_the_kernel_log() -> None:
    kvm = "x2apic enabled\nAPIC: Switched APIC routing to: physical x2apic\n"
    kvm += "kvm-guest: APIC: send_IPI_mask() replaced with kvm_send_ipi_mask()\n"
    assert probe.apic_mode(kvm) == "kvm_pv"
    assert probe.apic_mode("kvm-guest: setup PV IPIs\n") == "kvm_pv"
    assert probe.apic_mode("Switched APIC routing to cluster x2apic.\n") == "x2apic_cluster"
    assert probe.apic_mode("APIC: Switched APIC routing to: physical flat\n") == "phys"
    assert probe.apic_mode("nothing about it\n") is None


def test_written_profile_names_the_apic_mode(tmp_path: Path) -> None:
    p = probe.Probe(dataclasses.replace(TOPO, apic="kvm_pv"), fake_probe().runs)
    path = tmp_path / "host.toml"
    path.write_text(probe.profile_toml(p, probe.fit(p), name="host"))
    d = ipisim.describe(str(path))
    assert {c["key"]: c["value"] for c in d["params"]}["machine.apic"] == "kvm_pv"
