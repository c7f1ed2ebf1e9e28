"""Prometheus exposition for ``/metrics``: request latency observed by a middleware, the farm's
figures read from the database at scrape time, and (multiprocess mode) the samples other processes of
this host left in PROMETHEUS_MULTIPROC_DIR (core/metrics.py says which)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kernelfarm.core.db import session_scope
from kernelfarm.core.metrics import API_REQUEST_SECONDS
from kernelfarm.core.settings import Settings
from kernelfarm.core.store import fleet as fleet_store

# Seconds per trial, per measurement, per compile and per profile share.
TIME_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


# The methods a series is kept for; any other (HTTP lets a client send any token as its method, and
# every one made a histogram series of its own, for the process's lifetime: a probe grew the scrape from
# 33 KB to 11.5 MB with 5,000 requests, no token needed) counts as "other".
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestMetrics:
    """Pure ASGI middleware: latency per route *template* (``/v1/jobs/{job_id}``, so ids do not make
    a series each), method and status. Requests that match no route count as route ``unmatched``,
    methods outside the usual ones as ``other``: no client can make series without bound."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = scope["method"] if scope["method"] in _METHODS else "other"
            API_REQUEST_SECONDS.labels(route, method, str(status)).observe(time.perf_counter() - started)


class FarmCollector(Collector):
    """Figures whose truth is the database, so every API process of every host reports the same ones.
    Read at most every ``cache_seconds`` per process: Prometheus may scrape each API replica."""

    def __init__(self, database_url: str | None, ttl_seconds: float, cache_seconds: float) -> None:
        self.database_url, self.ttl_seconds, self.cache_seconds = database_url, ttl_seconds, cache_seconds
        self._cached: tuple[float, list[Metric]] | None = None
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] >= self.cache_seconds:
                self._cached = (now, list(self._read()))
            yield from self._cached[1]

    def _read(self) -> Iterable[Metric]:
        with session_scope(self.database_url) as session:
            figures = fleet_store.farm_figures(session, self.ttl_seconds, TIME_BUCKETS)
        summary = figures.summary

        trials = GaugeMetricFamily("kernelfarm_trials", "Trials by state and failure kind ('' unless failed)",
                                   labels=["state", "failure_kind"])  # fmt: skip
        for (state, kind), count in sorted(summary.counts.items()):
            trials.add_metric([state, kind], count)
        yield trials

        queued = GaugeMetricFamily("kernelfarm_queue_depth", "Trials queued for a worker, per GPU model",
                                   labels=["gpu_model"])  # fmt: skip
        running = GaugeMetricFamily("kernelfarm_running_trials", "Trials being measured, per GPU model",
                                    labels=["gpu_model"])  # fmt: skip
        waiting = GaugeMetricFamily("kernelfarm_waiting_jobs", "Jobs waiting for their first dispatch, per GPU model",
                                    labels=["gpu_model"])  # fmt: skip
        for model, load in sorted(summary.loads.items()):
            queued.add_metric([model], load.queued_trials)
            running.add_metric([model], load.running_trials)
            waiting.add_metric([model], load.waiting_jobs)
        yield from (queued, running, waiting)

        live_family = GaugeMetricFamily("kernelfarm_live_workers", "Workers with a fresh heartbeat",
                                        labels=["gpu_model", "backend"])  # fmt: skip
        busy_family = GaugeMetricFamily("kernelfarm_busy_workers", "Live workers measuring a trial now",
                                        labels=["gpu_model"])  # fmt: skip
        for (model, backend), count in sorted(figures.live.items()):
            live_family.add_metric([model, backend], count)
        for model, count in sorted(figures.busy.items()):
            busy_family.add_metric([model], count)
        yield from (live_family, busy_family)

        helps = {
            "trial": "Seconds from a trial's claim to its result",
            "measure": "Seconds the measuring child spent on a trial (compile wait, verify, timing)",
            "compile": "Seconds NVRTC spent compiling a trial's kernel",
            "profile": "Seconds of Nsight Compute per profiled trial (its share of the batch)",
        }
        for name, distribution in figures.distributions.items():
            family = HistogramMetricFamily(f"kernelfarm_trial_{name}_seconds", helps[name])
            buckets = [(repr(b), c) for b, c in zip(distribution.bounds, distribution.counts, strict=True)]
            buckets.append(("+Inf", distribution.count))
            family.add_metric([], buckets, distribution.total)
            yield family


class MetricsExposition:
    """What ``/metrics`` answers: this process's (or this host's, multiprocess) samples, then the farm's."""

    def __init__(self, settings: Settings) -> None:
        if settings.prometheus_multiproc_dir is not None:
            self.process_registry = CollectorRegistry()
            MultiProcessCollector(self.process_registry, path=str(settings.prometheus_multiproc_dir))
        else:
            self.process_registry = REGISTRY
        self.farm_registry = CollectorRegistry(auto_describe=False)
        self.farm_registry.register(
            FarmCollector(settings.database_url, settings.worker_ttl_seconds, settings.metrics_cache_seconds)
        )

    def render(self) -> bytes:
        return generate_latest(self.process_registry) + generate_latest(self.farm_registry)
