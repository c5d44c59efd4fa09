"""The command line: summaries, JSON output, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ipisim.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ipisim.cli", *args], capture_output=True, text=True, check=False
    )


def test_run_prints_proc_interrupts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "shootdown", "--set", "batch=33"]) == 0
    out = capsys.readouterr().out
    assert "TLB:          0         16   TLB shootdowns" in out
    assert "nr_tlb_local_flush_one 512" in out


def test_profile_shows_spin_lock_callers(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "swapout", "--machine", "xeon-2s-2013", "--kernel", "linux-3.8"]
    assert main([*args, "--set", "scale=0.002", "--profile"]) == 0
    lines = capsys.readouterr().out.splitlines()
    i = next(n for n, line in enumerate(lines) if line.endswith("[k] _raw_spin_lock"))
    assert lines[i + 1].strip().startswith("- ") and lines[i + 1].endswith("% __page_check_address")


def test_json_is_byte_identical_across_runs(tmp_path: Path) -> None:
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for p in paths:
        args = ["run", "will-it-scale/tlb_flush2", "--machine", "xeon-4n-48c-64g", "--json", str(p)]
        assert main([*args, "--set", "duration=1ms", "--seed", "3"]) == 0
    assert paths[0].read_bytes() == paths[1].read_bytes()
    data = json.loads(paths[0].read_text())
    for key in ("config", "elapsed_s", "user_s", "system_s", "interrupts", "vmstat", "tracepoints", "ops"):
        assert key in data
    assert data["config"]["machine.cost.invlpg"]["source"]


BAD_INPUTS = [
    (["run", "nosuch"], "unknown scenario"),
    (["run", "shootdown", "--set", "nosuchkey=1"], "nosuchkey: unknown key"),
    (["run", "shootdown", "--set", "machine.mem_per_node=-4GiB"], "negative size"),
    (["run", "shootdown", "--set", "machine.mem_per_node=4XB"], "unknown size unit"),
    (["run", "shootdown", "--set", "machine.nodes=zero"], "expected an integer"),
    (["run", "shootdown", "--set", "batch"], "expected key=value"),
    (["run", "shootdown", "--kernel", "linux-9.9"], "unknown kernel"),
    (["run", "shootdown", "--machine", "nosuch.toml"], "nosuch.toml: cannot read"),
    (["run", "shootdown", "--set", "remote_threads=5"], "the machine has 2"),
    (
        # A bad last variant is refused before the first runs (no "variant 1/2 ... done" line).
        ["compare", "shootdown", "--jobs", "1", "--kernel", "a=linux-6.18", "--kernel", "b=linux-6.18,x=1"],
        "x: unknown key",
    ),
    (["describe", "nothing"], "unknown thing"),
    (["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    p = run_cli(*args)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert message in lines[0]
    assert "Traceback" not in p.stderr and "panicked" not in p.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[machine\nnodes = 1\n", "malformed TOML (line 1)"),
        ("[machine]\nnodes = 0\n", "machine.nodes: 0 is out of range"),
        ("[machine]\nwarp = 9\n", "machine.warp: unknown key"),
        ("[machine]\nnodes = 1\n", "cost.syscall: missing"),
    ],
)
def test_bad_machine_file_names_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "m.toml"
    f.write_text(text)
    p = run_cli("run", "shootdown", "--machine", str(f))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1
    assert str(f) in p.stderr and message in p.stderr


def test_list_and_describe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "shootdown" in out and "host-2cpu" in out and "linux-4.3" in out
    assert main(["describe", "host-2cpu"]) == 0
    out = capsys.readouterr().out
    assert "machine.cost.invlpg" in out and "source:" in out
    assert main(["describe", "shootdown"]) == 0
    assert "batch" in capsys.readouterr().out


def test_reproduce_jobs_default_to_the_usable_cpus() -> None:
    import argparse
    import os

    from ipisim import cli

    want = max(1, min(len(os.sched_getaffinity(0)), cli.MAX_DEFAULT_JOBS))
    assert cli._jobs(argparse.Namespace(jobs=None)) == want
    assert cli._jobs(argparse.Namespace(jobs=3)) == 3
