"""`ipisim check`: the seed search of the TLB-coherence checker, and `--no-check`."""

from __future__ import annotations

import pytest

import ipisim
from ipisim.cli import main

RECLAIM = ["reclaim", "--machine", "kvm-8cpu", "--set", "processes=7", "--set", "memory=anon"]


def test_unsafe_migration_is_caught_with_a_reproducer(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", "migrate", "--kernel", "linux-6.4", "--set", "kernel.migrate_flush=batched_unsafe"]
    assert main([*args, "--seeds", "5"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("VIOLATION: seed 1 of migrate")
    assert "use-after-free at free: CPU " in out
    # The first violation need not be batch 1's: a CPU lazy on the mm (its thread asleep on a
    # migration entry) is not counted at the free (mm/rmap.rs check_translations).
    assert "unmapped, flush deferred in batch " in out
    reproduce = next(line for line in out.splitlines() if line.startswith("reproduce: "))
    assert "--seed 1" in reproduce and "kernel.migrate_flush=batched_unsafe" in reproduce


def test_writing_out_before_the_dirty_flush_is_caught(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*RECLAIM, "--set", "access=write", "--kernel", "linux-4.3"]
    assert main(["check", *args, "--set", "kernel.flush_dirty_before_pageout=false", "--seeds", "3"]) == 1
    assert "lost-write at pageout" in capsys.readouterr().out


def test_safe_policies_pass_a_few_seeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "migrate", "--kernel", "linux-6.4", "--seeds", "4"]) == 0
    assert main(["check", *RECLAIM, "--set", "access=write", "--kernel", "linux-4.3", "--seeds", "4"]) == 0
    assert capsys.readouterr().out.count("no TLB-coherence violation") == 2


def test_seeds_are_perturbed_but_reproducible() -> None:
    a = ipisim.check("migrate", kernel="linux-6.4", seeds=2)
    assert a.clean and a.seeds_run == 2
    sets = dict(a.sets)
    assert sets["sched.placement"] == "shuffled" and sets["memory"] == "512KiB"
    r1, r2, r3 = (ipisim.run("migrate", kernel="linux-6.4", sets=a.sets, seed=s) for s in (1, 1, 2))
    assert r1.data == r2.data
    assert r1.ops["migrate_s"] != r3.ops["migrate_s"]


def test_no_check_switches_the_checker_off(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "shootdown", "--no-check", "--json", "/dev/null"]) == 0
    r = ipisim.run("shootdown", sets={"check.enabled": False})
    assert r.data["check"]["enabled"] is False


def test_bad_seed_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "migrate", "--seeds", "0"]) == 2
    assert capsys.readouterr().err.strip() == "ipisim: error: --seeds: must be at least 1, got 0"


def test_describe_run_lists_the_perturbation_and_checker_keys() -> None:
    keys = [p["key"] for p in ipisim.describe("run")["params"]]
    assert keys == ["sched.jitter", "sched.placement", "check.enabled"]
