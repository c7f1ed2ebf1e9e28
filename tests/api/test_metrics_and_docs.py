"""Prometheus /metrics on a real farm (API with two uvicorn workers and the coordinator sharing a
PROMETHEUS_MULTIPROC_DIR, as `kernelfarm up` runs them), who may scrape it, and the API docs served
from local assets."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kernelfarm import launcher
from kernelfarm.services import free_port
from kernelfarm.stack import api_ready
from tests.conftest import RTX3090, Farm, make_token, wait_for

JOB = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 16, "parallelism": 4, "seed": 21,
       "strategy": "random"}  # fmt: skip
SCRAPE_TOKEN = "scrape-" + "x" * 24


@dataclass
class MetricsFarm:
    farm: Farm
    api_url: str  # two API workers, scrape token, no open network
    open_api_url: str  # one API worker, loopback may scrape without a token
    metrics_dir: Path
    reader: str  # a read-scope user token


def _start_api(farm: Farm, name: str, workers: int, **env: str) -> str:
    port = free_port()
    farm.start(name, launcher.api_argv(port, workers=workers), **env)
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: farm.check_running() and api_ready(url), 60, name)
    return url


@pytest.fixture(scope="module")
def metrics_farm(farm: Farm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsFarm]:
    directory = tmp_path_factory.mktemp("prometheus-multiproc")
    shared = {"PROMETHEUS_MULTIPROC_DIR": str(directory)}
    # The farm's coordinator, restarted with the shared directory so its step latency reaches /metrics.
    farm.stop(next(p for p in farm.processes if p.name == "coordinator"))
    farm.start("coordinator-metrics", launcher.coordinator_argv(directory.parent / "schedule"), **shared)
    # No cache of the database figures: the tests compare a scrape with the farm right after a job finished,
    # and a read cached by the previous test (default 5 s) can be younger than that job when it runs fast.
    api_url = _start_api(farm, "api-metrics", 2, KERNELFARM_METRICS_TOKEN=SCRAPE_TOKEN,
                         KERNELFARM_METRICS_CACHE_SECONDS="0", **shared)  # fmt: skip
    open_url = _start_api(farm, "api-open-metrics", 1, KERNELFARM_METRICS_OPEN_NETWORKS="127.0.0.1/32")
    yield MetricsFarm(farm, api_url, open_url, directory, make_token(farm.database_url, "read", name="metrics-reader"))


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(scraped: dict, name: str, **labels: str) -> float:
    return scraped.get((name, tuple(sorted(labels.items()))), 0.0)


def test_who_may_scrape(metrics_farm: MetricsFarm) -> None:
    url = f"{metrics_farm.api_url}/metrics"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer scrape-wrong"}).status_code == 401
    scraped = httpx.get(url, headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    assert httpx.get(url, headers={"Authorization": f"Bearer {metrics_farm.reader}"}).status_code == 200
    # From a configured network no token is needed (the tests' client is on loopback).
    assert httpx.get(f"{metrics_farm.open_api_url}/metrics").status_code == 200


def test_metrics_follow_the_farm(metrics_farm: MetricsFarm) -> None:
    headers = {"Authorization": f"Bearer {metrics_farm.reader}"}
    with httpx.Client(base_url=metrics_farm.api_url, headers=headers, timeout=30) as client:
        created = client.post("/v1/jobs", json=JOB)
        assert created.status_code == 403  # read scope cannot submit
        submitter = make_token(metrics_farm.farm.database_url, "submit", name="metrics-submitter")
        client.headers["Authorization"] = f"Bearer {submitter}"
        job = client.post("/v1/jobs", json=JOB).json()
        wait_for(lambda: client.get(f"/v1/jobs/{job['id']}").json()["state"] == "complete", 120, "the job")
        client.headers["Authorization"] = f"Bearer {metrics_farm.reader}"
        for _ in range(3):
            assert client.get(f"/v1/jobs/{job['id']}").status_code == 200
        trials = client.get("/v1/jobs", params={"limit": 500}).json()
        fleet = client.get("/v1/fleet").json()
        # Fresh connections, so both API processes serve some of them.
        for _ in range(30):
            assert httpx.get(f"{metrics_farm.api_url}/health").status_code == 200
        scraped = samples(client.get("/metrics").text)

    totals = {"complete": 0, "failed": 0}
    for item in trials["items"]:
        totals["complete"] += item["progress"]["complete"]
        totals["failed"] += item["progress"]["failed"]
    assert value(scraped, "kernelfarm_trials", state="complete", failure_kind="") == totals["complete"]
    failed = sum(
        v for (name, labels), v in scraped.items() if name == "kernelfarm_trials" and ("state", "failed") in labels
    )
    assert failed == totals["failed"]
    finished = totals["complete"] + totals["failed"]
    assert value(scraped, "kernelfarm_trial_trial_seconds_count") == finished
    assert value(scraped, "kernelfarm_trial_trial_seconds_bucket", le="+Inf") == finished
    assert value(scraped, "kernelfarm_live_workers", gpu_model=RTX3090, backend="replay") == 2
    model = next(m for m in fleet["gpu_models"] if m["gpu_model"] == RTX3090)
    assert value(scraped, "kernelfarm_queue_depth", gpu_model=RTX3090) == model["queued_trials"] == 0
    # Summed over both API processes (multiprocess mode): every /health request is counted once.
    assert value(scraped, "kernelfarm_api_request_duration_seconds_count", route="/health", method="GET",
                 status="200") == 30  # fmt: skip
    assert value(scraped, "kernelfarm_api_request_duration_seconds_count", route="/v1/jobs/{job_id}", method="GET",
                 status="200") >= 3  # fmt: skip
    assert value(scraped, "kernelfarm_api_request_duration_seconds_count", route="/v1/jobs", method="POST",
                 status="403") == 1  # fmt: skip
    assert value(scraped, "kernelfarm_coordinator_step_duration_seconds_count", outcome="ok") > 0
    assert len({re.sub(r"\D", "", p.name) for p in metrics_farm.metrics_dir.glob("*.db")}) >= 3  # 2 API + pool


def test_made_up_methods_make_no_series_of_their_own(metrics_farm: MetricsFarm) -> None:
    """HTTP lets a client send any token as its method, with no token of ours: each made a histogram
    series that lived as long as the API process (a probe grew the scrape from 33 KB to 11.5 MB)."""
    url = urlsplit(metrics_farm.open_api_url)
    methods = [f"XPROBE{i}" for i in range(20)]
    for method in methods:
        with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
            sock.sendall(f"{method} /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            assert sock.recv(65536).startswith(b"HTTP/1.1 ")
    scraped = httpx.get(f"{metrics_farm.open_api_url}/metrics").text
    assert not any(method in scraped for method in methods)
    counted = samples(scraped)
    assert value(counted, "kernelfarm_api_request_duration_seconds_count", route="unmatched", method="other",
                 status="404") >= len(methods)  # fmt: skip


def test_api_docs_use_local_assets(metrics_farm: MetricsFarm) -> None:
    for path, assets in (("/docs", ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css")),
                         ("/redoc", ("/docs-local/redoc.standalone.js",))):  # fmt: skip
        page = httpx.get(f"{metrics_farm.api_url}{path}")
        assert page.status_code == 200
        assert "cdn." not in page.text and "fonts.googleapis" not in page.text
        for asset in assets:
            assert asset in page.text
            loaded = httpx.get(f"{metrics_farm.api_url}{asset}")
            assert loaded.status_code == 200 and len(loaded.content) > 10_000
            assert b"cdn.redoc.ly" not in loaded.content
