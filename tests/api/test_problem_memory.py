"""A job's problem must fit in the memory of its GPU model (KernelSpec.device_bytes, api/jobs_service.py):
over HTTP, against a real API process, PostgreSQL and a real worker process. A problem that cannot fit is
refused with 422 naming its footprint and the limit; a problem that fits is still accepted.

The limit is the least memory the model's workers registered with (a fake worker pretending a GPU of
1 GiB here, as a cuda worker registers NVML's total), else, for a model whose memory no worker reported,
``max_problem_bytes`` (512 GiB)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.store.workers import model_memory_bytes
from tests.api.conftest import client_for
from tests.conftest import Farm, live_worker_count, wait_for

FAKE_MEMORY = 1 << 30
FAKE_MODEL = "fake-gpu-1-0-gib"  # the fake worker's GPU model: "Fake GPU 1.0 GiB"
UNREPORTED_MODEL = "nvidia-memory-probe-unreported"  # no worker has registered it


@pytest.fixture(scope="module")
def fake_worker(api_only: Farm, database_url: str) -> Iterator[str]:
    info = api_only.start("fake-1gib", launcher.worker_argv("fake-1gib", backend="fake"),
                          KERNELFARM_WORKER_FAKE_MEMORY_BYTES=str(FAKE_MEMORY))  # fmt: skip
    try:
        wait_for(lambda: api_only.check_running() and live_worker_count(database_url, FAKE_MODEL) >= 1, 90,
                 "the fake worker to register")  # fmt: skip
        yield FAKE_MODEL
    finally:
        api_only.stop(info)


def submit(farm: Farm, token: str, kernel: str, problem: dict[str, Any], gpu_model: str) -> Any:
    with client_for(farm, token) as client:
        response = client.post("/v1/jobs", json={"kernel": kernel, "problem": problem, "gpu_model": gpu_model,
                                                 "budget_trials": 4, "warm_start": False})  # fmt: skip
        if response.status_code == 201:
            client.post(f"/v1/jobs/{response.json()['id']}/cancel")
        return response


def test_the_worker_registered_its_gpus_memory(
    api_only: Farm, submit_token: str, fake_worker: str, database_url: str
) -> None:
    with session_scope(database_url) as session:
        assert model_memory_bytes(session, fake_worker) == FAKE_MEMORY
    with client_for(api_only, submit_token) as client:  # and GET /v1/workers shows it
        workers = [w for w in client.get("/v1/workers").json() if w["gpu_model"] == fake_worker]
    assert workers and all(w["memory_bytes"] == FAKE_MEMORY for w in workers), workers
    with client_for(api_only, submit_token) as client:  # and GET /v1/fleet, per worker and as the model's limit
        fleet = client.get("/v1/fleet").json()
    assert [w["memory_bytes"] for w in fleet["workers"] if w["gpu_model"] == fake_worker] == [FAKE_MEMORY]
    [model] = [m for m in fleet["gpu_models"] if m["gpu_model"] == fake_worker]
    assert model["problem_memory_limit_bytes"] == FAKE_MEMORY


def test_a_problem_larger_than_the_gpu_models_memory_is_422_naming_footprint_and_limit(
    api_only: Farm, submit_token: str, fake_worker: str
) -> None:
    # fp32 A, B, C and the reference C of 8192 x 8192, twice: 2.0 GiB
    response = submit(api_only, submit_token, "matmul_fp32", {"M": 8192, "N": 8192, "K": 8192}, fake_worker)
    assert response.status_code == 422, response.text[:500]
    detail = response.json()["detail"]
    assert "needs 2.0 GiB (2147483648 bytes) of device memory" in detail, detail
    assert f"more than the 1.0 GiB of GPU model '{fake_worker}'" in detail, detail


def test_a_problem_that_fits_the_gpu_models_memory_is_accepted(
    api_only: Farm, submit_token: str, fake_worker: str
) -> None:
    response = submit(api_only, submit_token, "matmul_fp32", {"M": 2048, "N": 2048, "K": 2048}, fake_worker)
    assert response.status_code == 201, response.text[:500]  # 128 MiB


def test_on_a_model_whose_memory_no_worker_reported_the_farms_limit_applies(api_only: Farm, submit_token: str) -> None:
    huge = {"M": 1 << 20, "N": 1 << 20, "K": 1 << 20}  # the catalogue's maxima: 4 TiB a matrix
    response = submit(api_only, submit_token, "matmul_fp32", huge, UNREPORTED_MODEL)
    assert response.status_code == 422, response.text[:500]
    detail = response.json()["detail"]
    assert "needs 32.0 TiB" in detail and "of device memory" in detail, detail
    assert "the farm's limit of 512.0 GiB for a GPU model whose memory no worker reported" in detail, detail
    # 2.0 GiB on the same model: far below the limit, accepted as before
    fits = submit(api_only, submit_token, "matmul_fp32", {"M": 8192, "N": 8192, "K": 8192}, UNREPORTED_MODEL)
    assert fits.status_code == 201, fits.text[:500]
    # a kernel known only through its recordings declares no footprint: accepted as before
    replayed = submit(api_only, submit_token, "convolution_kernel", {}, "nvidia-geforce-rtx-3090")
    assert replayed.status_code == 201, replayed.text[:500]
