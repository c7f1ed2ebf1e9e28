"""The strategy benchmark: metrics, replay on a recorded landscape, and the command."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelfarm.commands.strategy_benchmark import app
from kernelfarm.core.landscape import load_landscape
from kernelfarm.tuner.strategies.registry import get_strategy
from kernelfarm.tuner.strategy_benchmark.metrics import evaluations_to, fraction_curve, summarize
from kernelfarm.tuner.strategy_benchmark.replay import replay

PNPOLY = Path(__file__).resolve().parents[2] / "kernels" / "recorded" / "pnpoly_RTX_3090.json.gz"


def test_fraction_curve_and_hits() -> None:
    curve = fraction_curve([None, 4.0, 2.5, None, 2.0], optimum=2.0, budget=7)
    assert curve == [0.0, 0.5, 0.8, 0.8, 1.0, 1.0, 1.0]
    assert evaluations_to(curve, 0.8) == 3 and evaluations_to(curve, 0.95) == 5
    assert evaluations_to([0.1, 0.2], 0.9) is None


def test_summary_counts_misses_as_infinite() -> None:
    traces = [[2.0], [4.0, 2.0], [4.0, 4.0, 4.0]]  # reach 1.0 at 1, 2, never
    s = summarize(traces, optimum=2.0, budget=25, ask_seconds=[0.001, 0.003, 0.002])
    assert s.frac_at == {"25": pytest.approx((1 + 1 + 0.5) / 3), "50": None, "100": None, "200": None}
    assert s.n95_median == 2 and s.n95_success == pytest.approx(2 / 3)
    assert summarize([[4.0], [4.0], [2.0]], 2.0, 25).n95_median is None
    assert s.ask_ms_median == pytest.approx(2.0)
    assert s.failed_fraction == 0.0


@pytest.fixture(scope="module")
def small_landscape(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A slice of pnpoly (one between_method), written unterminated and gzipped as Kernel Tuner
    leaves an interrupted cache file."""
    data = json.loads(gzip.decompress(PNPOLY.read_bytes()))
    data["cache"] = {k: v for k, v in data["cache"].items() if k.startswith("0,") and k.endswith(",0")}
    text = json.dumps(data)
    assert text.endswith("}}")
    path = tmp_path_factory.mktemp("landscapes") / "pnpoly_slice.json.gz"
    path.write_bytes(gzip.compress((text[:-2] + ",\n").encode()))
    return path


def test_replay_finds_a_good_config_and_counts_failures(small_landscape: Path) -> None:
    landscape = load_landscape(small_landscape)
    recorded = json.loads(gzip.decompress(small_landscape.read_bytes()).decode().rstrip(",\n") + "}}")["cache"]
    # The objective is Kernel Tuner's "time" of each entry; failures are recorded as strings there.
    times = {key: entry["time"] for key, entry in recorded.items() if isinstance(entry["time"], int | float)}
    failed = set(recorded) - set(times)
    assert times and failed  # the slice has both, so both branches below are exercised
    run = replay(landscape, get_strategy("bayes"), budget=30, seed=0, batch=4)
    assert len(run.values) == 30 and len(run.ask_seconds) == 8
    keys = [landscape.space.key(o.config) for o in run.history]
    assert len(set(keys)) == len(keys)  # no config evaluated twice
    for key, value in zip(keys, run.values, strict=True):  # each value is the file's own number
        assert value == (None if key in failed else pytest.approx(times[key])), key
    best = min(v for v in run.values if v is not None)
    assert best >= min(times.values())  # nothing beats the recorded optimum
    assert fraction_curve(run.values, min(times.values()), 30)[-1] > 0.9
    assert landscape.optimum_ms == pytest.approx(min(r.time_ms for r in landscape.entries.values() if r.time_ms))


def test_command_writes_the_documented_json(small_landscape: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app,
        [str(small_landscape), "--strategy", "random", "--strategy", "genetic", "--budget", "25",
         "--repeats", "2", "--keep-failures", "--seed", "3", "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    entry = report["landscapes"]["pnpoly_slice"]
    assert set(entry["strategies"]) == {"random", "genetic"}
    for summary in entry["strategies"].values():
        assert set(summary["frac_at"]) == {"25", "50", "100", "200"}
        assert all(0 < summary["frac_at"][b] <= 1 for b in ("25",))  # 25 evaluations were run
        assert 0 <= summary["n95_success"] <= 1 and summary["ask_ms_median"] > 0
        assert summary["n90_median"] is None or 1 <= summary["n90_median"] <= 25
    assert report["settings"]["keep_failures"] is True and report["settings"]["seed"] == 3


def test_command_rejects_unknown_strategies_and_files(small_landscape: Path, tmp_path: Path) -> None:
    assert CliRunner().invoke(app, [str(small_landscape), "--strategy", "nope", "--repeats", "1"]).exit_code != 0
    assert CliRunner().invoke(app, [str(tmp_path / "missing.json")]).exit_code != 0
