"""No job starves another on a GPU model (issue 18, item 5), on a farm of its own over HTTP: a
20-trial job submitted beside a `budget_seconds: 3600, parallelism: 8` job on the same GPU model
finishes promptly (it waited 40 s "queued: waiting for the coordinator"), owners have a quota of
unfinished jobs, and a job's status message agrees with its progress counts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import RTX3090, Farm, _reset_between_farms, live_worker_count, make_token, wait_for

QUOTA = 3


@pytest.fixture(scope="module")
def busy_farm(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("fair-share"))
    try:
        farm.start_api()
        farm.start_coordinator()
        for name in ("replay-fair-a", "replay-fair-b"):
            farm.start_worker(name, sleep_ms=5)  # a measured trial takes some time, as on a GPU
        wait_for(lambda: farm.check_running() and live_worker_count(database_url, RTX3090) >= 2, 60, "workers")
        yield farm
    finally:
        farm.stop_all()
        _reset_between_farms(database_url, redis_url)


def client_of(farm: Farm, token: str) -> httpx.Client:
    return httpx.Client(base_url=farm.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_a_small_job_beside_a_long_wide_one_finishes_promptly(busy_farm: Farm, database_url: str) -> None:
    big_owner = client_of(busy_farm, make_token(database_url, "submit", name="fair-big"))
    small_owner = client_of(busy_farm, make_token(database_url, "submit", name="fair-small"))
    big = big_owner.post("/v1/jobs", json={"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_seconds": 3600,
                                           "parallelism": 8, "profile": "none"}).json()  # fmt: skip
    try:
        wait_for(lambda: big_owner.get(f"/v1/jobs/{big['id']}").json()["progress"]["complete"] >= 40, 90,
                 "the big job to be well under way")  # fmt: skip
        small = small_owner.post("/v1/jobs", json={"kernel": "cn_pnpoly", "gpu_model": RTX3090, "budget_trials": 20,
                                                   "profile": "none"}).json()  # fmt: skip
        started = time.monotonic()
        done = wait_for(
            lambda: (j := small_owner.get(f"/v1/jobs/{small['id']}").json())["state"] in ("complete", "failed") and j,
            90, "the small job to finish",
        )  # fmt: skip
        elapsed = time.monotonic() - started
        assert done["state"] == "complete" and done["progress"]["total"] == 20, done
        assert elapsed < 15, f"the 20-trial job took {elapsed:.1f} s beside the big one"
        assert big_owner.get(f"/v1/jobs/{big['id']}").json()["state"] == "running"  # it kept its share too
    finally:
        big_owner.post(f"/v1/jobs/{big['id']}/cancel")


def test_status_message_agrees_with_progress(busy_farm: Farm, database_url: str) -> None:
    client = client_of(busy_farm, make_token(database_url, "submit", name="fair-status"))
    job = client.post("/v1/jobs", json={"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 400,
                                        "parallelism": 4, "profile": "none", "strategy": "random"}).json()  # fmt: skip
    try:
        for _ in range(20):
            seen = client.get(f"/v1/jobs/{job['id']}").json()
            progress = seen["progress"]
            if seen["state"] == "running":
                message = seen["status_message"]
                in_flight = progress["queued"] + progress["running"]
                assert f"{progress['total']}/400 trials proposed" in message, (message, progress)
                assert f"{in_flight} in flight" in message and f"{progress['complete']} complete" in message
            time.sleep(0.1)
    finally:
        client.post(f"/v1/jobs/{job['id']}/cancel")


def test_an_owner_has_a_quota_of_unfinished_jobs(busy_farm: Farm, database_url: str) -> None:
    # The farm's default quota is larger; this test asks for QUOTA + 1 waiting jobs on a model nobody serves.
    client = client_of(busy_farm, make_token(database_url, "submit", name="fair-quota"))
    body = {"kernel": "image_convolution", "gpu_model": "nvidia-test-quota-model", "budget_trials": 2}
    made = []
    try:
        for _ in range(50):
            answer = client.post("/v1/jobs", json=body)
            if answer.status_code != 201:
                break
            made.append(answer.json()["id"])
        assert answer.status_code == 409, answer.text
        assert "unfinished jobs" in answer.json()["detail"]
        assert len(made) == 20  # Settings.max_active_jobs_per_owner
    finally:
        for job_id in made:
            client.post(f"/v1/jobs/{job_id}/cancel")
    assert client.post("/v1/jobs", json=body).status_code == 201  # room again once they are cancelled
