"""Jobs the farm cannot do (issue 18, item 6), on a farm of its own over HTTP: refused at submission
when no registered backend of the GPU model can run the kernel, failed with a reason when no worker of
the model shows up in time, and failed when no trial succeeded."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.landscape import load_landscape
from kernelfarm.core.models import Job
from kernelfarm.kernels.registry import get_kernel
from tests.conftest import (
    CONVOLUTION,
    RTX3090,
    Farm,
    _reset_between_farms,
    live_worker_count,
    make_token,
    store_job,
    wait_for,
)

NO_WORKER_TIMEOUT = 4


@pytest.fixture(scope="module")
def small_farm(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("impossible"))
    try:
        farm.start_api()
        farm.start("coordinator", launcher.coordinator_argv(farm.directory / "schedule"),
                   KERNELFARM_NO_WORKER_TIMEOUT_SECONDS=str(NO_WORKER_TIMEOUT))  # fmt: skip
        farm.start_worker("replay-impossible")
        wait_for(lambda: farm.check_running() and live_worker_count(database_url, RTX3090) >= 1, 60, "a live worker")
        yield farm
    finally:
        farm.stop_all()
        _reset_between_farms(database_url, redis_url)


@pytest.fixture(scope="module")
def client(small_farm: Farm, database_url: str) -> httpx.Client:
    token = make_token(database_url, "submit", name="impossible")
    return httpx.Client(base_url=small_farm.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def finished(client: httpx.Client, job_id: str, seconds: float) -> dict:
    return wait_for(
        lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["state"] in ("complete", "failed", "cancelled") and j,
        seconds,
        "the job to end",
    )


def test_a_kernel_no_worker_of_the_model_can_run_is_refused(client: httpx.Client) -> None:
    # image_convolution has only a CUDA implementation; the RTX 3090 is served by replay workers.
    response = client.post("/v1/jobs", json={"kernel": "image_convolution", "gpu_model": RTX3090, "budget_trials": 4})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "no worker of GPU model" in detail and "replay" in detail and "cuda" in detail


def test_a_job_for_a_model_nobody_serves_fails_with_a_reason(client: httpx.Client) -> None:
    body = {"kernel": "image_convolution", "gpu_model": "nvidia-test-gpu-nobody-serves", "budget_trials": 4}
    created = client.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    started = time.monotonic()
    job = finished(client, created.json()["id"], NO_WORKER_TIMEOUT + 20)
    assert job["state"] == "failed"
    assert "no live worker" in job["status_message"] and "no_worker_timeout_seconds" in job["status_message"]
    assert time.monotonic() - started >= NO_WORKER_TIMEOUT - 1


def test_a_job_with_no_successful_trial_fails(client: httpx.Client) -> None:
    landscape = load_landscape(CONVOLUTION)
    space = get_kernel("convolution_kernel").space
    failed_keys = [k for k, entry in landscape.entries.items() if entry.failure is not None]
    config = space.config_from_key(failed_keys[0])
    restriction = {"parameters": {name: [value] for name, value in config.items()}}
    body = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 1, "space": restriction,
            "profile": "none"}  # fmt: skip
    created = client.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job = finished(client, created.json()["id"], 60)
    assert job["progress"]["failed"] == 1 and job["progress"]["complete"] == 0
    assert job["state"] == "failed" and "no config succeeded" in job["status_message"]


def test_a_job_whose_step_keeps_raising_fails_saying_why(client: httpx.Client, database_url: str) -> None:
    """A stored job the coordinator cannot step (a space restriction whose values are not a list, which
    the API refuses and a row of an older version could hold) was stepped every tick, forever."""
    with session_scope(database_url) as session:
        job = store_job(session, "convolution_kernel", RTX3090, space={"parameters": {"block_size_x": 16}})
        job_id = str(job.id)
    # Housekeeping steps it every tick (1 s here): five failing steps, then it fails.
    answer = finished(client, job_id, 60)
    assert answer["state"] == "failed", answer
    assert "raised 5 times in a row (TypeError:" in answer["status_message"], answer["status_message"]
    with session_scope(database_url) as session:
        assert session.get_one(Job, job.id).step_failures == 5
