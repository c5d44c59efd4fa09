"""`ipisim validate`: the membarrier and will-it-scale microbenchmarks against this machine.

Skipped where hw.check_available() says this machine cannot run them.
"""

from __future__ import annotations

import pytest

from ipisim import hw
from ipisim.cli import main

UNAVAILABLE = hw.unavailable_reason()

needs_hw = pytest.mark.skipif(bool(UNAVAILABLE), reason=UNAVAILABLE)


@needs_hw
def test_membarrier_ipis_match_this_machine() -> None:
    """Busy remote thread: exactly one CAL per call, as simulated; sleeping or none: 0."""
    rows = {r.bench: r for r in hw.membarrier_rows(machine="host-2cpu", kernel="linux-6.18", repeats=3)}
    busy = rows["membarrier busy"]
    assert busy.sim_count == 10000
    assert busy.count_ok, busy.real_counts
    for remote in ("sleeping", "none"):
        assert rows[f"membarrier {remote}"].sim_count == 0
        assert rows[f"membarrier {remote}"].count_ok, rows[f"membarrier {remote}"].real_counts
    # Waiting for an IPI round trip costs many syscalls' worth.
    assert busy.real_ns > 5 * rows["membarrier none"].real_ns


@needs_hw
def test_tlb_flush_one_thread_sends_no_ipis() -> None:
    # Three repeats, so that another process's flush landing in one window (a CI runner's threads)
    # is outvoted by the median.
    for r in hw.tlb_flush_rows(machine="host-2cpu", kernel="linux-6.18", repeats=3, loops=1024, threads=(1,)):
        assert r.sim_count == 0 and r.count_ok, (r.bench, r.real_counts)


@needs_hw
def test_tlb_flush2_two_threads_at_most_one_ipi_per_loop() -> None:
    """Each 1-page madvise shoots down the other thread's CPU: one TLB IPI per iteration (fewer
    for real when KVM's paravirt flush skips a preempted vCPU, never more)."""
    rows = hw.tlb_flush_rows(machine="host-2cpu", kernel="linux-6.18", repeats=1, loops=2048, threads=(2,))
    flush2 = next(r for r in rows if r.bench == "tlb_flush2 threads=2")
    assert 2 * 2048 * 0.98 <= flush2.sim_count <= 2 * 2048 + 16
    assert flush2.real_count <= flush2.sim_count * 1.01


def test_time_and_count_verdicts() -> None:
    s = hw.Sample(syscalls=10, ns=12000.0, tlb=[0, 10], cal=[0, 10], cpu_ns=10000.0)
    r = hw.Row("x", "TLB", [s, s, s], 10, 1200.0)
    assert r.real_count == 10 and r.count_ok and r.real_ns == 1000.0
    assert r.time_ratio == pytest.approx(1.2) and r.time_ok
    assert not hw.Row("x", "TLB", [s], 10, 1300.0).time_ok
    assert not hw.Row("x", "CAL", [s], 11, 1000.0).count_ok
    assert "DIFF" in hw.format_rows([hw.Row("x", "CAL", [s], 11, 1000.0)])
    # Time is the best repeat (other tenants only slow a run down), as probe measures costs.
    slow = hw.Sample(syscalls=10, ns=30000.0, tlb=[0, 10], cal=[0, 10], cpu_ns=30000.0)
    assert hw.Row("x", "TLB", [slow, s, slow], 10, 1000.0).real_ns == 1000.0


def test_bad_machine_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--machine", "no-such-machine.toml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-machine.toml" in err
