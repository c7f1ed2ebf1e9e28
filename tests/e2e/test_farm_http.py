"""The whole farm over HTTP: real API, coordinator, Celery workers, Redis and PostgreSQL."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import RTX3090, Farm, make_token, wait_for

JOB = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 24, "parallelism": 4, "seed": 3}


def api(farm: Farm, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=farm.api_url, headers=headers, timeout=30)


def run_job(client: httpx.Client, body: dict) -> dict:
    created = client.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    return wait_for(
        lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["state"] in ("complete", "failed") and j,
        120,
        "the job to finish",
    )


def test_submit_poll_and_best_config_match(farm: Farm, admin_token: str) -> None:
    client = api(farm, admin_token)
    job = run_job(client, JOB)
    assert job["state"] == "complete", job["status_message"]
    assert job["progress"]["total"] == 24
    assert job["progress"]["complete"] + job["progress"]["failed"] == 24
    trials = client.get(f"/v1/jobs/{job['id']}/trials", params={"limit": 100}).json()["items"]
    assert len(trials) == 24
    assert len({t["config_key"] for t in trials}) == 24  # no config measured twice
    completed = [t for t in trials if t["state"] == "complete"]
    fastest = min(completed, key=lambda t: t["time_ms"])
    assert job["best"]["trial_id"] == fastest["id"]
    assert all(t["provenance"]["backend"] == "replay" for t in trials)  # replay says so

    best = client.get("/v1/best", params={"kernel": "convolution_kernel", "gpu": RTX3090}).json()
    assert best["match"] == "exact"
    # the lookup spans all jobs; this job's best can only be matched or beaten
    assert best["time_ms"] <= fastest["time_ms"]
    best_by_name = client.get(
        "/v1/best",
        params={"kernel": "convolution_kernel", "gpu": "NVIDIA GeForce RTX 3090",
                "problem": ["size_x=4096", "size_y=4096"]},
    )  # fmt: skip
    assert best_by_name.status_code == 200 and best_by_name.json()["trial_id"] == best["trial_id"]


def test_best_falls_back_to_nearest_problem_and_says_so(farm: Farm, admin_token: str) -> None:
    client = api(farm, admin_token)
    run_job(client, {**JOB, "budget_trials": 8})
    response = client.get(
        "/v1/best", params={"kernel": "convolution_kernel", "gpu": RTX3090, "problem": ["size_x=2048"]}
    )
    # replay-only kernel, problem never recorded: the documented fallback answers with the nearest
    # recorded problem on the same GPU model, and says so
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["match"] == "nearest_problem"
    assert answer["problem"] == {"size_x": 2048, "size_y": 4096}
    assert answer["matched_problem"] == {"size_x": 4096, "size_y": 4096}
    assert answer["matched_gpu_model"] == RTX3090
    missing = client.get("/v1/best", params={"kernel": "convolution_kernel", "gpu": "nvidia-h100-80gb-hbm3"})
    assert missing.status_code == 404 and "no verified measurement" in missing.json()["detail"]


def test_tokens_and_scopes(farm: Farm, database_url: str) -> None:
    read_only = make_token(database_url, "read", name="reader")
    assert api(farm, None).get("/v1/jobs").status_code == 401
    assert api(farm, "kf_not-a-real-token").get("/v1/jobs").status_code == 401
    assert api(farm, read_only).get("/v1/jobs").status_code == 200
    denied = api(farm, read_only).post("/v1/jobs", json=JOB)
    assert denied.status_code == 403 and "submit" in denied.json()["detail"]
    assert api(farm, None).get("/health").status_code == 200  # health needs no token


@pytest.mark.parametrize(
    ("change", "status", "reason"),
    [
        ({"kernel": "no_such_kernel"}, 422, "unknown kernel"),
        ({"budget_trials": 0}, 422, "budget_trials"),
        ({"budget_trials": -5}, 422, "budget_trials"),
        ({"budget_trials": "many"}, 422, "budget_trials"),
        ({"parallelism": "four"}, 422, "parallelism"),
        ({"problem": {"size_x": "big"}}, 422, "size_x"),
        ({"strategy": "astrology"}, 422, "unknown strategy"),
        ({"space": {"parameters": {"block_size_x": [3]}}}, 422, "not in"),
        ({"space": {"constraints": ["block_size_x > 100000"]}}, 422, "no config satisfies 'block_size_x > 100000'"),
        (
            {"space": {"constraints": ["block_size_x % (block_size_y - block_size_y) == 0"]}},
            422,
            "divides by zero in every config",
        ),
        (
            {"space": {"constraints": ["block_size_x > 64", "block_size_x < 64"]}},
            422,
            "together they leave none",
        ),
        ({"space": {"constraints": ["__import__('os')"]}}, 422, "may be called"),
        ({"gpu_model": "nvidia-h100"}, 422, "replay-only"),
        ({"surprise": 1}, 422, "surprise"),
    ],
)
def test_bad_job_requests_get_4xx_with_a_reason(
    farm: Farm, admin_token: str, change: dict, status: int, reason: str
) -> None:
    client = api(farm, admin_token)
    before = client.get("/v1/jobs").json()["total"]
    response = client.post("/v1/jobs", json={**JOB, **change})
    assert response.status_code == status, response.text
    assert reason in str(response.json()["detail"])
    assert client.get("/v1/jobs").json()["total"] == before  # nothing stored


def test_budget_missing_and_body_too_large(farm: Farm, admin_token: str) -> None:
    client = api(farm, admin_token)
    body = {k: v for k, v in JOB.items() if k != "budget_trials"}
    assert client.post("/v1/jobs", json=body).status_code == 422
    huge = client.post("/v1/jobs", content=b"{" + b" " * 400_000 + b"}", headers={"content-type": "application/json"})
    assert huge.status_code == 413


@pytest.mark.parametrize("name", ["kernel", "gpu_model", "owner"])
def test_a_nul_in_a_job_filter_is_a_422_not_a_500(farm: Farm, admin_token: str, name: str) -> None:
    with api(farm, admin_token) as client:
        answer = client.get("/v1/jobs", params={name: "conv\x00olution"})
        assert answer.status_code == 422, answer.text
        assert name in answer.text
        assert client.get("/v1/jobs", params={name: "no-such-value"}).json()["items"] == []


def test_unknown_ids_are_404(farm: Farm, admin_token: str) -> None:
    client = api(farm, admin_token)
    assert client.get("/v1/jobs/00000000-0000-0000-0000-000000000000").status_code == 404
    assert client.get("/v1/jobs/not-a-uuid").status_code == 422
    assert client.post("/v1/jobs/00000000-0000-0000-0000-000000000000/cancel").status_code == 404
    assert client.get("/v1/kernels/nope").status_code == 404


def test_cancel_is_idempotent_and_stops_dispatch(farm: Farm, admin_token: str) -> None:
    client = api(farm, admin_token)
    job = client.post("/v1/jobs", json={**JOB, "budget_trials": 5000, "parallelism": 2}).json()
    first = client.post(f"/v1/jobs/{job['id']}/cancel").json()
    second = client.post(f"/v1/jobs/{job['id']}/cancel").json()
    assert first["state"] == second["state"] == "cancelled"
    total = second["progress"]["total"]
    time.sleep(2.5)  # a couple of housekeeping rounds: nothing new may be proposed
    after = client.get(f"/v1/jobs/{job['id']}").json()
    assert after["state"] == "cancelled" and after["progress"]["total"] == total
    assert after["progress"]["queued"] == after["progress"]["running"] == 0


def test_a_spent_time_budget_cancels_the_trials_no_worker_started(farm: Farm, admin_token: str) -> None:
    # The first step queues parallelism x (1 + dispatch_lookahead) = 512 trials; the budget is spent
    # before the second. They were all measured ("draining"), for seconds past a 0.001 s budget. Now
    # those not started when the first result is in are cancelled.
    client = api(farm, admin_token)
    job = run_job(client, {**JOB, "budget_trials": 5000, "budget_seconds": 0.001, "parallelism": 256})
    assert job["state"] == "complete" and "time budget spent" in job["status_message"], job["status_message"]
    progress = job["progress"]
    measured = progress["complete"] + progress["failed"]
    assert progress["total"] == 512 and progress["cancelled"] == 512 - measured
    assert 0 < measured < 256  # far fewer than were queued (slack for a loaded machine)
    trials = client.get(f"/v1/jobs/{job['id']}/trials", params={"state": "complete", "order": "time", "limit": 1})
    assert job["best"]["trial_id"] == trials.json()["items"][0]["id"]


def test_an_energy_job_without_a_meter_cancels_the_trials_no_worker_started(farm: Farm, admin_token: str) -> None:
    # Replay workers have no energy meter: the job fails after its first complete trials. It measured all
    # 512 trials its first step queued before it did ("no energy reading in 387 complete trials").
    client = api(farm, admin_token)
    job = run_job(client, {**JOB, "budget_trials": 5000, "parallelism": 256, "objective": "energy"})
    assert job["state"] == "failed" and "no energy reading in" in job["status_message"], job["status_message"]
    progress = job["progress"]
    measured = progress["complete"] + progress["failed"]
    assert progress["cancelled"] == progress["total"] - measured and 0 < measured < 256, progress


def test_listing_kernels_workers_and_jobs(farm: Farm, admin_token: str) -> None:
    client = api(farm, admin_token)
    kernels = {k["name"]: k for k in client.get("/v1/kernels").json()}
    assert kernels["convolution_kernel"]["valid_configs_default_problem"] == 6768
    assert "block_size_x" in kernels["convolution_kernel"]["parameters"]
    workers = client.get("/v1/workers").json()
    assert {w["gpu_model"] for w in workers} == {RTX3090}
    assert all(w["backend"] == "replay" for w in workers)
    models = client.get("/v1/gpu-models").json()
    assert models[0]["live_workers"] >= 2
    page = client.get("/v1/jobs", params={"limit": 1, "offset": 0}).json()
    assert len(page["items"]) == 1 and page["total"] >= 1
    assert client.get("/v1/jobs", params={"state": "bogus"}).status_code == 422
    assert client.get("/v1/jobs", params={"limit": 0}).status_code == 422
