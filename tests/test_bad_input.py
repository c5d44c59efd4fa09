"""Bad input gives exit 2 and one line naming the key, the value and the range, before anything
runs (issue 26); Hypothesis drives the argument parser and the grid loader with near-valid and
garbage input the same way."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ipisim
from ipisim import grid
from ipisim.cli import main


def one_line_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipisim: error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--set", "machine.cost.syscall=1e17"], ["machine.cost.syscall", '"1e17"', "[0, 1e9]"]),
        (["--set", "machine.cost.syscall=1e19"], ["machine.cost.syscall", '"1e19"', "[0, 1e9]"]),
        (["--set", "machine.cost.syscall=1e300"], ["machine.cost.syscall", '"1e300"', "[0, 1e9]"]),
        (["--set", "machine.ghz=1e-9"], ["machine.ghz", "1e-9", "[0.1, 10]"]),
        (["--seed", "-1"], ["--seed", "'-1'", "[0, 18446744073709551615]"]),
        (
            ["--seed", "99999999999999999999999"],
            ["--seed", "99999999999999999999999", "18446744073709551615]"],
        ),
        (["--json", "/nonexistent/x.json"], ["--json", "/nonexistent/x.json", "no such directory"]),
        (["--trace", "/nonexistent/t.json"], ["--trace", "/nonexistent/t.json", "no such directory"]),
        (["--max-memory", "1 parsec"], ["--max-memory", "1 parsec", "use B, KiB"]),
        (
            ["--machine", "kunpeng920-96c", "--set", "machine.rar=true"],
            ["machine.rar", "x86 (Intel)", "not x86"],
        ),
        (["--set", "kernel.broadcast_tlb_flush=rar2"], ["kernel.broadcast_tlb_flush", "rar2", "rar"]),
    ],
)
def test_bad_run_input_is_one_line(
    args: list[str], words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    line = one_line_exit_2(["run", "shootdown", *args], capsys)
    assert all(w in line for w in words), line


def test_output_paths_are_checked_before_the_run(no_runs: None, capsys: pytest.CaptureFixture[str]) -> None:
    # `no_runs` raises if a run starts: the path must be refused first.
    for option in ("--json", "--trace"):
        line = one_line_exit_2(["run", "shootdown", option, "/nonexistent/out.json"], capsys)
        assert line.endswith("cannot write: no such directory /nonexistent"), line


def test_a_run_too_big_for_the_host_is_refused_before_allocating(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "swapout", "--machine", "xeon-2s-2013", "--set", "machine.mem_per_node=64TiB"]
    line = one_line_exit_2([*args, "--set", "scale=1"], capsys)
    assert "machine.mem_per_node: 64TiB per node x 2 nodes" in line and "MemAvailable" in line, line
    small = ["run", "swapout", "--machine", "xeon-2s-2013", "--set", "scale=0.01", "--max-memory", "1MiB"]
    line = one_line_exit_2(small, capsys)
    assert "--max-memory, 1MiB" in line and "at most about" in line, line


def test_ipistorm_defaults_run_and_a_bad_offset_names_cpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "ipistorm", "--set", "duration=100us"]) == 0
    capsys.readouterr()
    line = one_line_exit_2(["run", "ipistorm", "--machine", "host-2cpu", "--set", "cpus=0"], capsys)
    assert "offset: 8 (the default) is a multiple of 2 (cpus=0" in line, line


def test_a_scale_under_the_floor_is_said(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["run", "swapout", "--machine", "xeon-2s-2013", "--set", "machine.mem_per_node=453MiB"]
    assert main([*args, "--set", "scale=0.01", "--json", str(tmp_path / "r.json")]) == 0
    assert "simulated 64MiB per node" in capsys.readouterr().err
    assert '"machine.simulated_mem_per_node": 67108864' in (tmp_path / "r.json").read_text()


def test_seeds_out_of_range_are_refused_by_the_api() -> None:
    with pytest.raises(ipisim.ConfigError, match=r"seed: -1 is out of range \[0, 18446744073709551615\]"):
        ipisim.run("shootdown", seed=-1)
    with pytest.raises(ipisim.ConfigError, match="first_seed"):
        ipisim.check("shootdown", seeds=2, first_seed=2**64 - 1)


def test_a_config_error_survives_pickling() -> None:
    # A Dask worker sends the exception back pickled: the class must import by its module name.
    with pytest.raises(ipisim.ConfigError) as e:
        ipisim.run("membarrier", sets={"no.such.key": "1"})
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is ipisim.ConfigError
    assert str(again) == str(e.value)


def test_control_characters_in_a_value_do_not_break_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    # Found by the Hypothesis test below: "\x1e" is a line break to str.splitlines().
    line = one_line_exit_2(["run", "shootdown", "--nosuch", "a\x1eb\nc"], capsys)
    assert "--nosuch a\\x1eb\\nc" in line, line


def test_a_huge_seed_is_not_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ipisim.cli", "run", "shootdown", "--seed", str(2**64)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr


GRID = "scenario = 'shootdown'\nkernels = ['linux-6.18']\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GRID + "seed = [1, 2, 3]", "bad.toml: seed: unknown key (one of: scenario,"),
        (GRID + "[set]\nbatch = 33", "bad.toml: set: unknown key"),
        (GRID + "seeds = [-1]", "bad.toml: seeds: -1 is out of range [0, 18446744073709551615]"),
        (GRID + "seeds = [18446744073709551616]", "seeds: 18446744073709551616 is out of range"),
        (
            GRID + "[axes]\nbatch = [1, 33]\n[plot]\nx = 'bach'\ny = 'interrupts.TLB'",
            "plot.x: unknown column 'bach'",
        ),
        (GRID + "[plot]\nx = 'elapsed_s'\ny = 'ops.nosuch'", "plot.y: unknown column 'ops.nosuch'"),
        (GRID + "[plot]\nz = 'batch'", "plot.z: unknown key"),
    ],
)
def test_grid_mistakes_are_found_when_it_is_read(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    line = one_line_exit_2(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1"], capsys)
    assert message in line, line
    assert not (tmp_path / "o" / "runs").exists() or not list((tmp_path / "o" / "runs").iterdir())


def test_a_plot_of_a_declared_metric_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text(GRID + "[axes]\nbatch = [1, 33]\n[plot]\nx = 'batch'\ny = 'ops.ns_per_syscall'")
    assert grid.load_grid(path).plot_y == "ops.ns_per_syscall"


def test_sweep_out_that_cannot_be_made_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "g.toml"
    path.write_text(GRID)
    (tmp_path / "file").write_text("")
    line = one_line_exit_2(["sweep", str(path), "--out", str(tmp_path / "file" / "o")], capsys)
    assert "--out" in line and "no such directory" in line, line


# Hypothesis: the parser and the grid loader, with near-valid and garbage input.

KEYS = [
    "machine.ghz",
    "machine.cost.syscall",
    "machine.mem_per_node",
    "batch",
    "pages",
    "settle",
    "scale",
    "x",
]
TEXT = st.one_of(
    st.sampled_from(
        ["1", "0", "-1", "1e17", "1e-9", "nan", "inf", "4GiB", "10ms", "parsecs", "", "=", "true"]
    ),
    st.integers().map(str),
    st.floats().map(str),
    st.text(max_size=12),
)


class _Ran(Exception):
    """The parser accepted the input and a run would start: stop there."""


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run is checked as it would be, then stopped: the fuzzer tests input, not simulation."""

    def checked(scenario: str, **kw: Any) -> None:
        kw.pop("trace_window", None)
        ipisim.check_config(scenario, **kw)
        raise _Ran

    monkeypatch.setattr(ipisim, "run", checked)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sets=st.lists(st.tuples(st.sampled_from(KEYS), TEXT).map(lambda kv: f"{kv[0]}={kv[1]}"), max_size=3),
    seed=st.one_of(st.integers(min_value=-(2**70), max_value=2**70).map(str), TEXT),
    extra=st.lists(
        st.sampled_from(["--json", "--trace", "--trace-window", "--max-memory", "--nosuch"]), max_size=2
    ),
    value=TEXT,
)
def test_fuzz_run_arguments(
    no_runs: None,
    capsys: pytest.CaptureFixture[str],
    sets: list[str],
    seed: str,
    extra: list[str],
    value: str,
) -> None:
    args = ["run", "shootdown", "--seed", seed]
    for s in sets:
        args += ["--set", s]
    for option in extra:
        args += [option, value]
    try:
        code = main(args)
    except _Ran:
        return
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("ipisim: error: "), (args, err)


def _toml(v: object) -> str:
    """A TOML inline value (NaN and infinities as TOML writes them)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


GRID_VALUES = st.recursive(
    st.one_of(
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(),
        st.booleans(),
        st.sampled_from(["shootdown", "linux-6.18", "host-2cpu", "batch", "ops.ns_per_syscall"]),
        st.text(max_size=8),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
GRID_KEYS = st.sampled_from(
    ["scenario", "machine", "kernels", "seeds", "sets", "axes", "plot", "seed", "set", ""]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    doc=st.dictionaries(GRID_KEYS, GRID_VALUES, max_size=6), garbage=st.booleans(), text=st.text(max_size=40)
)
def test_fuzz_grid_loader(tmp_path: Path, doc: dict[str, object], garbage: bool, text: str) -> None:
    path = tmp_path / "fuzz.toml"
    path.write_text(text if garbage else "".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in doc.items()))
    try:
        g = grid.load_grid(path)
    except grid.GridError as e:
        assert "\n" not in str(e).strip() and str(e).startswith(str(path)), str(e)
        return
    assert g.points and all(0 <= p.seed < 2**64 for p in g.points)
