"""The Grafana dashboard in deploy/ queries only metrics that /metrics exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from kernelfarm.api.metrics import TIME_BUCKETS
from kernelfarm.core import metrics as process_metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "kernelfarm-dashboard.json"
# Families the API reads from the database at scrape time (api/metrics.py FarmCollector).
FARM_FAMILIES = {"kernelfarm_trials", "kernelfarm_queue_depth", "kernelfarm_running_trials", "kernelfarm_waiting_jobs",
                 "kernelfarm_live_workers", "kernelfarm_busy_workers"} | {
    f"kernelfarm_trial_{name}_seconds" for name in ("trial", "measure", "compile", "profile")}  # fmt: skip


def exposed_families() -> set[str]:
    names = set(FARM_FAMILIES)
    registry = CollectorRegistry()
    for metric in (process_metrics.API_REQUEST_SECONDS, process_metrics.COORDINATOR_STEP_SECONDS):
        registry.register(metric)
    names |= set(re.findall(r"^# TYPE (\S+) ", generate_latest(registry).decode(), re.MULTILINE))
    return names


def test_every_panel_queries_exposed_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    families = exposed_families()
    assert TIME_BUCKETS and dashboard["panels"]
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in re.findall(r"\b(kernelfarm_[a-z_]+)", target["expr"]):
                family = re.sub(r"_(bucket|count|sum)$", "", name)
                assert family in families, f"{panel['title']}: {name} is not exposed"
