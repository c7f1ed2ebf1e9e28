"""What an outside tester found submitting jobs over HTTP, on real processes: options the bayes strategy
took and turned against the job, an owner's job quota that concurrent submissions went past, and a bayes
job that ended "space exhausted" with one config of its space never measured."""

from __future__ import annotations

import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kernelfarm.core.db import session_scope
from tests.api.conftest import client_for
from tests.conftest import RTX3090, Farm, make_token, wait_for

JOB: dict[str, Any] = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 4, "parallelism": 2,
                       "strategy": "random", "seed": 1}  # fmt: skip
# Eight valid configs of the recorded convolution landscape (two parameters left free of four).
EIGHT = {"block_size_x": [32], "block_size_y": [4], "tile_size_x": [1], "tile_size_y": [1, 2]}


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        # p_ok ** -5 ranks the configs likeliest to fail first: such a job failed 19 of its 25 trials
        ({"feasibility_power": -5.0}, "'feasibility_power' must not be negative"),
        ({"feasibility_power": -1}, "'feasibility_power' must not be negative"),
        ({"pool_work": -5}, "'pool_work' must be positive"),
        ({"pool_work": 0}, "'pool_work' must be positive"),
    ],
)
def test_bayes_options_that_turn_the_search_around_are_422(
    api_only: Farm, submit_token: str, options: dict[str, Any], reason: str
) -> None:
    with client_for(api_only, submit_token) as client:
        for strategy in ("bayes", "bayes_llm"):
            response = client.post("/v1/jobs", json={**JOB, "strategy": strategy, "strategy_options": options})
            assert response.status_code == 422, response.text[:300]
            assert reason in response.json()["detail"], response.text[:300]


def test_bayes_feasibility_power_zero_is_still_accepted(api_only: Farm, submit_token: str) -> None:
    with client_for(api_only, submit_token) as client:
        response = client.post("/v1/jobs", json={**JOB, "strategy": "bayes", "strategy_options": {
            "feasibility_power": 0, "pool_work": 1}})  # fmt: skip
        assert response.status_code == 201, response.text[:300]
        client.post(f"/v1/jobs/{response.json()['id']}/cancel")


def test_concurrent_submissions_of_one_owner_stay_within_its_quota(api_only: Farm, database_url: str) -> None:
    """40 requests at once from an owner with no unfinished job and a limit of 20: 20 accepted, the
    others 409 with the reason. Before, every request counted the owner's jobs before any of them
    committed, and 28 of 40 were accepted (the API has no worker here: the jobs stay queued)."""
    token = make_token(database_url, "submit", name="probe-fan-out")
    with client_for(api_only, token) as client:

        def submit(_: int) -> tuple[int, str]:
            response = client.post("/v1/jobs", json=JOB)
            return response.status_code, response.text

        with ThreadPoolExecutor(40) as pool:
            answers = list(pool.map(submit, range(40)))
        statuses = Counter(status for status, _ in answers)
        try:
            assert statuses == {201: 20, 409: 20}, answers[:3]
            refusal = next(text for status, text in answers if status == 409)
            assert "unfinished jobs (the limit is 20)" in refusal
            listed = client.get("/v1/jobs", params={"owner": "probe-fan-out", "state": "queued"}).json()
            assert listed["total"] == 20
        finally:
            for item in client.get("/v1/jobs", params={"owner": "probe-fan-out", "limit": 100}).json()["items"]:
                client.post(f"/v1/jobs/{item['id']}/cancel")


def test_a_bayes_job_measures_every_config_of_a_small_space(farm: Farm, admin_token: str) -> None:
    """One trial at a time with the model on after its first (n_init 1), over a restriction of 8 valid
    configs. Before, the job ended "complete (space exhausted): 7 complete" with the config in the first
    row of the candidate table never measured: bayes's model never proposed that row. The seed is the
    probe's, whose design did not pick that row either."""
    body = {**JOB, "strategy": "bayes", "strategy_options": {"n_init": 1}, "space": {"parameters": EIGHT},
            "budget_trials": 100, "parallelism": 1, "seed": 1721219650, "warm_start": False}  # fmt: skip
    with client_for(farm, admin_token) as client:
        created = client.post("/v1/jobs", json=body)
        assert created.status_code == 201, created.text[:300]
        job_id = created.json()["id"]
        ended = ("complete", "failed", "cancelled")
        job = wait_for(lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["state"] in ended and j, 180, "its end")
    assert job["state"] == "complete", job["status_message"]
    assert job["progress"]["total"] == 8 and job["progress"]["complete"] == 8, job["status_message"]
    assert job["status_message"].startswith("complete (space exhausted): 8 complete"), job["status_message"]


def test_an_idempotent_retry_may_send_its_objects_keys_in_another_order(api_only: Farm, submit_token: str) -> None:
    """JSON gives an object's key order no meaning: a retry that re-serialized its body was refused (409,
    "already used for a different request"). A different value under the key still is."""
    first = {**JOB, "strategy": "bayes", "strategy_options": {"n_init": 4, "xi": 0.1},
             "problem": {"size_x": 4096, "size_y": 4096}}  # fmt: skip
    again = {**JOB, "strategy": "bayes", "strategy_options": {"xi": 0.1, "n_init": 4},
             "problem": {"size_y": 4096, "size_x": 4096}}  # fmt: skip
    headers = {"Idempotency-Key": "probe-key-order"}
    with client_for(api_only, submit_token) as client:
        created = client.post("/v1/jobs", json=first, headers=headers)
        assert created.status_code == 201, created.text[:300]
        try:
            retried = client.post("/v1/jobs", json=again, headers=headers)
            assert retried.status_code == 200, retried.text[:300]
            assert retried.json()["id"] == created.json()["id"]
            other = client.post(
                "/v1/jobs", json={**again, "strategy_options": {"xi": 0.2, "n_init": 4}}, headers=headers
            )
            assert other.status_code == 409 and "different request" in other.json()["detail"], other.text[:300]
        finally:
            client.post(f"/v1/jobs/{created.json()['id']}/cancel")


def test_a_key_stored_with_the_former_digest_still_answers_its_retry(
    api_only: Farm, submit_token: str, database_url: str
) -> None:
    """Keys stored before the digest was canonical hold the digest of the body as parsed: a retry of
    such a request across the upgrade gets its job (200), not a 409, and another body still a 409."""
    import hashlib

    from kernelfarm.api.schemas import JobCreate
    from kernelfarm.core.store import idempotency

    body = {**JOB, "strategy_options": {}, "seed": 7}
    with client_for(api_only, submit_token) as client:
        created = client.post("/v1/jobs", json=body)
        assert created.status_code == 201, created.text[:300]
        job_id = created.json()["id"]
        legacy = hashlib.sha256(JobCreate.model_validate(body).model_dump_json().encode()).hexdigest()
        with session_scope(database_url) as session:
            idempotency.claim_key(session, "api-submitter", "probe-legacy", uuid.UUID(job_id), legacy)
        try:
            retried = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "probe-legacy"})
            assert retried.status_code == 200 and retried.json()["id"] == job_id, retried.text[:300]
            other = client.post("/v1/jobs", json={**body, "seed": 8}, headers={"Idempotency-Key": "probe-legacy"})
            assert other.status_code == 409, other.text[:300]
        finally:
            client.post(f"/v1/jobs/{job_id}/cancel")
