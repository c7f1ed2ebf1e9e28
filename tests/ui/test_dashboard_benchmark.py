"""The dashboard benchmark's side-by-side mode alternates which page each run visits first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# benchmarks/ is not installed (nor on sys.path): load the script from the repository by its path.
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ui" / "dashboard.py"
_spec = importlib.util.spec_from_file_location("kf_ui_dashboard_benchmark", SCRIPT)
assert _spec is not None and _spec.loader is not None
dashboard = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = dashboard
_spec.loader.exec_module(dashboard)
visit_order, _medians = dashboard.visit_order, dashboard._medians


def test_side_by_side_runs_alternate_the_order() -> None:
    orders = [visit_order(["7552abf", "new"], run) for run in range(4)]
    assert orders == [["7552abf", "new"], ["new", "7552abf"], ["7552abf", "new"], ["new", "7552abf"]]
    assert [visit_order(["new"], run) for run in range(2)] == [["new"], ["new"]]


def test_the_recorded_orders_are_not_taken_for_figures() -> None:
    figures = {"first_render_cold_ms": [3.0, 1.0, 2.0], "visit_order_per_run": [["old", "new"], ["new", "old"]],
               "load_average_per_run": [1.0], "empty_ms": []}  # fmt: skip
    assert _medians(figures) == {"first_render_cold_ms": 2.0}
