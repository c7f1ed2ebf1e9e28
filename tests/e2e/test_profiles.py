"""Deferred, batched profiling: a job asks for profiles in batches and completes only once they
are answered. Replay workers have no profiler, so each answer is an error that says so; the flow
(request → batch task on the GPU queue → one row per trial → job completes) is what is tested."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import RTX3090, Farm, wait_for


def finished_job(farm: Farm, token: str, **extra: object) -> tuple[dict, list[dict]]:
    client = httpx.Client(base_url=farm.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    body = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 20, "parallelism": 4,
            "seed": 21, **extra}  # fmt: skip
    job_id = client.post("/v1/jobs", json=body).json()["id"]
    job = wait_for(lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["state"] == "complete" and j, 120, "job")
    trials = client.get(f"/v1/jobs/{job_id}/trials", params={"limit": 100, "order": "time"}).json()["items"]
    return job, trials


@pytest.mark.parametrize("mode", ["all", "top_k", "none"])
def test_profile_modes(farm: Farm, admin_token: str, mode: str) -> None:
    _, trials = finished_job(farm, admin_token, profile=mode, profile_top_k=3)
    completed = [t for t in trials if t["state"] == "complete"]
    profiled = [t for t in trials if t["profile"] is not None]
    if mode == "all":
        assert {t["id"] for t in profiled} == {t["id"] for t in completed}
    elif mode == "top_k":
        assert [t["id"] for t in profiled] == [t["id"] for t in completed[:3]]  # the 3 fastest
        # Split across the farm's two live workers (batches of 2 and 1), not one batch of 3.
        assert max(t["profile"]["batch_size"] for t in profiled) == 2
    else:
        assert profiled == []
    for trial in profiled:
        assert trial["profile"]["profiled_at"] is not None
        assert "no profiler" in trial["profile"]["error"]  # replay says it has none
        assert trial["profile"]["batch_size"] <= 8
    assert all(t["state"] != "failed" or t["profile"] is None for t in trials)  # failed configs: nothing to profile
