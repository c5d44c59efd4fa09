"""`ipisim reproduce --quick`: every published figure gets a simulated one, a verdict and a report."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ipisim import reproduce
from ipisim.cli import main


def test_published_figures_name_their_sources() -> None:
    for e in reproduce.load_published():
        assert e["source"] and e["author"] and e["machine"]
        labels = {v["label"] for v in e["variants"]}
        for m in e["metrics"]:
            assert m["variant"] in labels and m.get("base", m["variant"]) in labels


def test_quick_reproduce_writes_json_and_a_self_contained_report(tmp_path: Path) -> None:
    code = main(["reproduce", "--quick", "--out", str(tmp_path)])
    entries = json.loads((tmp_path / "reproduce.json").read_text())
    assert code == (0 if all(e["pass"] for e in entries) else 1)
    ids = [m["id"] for e in reproduce.load_published() for m in e["metrics"]]
    assert [e["id"] for e in entries] == ids
    for e in entries:
        assert set(e) == {"id", "experiment", "metric", "unit", "published", "simulated", "tolerance", "pass"}
    page = (tmp_path / "report.html").read_text()
    assert page.count("<svg") == len(reproduce.load_published())
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_tolerances_are_relative_or_absolute() -> None:
    assert reproduce._check(100, 124, {"relative": 0.25}) == (True, "±25%")
    assert reproduce._check(100, 126, {"relative": 0.25})[0] is False
    assert reproduce._check(24.4, 30.4, {"absolute": 6}) == (True, "±6 points")


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no headless Chromium")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    main(["reproduce", "--quick", "--out", str(tmp_path)])
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            "--window-size=1100,900",
            (tmp_path / "report.html").as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_parallel_runs_give_the_same_results() -> None:
    experiments = reproduce.load_published()[:2]
    quiet: list[str] = []
    one = reproduce.run_all(experiments, quick=True, progress=quiet.append, jobs=1)
    two = reproduce.run_all(experiments, quick=True, progress=quiet.append, jobs=2)
    assert {e: {k: r.to_json() for k, r in v.items()} for e, v in one.items()} == {
        e: {k: r.to_json() for k, r in v.items()} for e, v in two.items()
    }
