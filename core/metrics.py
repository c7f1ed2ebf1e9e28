"""Metrics observed inside the farm's processes (Prometheus, via prometheus-client).

Counts that live in the database (trials by state, queue depth, workers, time distributions) are read
from it at scrape time by the API (api/metrics.py); only what exists nowhere but in a process is
observed here: API request latency and the coordinator's step latency.

Several processes of one host (uvicorn workers, the coordinator's pool) share one set of figures through
prometheus-client's multiprocess mode: every process that has PROMETHEUS_MULTIPROC_DIR in its environment
when prometheus-client is first imported writes its samples as files there, and the API's /metrics sums
them. Without it each process keeps its own figures in memory.
"""

from __future__ import annotations

from prometheus_client import Histogram

# Seconds; from a cached best-config answer (~1 ms) to a slow page of trials.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Seconds; a coordinator step is dominated by the strategy's fit (a GP: tens of ms to seconds).
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

API_REQUEST_SECONDS = Histogram(
    "kernelfarm_api_request_duration_seconds",
    "API request latency by route template, method and status code",
    ["route", "method", "status"],
    buckets=REQUEST_BUCKETS,
)
COORDINATOR_STEP_SECONDS = Histogram(
    "kernelfarm_coordinator_step_duration_seconds",
    "Coordinator step latency (tuner.advance: history, strategy, ask, dispatch) by outcome",
    ["outcome"],
    buckets=STEP_BUCKETS,
)
