"""`ipisim calibrate`: known costs are recovered, what no figure can tell apart is refused, and the
written profile runs as a machine and gives the fitted figures."""

from __future__ import annotations

from pathlib import Path

import pytest

import ipisim
from ipisim import calibration, reproduce
from ipisim.cli import main

MACHINES = Path(__file__).parents[1] / "crates/ipisim-core/data/machines"

# shootdown on host-2cpu: madvise, batch 1, a busy remote thread; its three times separate
# syscall from irq_entry_exit.
SETS = [("op", "madvise"), ("batch", "1"), ("remote", "busy")]
KNOWN = {"syscall": 700.0, "irq_entry_exit": 3000.0}


def measured_with(costs: dict[str, float]) -> dict[str, float]:
    r = ipisim.run(
        "shootdown", machine="host-2cpu", sets=[*SETS, *((f"machine.cost.{k}", v) for k, v in costs.items())]
    )
    return {"elapsed_s": r.elapsed_s, "user_s": r.user_s, "system_s": r.system_s}


@pytest.fixture(scope="module")
def figures() -> dict[str, float]:
    return measured_with(KNOWN)


def test_known_costs_are_recovered_within_one_percent(figures: dict[str, float]) -> None:
    start = {c["key"]: c["value"] for c in ipisim.describe("host-2cpu")["costs"]}
    assert start["machine.cost.syscall"] == 434 and start["machine.cost.irq_entry_exit"] == 14800
    cal = ipisim.calibrate(
        "shootdown",
        machine="host-2cpu",
        sets=SETS,
        measured=figures,
        free=[calibration.FreeCost("syscall"), calibration.FreeCost("irq_entry_exit")],
        jobs=2,
    )
    fitted = {c.name: c.value for c in cal.costs}
    for name, value in KNOWN.items():
        assert fitted[name] == pytest.approx(value, rel=0.01)
    assert all(abs(f.residual) < 1e-4 for f in cal.figures)


def test_an_ordered_cost_is_fitted_at_least_as_large_as_the_other(figures: dict[str, float]) -> None:
    # Known 700 and 3000 cycles. With irq_entry_exit >= syscall (true of them) both come back;
    # with syscall >= irq_entry_exit (false of them) the fit stays on the order's edge.
    def fit(*free: str) -> dict[str, float]:
        cal = ipisim.calibrate("shootdown", machine="host-2cpu", sets=SETS, measured=figures, free=free)
        return {c.name: c.value for c in cal.costs}

    held = fit("machine.cost.syscall", "machine.cost.irq_entry_exit>=syscall")
    for name, value in KNOWN.items():
        assert held[name] == pytest.approx(value, rel=0.01)
    edge = fit("machine.cost.irq_entry_exit", "machine.cost.syscall>=irq_entry_exit")
    assert edge["syscall"] >= edge["irq_entry_exit"]
    assert edge["syscall"] == pytest.approx(edge["irq_entry_exit"], rel=1e-3)
    assert calibration.parse_free("machine.cost.syscall>=irq_entry_exit").spec() == (
        "machine.cost.syscall>=irq_entry_exit"
    )
    for bad in ["machine.cost.syscall>=", "machine.cost.syscall>=irq_entry_exit=1:2"]:
        with pytest.raises(ipisim.ConfigError, match="NAME>=OTHER"):
            calibration.parse_free(bad)
    with pytest.raises(ipisim.ConfigError, match="must be another free cost"):
        fit("machine.cost.syscall>=irq_entry_exit")
    # A 0-cycle placeholder (x86 has no TLBI) starts at the cost below it, and moves nothing.
    with pytest.raises(ipisim.ConfigError, match="tlbi_is: moves none"):
        fit("machine.cost.syscall", "machine.cost.tlbi_is>=syscall")


def test_a_multi_variant_calibration_recovers_a_cost_from_several_runs() -> None:
    # One figure from each of two variants (batch 1 and batch 33) made with syscall = 700.
    variants = {"b1": [("batch", "1")], "b33": [("batch", "33")]}
    base = [("op", "madvise"), ("remote", "busy")]
    measured = {}
    for label, extra in variants.items():
        r = ipisim.run(
            "shootdown", machine="host-2cpu", sets=[*base, *extra, ("machine.cost.syscall", "700")]
        )
        measured[f"{label}:elapsed_s"] = r.elapsed_s
    cal = ipisim.calibrate(
        "shootdown",
        machine="host-2cpu",
        sets=base,
        measured=measured,
        free=["machine.cost.syscall"],
        variants=variants,
    )
    assert {c.name: c.value for c in cal.costs}["syscall"] == pytest.approx(700, rel=0.01)
    with pytest.raises(ipisim.ConfigError, match="LABEL:PATH"):
        ipisim.calibrate(
            "shootdown",
            machine="host-2cpu",
            sets=base,
            measured={"b2:elapsed_s": 1.0},
            free=["machine.cost.syscall"],
            variants=variants,
        )


def test_a_numeric_machine_parameter_is_fitted_as_a_cost_is() -> None:
    # One core of two threads: the sender's steps share it with the busy remote thread's spin, so
    # elapsed time follows machine.smt_yield. Made with 1.4, fitted from the default 2.
    sets = [*SETS, ("machine.smt", "2")]
    r = ipisim.run("shootdown", machine="host-2cpu", sets=[*sets, ("machine.smt_yield", "1.4")])
    cal = ipisim.calibrate(
        "shootdown",
        machine="host-2cpu",
        sets=sets,
        measured={"elapsed_s": r.elapsed_s},
        free=["machine.smt_yield=1:2"],
    )
    (fitted,) = cal.costs
    assert (fitted.key, fitted.start) == ("machine.smt_yield", 2.0)
    assert fitted.value == pytest.approx(1.4, rel=0.01)
    (line,) = [x for x in cal.profile_toml.splitlines() if x.startswith("smt_yield = ")]
    assert line.startswith(f"smt_yield = {fitted.value!r}  # calibrated: ipisim calibrate shootdown ")
    assert "--free machine.smt_yield=1:2" in line
    for bad, message in [
        ("machine.smt_yield", "needs bounds"),
        ("machine.smt_yield=2:1", "bounds must be LO:HI"),
    ]:
        with pytest.raises(ipisim.ConfigError, match=message):
            calibration.parse_free(bad)
    for bad in ["machine.smt=1:2", "machine.bogus=1:2"]:
        with pytest.raises(ipisim.ConfigError, match="not a numeric machine parameter"):
            ipisim.calibrate(
                "shootdown", machine="host-2cpu", sets=sets, measured={"elapsed_s": 1.0}, free=[bad]
            )


def test_a_pair_no_figure_can_tell_apart_is_refused(figures: dict[str, float]) -> None:
    # syscall and ipi_wire_node move elapsed, user and system time by the same amounts here.
    with pytest.raises(ipisim.ConfigError, match="no figure set of this run can tell them apart"):
        ipisim.calibrate(
            "shootdown",
            machine="host-2cpu",
            sets=SETS,
            measured=figures,
            free=[calibration.FreeCost("syscall"), calibration.FreeCost("ipi_wire_node")],
        )


def write_measured(tmp_path: Path, figures: dict[str, float]) -> Path:
    path = tmp_path / "measured.toml"
    path.write_text("".join(f"{k} = {v!r}\n" for k, v in figures.items()))
    return path


def cli(tmp_path: Path, measured: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "calibrate",
            "shootdown",
            "--machine",
            "host-2cpu",
            *(a for k, v in SETS for a in ("--set", f"{k}={v}")),
            "--measured",
            str(measured),
            "--free",
            "machine.cost.syscall",
            "--free",
            "machine.cost.irq_entry_exit=1000:30000",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_cli_writes_a_profile_that_runs_and_gives_the_fitted_figures(
    tmp_path: Path, figures: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    measured = write_measured(tmp_path, figures)
    out = tmp_path / "cal.toml"
    assert cli(tmp_path, measured, out) == 0
    printed = capsys.readouterr().out
    assert "machine.cost.irq_entry_exit" in printed and "1000:30000" in printed
    text = out.read_text()
    assert 'name = "host-2cpu-calibrated"' in text
    assert text.count('source = "calibrated: ipisim calibrate shootdown --machine host-2cpu') == 2
    assert f"--measured {measured}; residuals elapsed_s" in text
    again = tmp_path / "again.toml"
    assert cli(tmp_path, measured, again) == 0
    assert again.read_bytes() == out.read_bytes()
    r = ipisim.run("shootdown", machine=str(out), sets=SETS)
    for path, value in figures.items():
        assert r.value(path) == pytest.approx(value, rel=1e-4)


@pytest.mark.parametrize(
    ("measured", "free", "message"),
    [
        ("elapsed_s = 0.004\n", ["machine.cost.sycall"], "--free machine.cost.sycall: unknown cost"),
        (
            "elapsed_s = 0.004\n",
            [f"machine.cost.{c}" for c in ("syscall", "invlpg", "ipi_send", "cr3_flush")],
            "at most 3 free costs, got 4",
        ),
        ("ops.syscalls = 512\n", ["machine.cost.syscall"], "ops.syscalls: depends on none of the free costs"),
        ("ops.nonesuch = 1\n", ["machine.cost.syscall"], "ops.nonesuch: a shootdown result has no such"),
        ("bogus = 1\n", ["machine.cost.syscall"], "bogus: not a result path"),
        ("elapsed_s = -1\n", ["machine.cost.syscall"], "elapsed_s: expected a positive number"),
        ("elapsed_s = 0.004\n", ["machine.cost.syscall=9:1"], "bounds must be LO:HI"),
        ("elapsed_s = 0.004\n", ["machine.cost.syscall=1:9"], "434 cycles is out of bounds"),
    ],
)
def test_bad_calibration_is_one_line_exit_2(
    tmp_path: Path, measured: str, free: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.toml"
    path.write_text(measured)
    args = ["calibrate", "shootdown", "--measured", str(path), "--out", str(tmp_path / "o.toml")]
    assert main([*args, *(a for f in free for a in ("--free", f))]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("calibrate: ")]
    assert len(errors) == 1 and errors[0].startswith("ipisim: error: ") and message in errors[0], errors


def test_missing_measured_file_and_output_directory_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["calibrate", "shootdown", "--free", "machine.cost.syscall"]
    assert main([*base, "--measured", str(tmp_path / "none.toml"), "--out", str(tmp_path / "o.toml")]) == 2
    assert "none.toml: cannot read" in capsys.readouterr().err
    path = write_measured(tmp_path, {"elapsed_s": 0.004})
    assert main([*base, "--measured", str(path), "--out", str(tmp_path / "no" / "o.toml")]) == 2
    assert "cannot write: no such directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("experiment", "message"),
    [("seed004", "declares no calibration of kvm-8cpu"), ("seed999", "--experiment: unknown 'seed999'")],
)
def test_experiment_without_a_calibration_is_refused(
    tmp_path: Path, experiment: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", "--experiment", experiment, "--out", str(tmp_path / "o.toml")]) == 2
    assert message in capsys.readouterr().err


def test_mmtests_table_first_column_is_read(tmp_path: Path) -> None:
    path = tmp_path / "table.txt"
    path.write_text(
        "Ops lru-file-mmap-read-elapsed      159.62 (  0.00%)   120.68 ( 24.40%)\n\n"
        "           4.2.0-rc1    4.2.0-rc1\nUser          581.00       611.43\n"
        "System       5804.93      4111.76\nElapsed       161.03       122.12\n"
    )
    assert calibration.load_measured(path) == {
        "ops.lru-file-mmap-read-elapsed": 159.62,
        "user_s": 581.0,
        "system_s": 5804.93,
        "elapsed_s": 161.03,
    }


def test_dask_scheduler_gives_the_same_profile(
    tmp_path: Path, figures: dict[str, float], dask_cluster: str
) -> None:
    measured = write_measured(tmp_path, figures)
    assert cli(tmp_path, measured, tmp_path / "local.toml") == 0
    assert cli(tmp_path, measured, tmp_path / "dask.toml", "--scheduler", dask_cluster) == 0
    assert (tmp_path / "dask.toml").read_bytes() == (tmp_path / "local.toml").read_bytes()


def test_declared_calibrations_fit_baseline_figures_with_few_free_costs() -> None:
    experiments = {e["id"]: e for e in reproduce.load_published()}
    specs = reproduce.load_calibrations()
    assert {c.machine_profile for c in specs} >= {"xeon-4n-48c-64g", "xeon-2s-2013", "power9-128c"}
    for c in specs:
        assert 1 <= len(c.free) <= 3
        e = experiments[c.experiment]
        assert c.variant == e["variants"][0]["label"], "only the baseline variant is a calibration target"
        # A multi-variant calibration fits one kernel's rows (the baseline's) only.
        kernels = {v["label"]: v["kernel"] for v in e["variants"]}
        assert {kernels[label] for label in c.variant_sets} <= {kernels[c.variant]}
        # The shipped profile is the one the declared command writes.
        calibrated = ipisim.describe(c.machine_profile + "-calibrated")
        costs = {x["key"]: x for x in calibrated["costs"]}
        text = (MACHINES / f"{c.machine_profile}-calibrated.toml").read_text()
        for f in c.free:
            source = f"calibrated: ipisim calibrate --experiment {c.experiment};"
            if f.param:  # a parameter's source is its line's comment
                (line,) = [x for x in text.splitlines() if x.startswith(f"{f.name} = ")]
                assert f"  # {source}" in line
            else:
                assert costs[f.key]["source"].startswith(source)
        # Everything else is the physics-only profile's as it is now: a cost or parameter changed
        # there without running the declared command again leaves a stale calibrated profile.
        base, free = ipisim.describe(c.machine_profile), {f.key for f in c.free}
        for x in base["costs"]:
            if x["key"] not in free:
                assert (costs[x["key"]]["value"], costs[x["key"]]["source"]) == (x["value"], x["source"])
        params = {p["key"]: p["value"] for p in calibrated["params"]}
        for p in base["params"]:
            if p["key"] not in ("machine.name", "machine.description", *free):
                assert params[p["key"]] == p["value"], (c.machine_profile, p["key"])
    # Experiments on one machine share its calibration.
    assert reproduce.calibration_spec("seed001") == reproduce.calibration_spec("seed000")
    assert reproduce.calibration_spec("migrate64") == reproduce.calibration_spec("seed003")
    assert reproduce.calibration_spec("invlpgb-milan36") == reproduce.calibration_spec("invlpgb-milan72")


def test_start_points_are_the_profile_then_a_fixed_spread_over_the_bounds() -> None:
    points = calibration.start_points([0.5, 1.0], [0.0, 0.0], [1.0, 4.0], 4)
    # Halton's first points after the corner: (1/2, 1/3), (1/4, 2/3), (3/4, 1/9).
    assert points == [
        [0.5, 1.0],
        [0.5, pytest.approx(4 / 3)],
        [0.25, pytest.approx(8 / 3)],
        [0.75, pytest.approx(4 / 9)],
    ]
    assert calibration.start_points([0.5, 1.0], [0.0, 0.0], [1.0, 4.0], 1) == [[0.5, 1.0]]


def test_several_starts_keep_the_best_fit_and_say_so_in_the_command(
    tmp_path: Path, figures: dict[str, float], capsys: pytest.CaptureFixture[str]
) -> None:
    measured = write_measured(tmp_path, figures)
    out = tmp_path / "cal.toml"
    assert cli(tmp_path, measured, out, "--starts", "3") == 0
    err = capsys.readouterr().err
    assert "round 1, start 3 of 3" in err and "round 1: best of 3 starts" in err
    text = out.read_text()
    assert text.count("--starts 3 --free") == 2
    r = ipisim.run("shootdown", machine=str(out), sets=SETS)
    for path, value in figures.items():
        assert r.value(path) == pytest.approx(value, rel=1e-3)
    for bad in ["0", "17"]:
        assert cli(tmp_path, measured, out, "--starts", bad) == 2
        assert "--starts: give 1 to 16 starting points" in capsys.readouterr().err
    assert main(["calibrate", "--experiment", "seed003", "--starts", "2", "--out", str(out)]) == 2
