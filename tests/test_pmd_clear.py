"""Seed 002 on the command line: the powerpc huge-PMD compare table is golden, `--comm` profiles one
command, and x86-only scenarios refuse a powerpc machine with a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipisim.cli import main

GOLDEN = Path(__file__).parent / "golden"


def test_pmd_clear_compare_table_is_golden(capsys: pytest.CaptureFixture[str]) -> None:
    # 64 MiB of guest RAM = 32 huge PMDs: 127 serialize IPIs each before, none after.
    args = ["compare", "qemu-guest-ram-unplug", "--machine", "power9-128c", "--set", "guest_ram=64MiB"]
    kernels = ["before=linux-5.7", "lockless=linux-5.8,kernel.pmd_clear=lockless", "merged=linux-5.8"]
    assert main([*args, *(a for k in kernels for a in ("--kernel", k))]) == 0
    out = capsys.readouterr().out
    assert out == (GOLDEN / "qemu-unplug-5.7-vs-5.8-64MiB.txt").read_text()
    ipis = next(line for line in out.splitlines() if line.startswith("Ops Function call IPIs"))
    assert ipis.split()[4:] == ["4064.00", "0.00", "0.00"]  # 32 PMDs x 127 CPUs


def test_an_x86_scenario_on_a_powerpc_machine_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "reclaim", "--machine", "power9-128c"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "machine.arch" in err and "powerpc_radix" in err


def test_comm_profiles_one_command(capsys: pytest.CaptureFixture[str]) -> None:
    # With every vCPU ceded, QEMU's kernel time is the munmap thread's: mostly the serialize IPIs.
    args = ["run", "qemu-guest-ram-unplug", "--kernel", "linux-5.7", "--set", "guest_ram=64MiB"]
    assert main([*args, "--set", "busy_vcpus=0", "--comm", "qemu-system-ppc"]) == 0
    out = capsys.readouterr().out.split("(simulated CPU time of comm qemu-system-ppc)\n")[1]
    top = {line.split()[-1] for line in out.splitlines()[:2]}
    assert top == {"xive_cause_ipi", "smp_call_function_many_cond"}
    assert main([*args, "--comm", "nosuch"]) == 2
    assert "--comm: no task named 'nosuch' ran" in capsys.readouterr().err
