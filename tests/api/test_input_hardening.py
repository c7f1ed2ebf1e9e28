"""Input a hostile or careless client sends, over HTTP to a real API process: every answer is a 4xx
with a reason, never a 500, and the kept-alive connection stays usable (issue 18, items 1 and 2)."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from kernelfarm.core.objectives import OBJECTIVES
from tests.api.conftest import client_for
from tests.conftest import RTX3090, Farm

JOB: dict[str, Any] = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 4, "parallelism": 2,
                       "strategy": "random", "seed": 1}  # fmt: skip


def exchange(farm: Farm, token: str, requests: list[tuple[str, str, bytes | None]]) -> list[tuple[int, dict, bytes]]:
    """Send ``requests`` one after the other on ONE kept-alive connection; every answer must be
    well-formed, and a server that closes the connection must have said so (Connection: close)."""
    url = urlsplit(farm.api_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    answers = []
    try:
        for method, path, body in requests:
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            answers.append((response.status, {k.lower(): v for k, v in response.getheaders()}, payload))
            if answers[-1][1].get("connection", "").lower() == "close":
                connection.close()
                connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    finally:
        connection.close()
    return answers


def body(**change: Any) -> bytes:
    return json.dumps({**JOB, **change}).encode()


BAD_BODIES = {
    "NaN budget_seconds": body(budget_trials=None).replace(b'"budget_trials": null', b'"budget_seconds": NaN'),
    "Infinity budget_seconds": body().replace(b'"seed": 1', b'"budget_seconds": Infinity'),
    "-Infinity seed": body().replace(b'"seed": 1', b'"seed": -Infinity'),
    "1e400 seed": body().replace(b'"seed": 1', b'"seed": 1e400'),
    "NaN in problem": body(problem={"size_x": 1}).replace(b'"size_x": 1', b'"size_x": NaN'),
    "1e400 in strategy_options": body(strategy_options={"x": 1}).replace(b'"x": 1', b'"x": 1e400'),
    "NaN in strategy_options": body(strategy_options={"x": 1}).replace(b'"x": 1', b'"x": NaN'),
    "NUL in strategy_options": body(strategy_options={"x": "a\x00b"}),
    "NUL in a strategy_options key": body(strategy_options={"a\x00": 1}),
    "lone surrogate in kernel": body(kernel="x").replace(b'"kernel": "x"', b'"kernel": "\\ud800"'),
    "lone surrogate in strategy_options": body(strategy_options={"x": "y"}).replace(b'"y"', b'"\\udfff"'),
    "5000-digit integer": body().replace(b'"seed": 1', b'"seed": ' + b"9" * 5000),
    "a key given twice": body().replace(b'"seed": 1', b'"seed": 1, "seed": 2'),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_hostile_job_bodies_are_4xx_and_keep_the_connection_usable(
    api_only: Farm, submit_token: str, name: str
) -> None:
    answers = exchange(api_only, submit_token, [("POST", "/v1/jobs", BAD_BODIES[name]), ("GET", "/health", None)])
    (status, headers, payload), (after, _, _) = answers
    assert 400 <= status < 500, (status, payload[:300])
    detail = json.loads(payload)["detail"]  # well-formed JSON with a reason
    assert detail
    assert headers.get("content-type", "").startswith("application/json")
    assert after == 200


@pytest.mark.parametrize(
    "query",
    [
        "/v1/jobs?kernel=%00", "/v1/jobs?owner=a%00", "/v1/jobs?gpu_model=%00x",
        "/v1/best?kernel=convolution_kernel&gpu=nvidia-geforce-rtx-3090&problem=size_x%3D%00",
        "/v1/best?kernel=%00&gpu=nvidia-geforce-rtx-3090",
        "/v1/kernels/conv%00", "/v1/jobs/%00",
    ],
)  # fmt: skip
def test_a_nul_in_any_query_or_path_is_4xx(api_only: Farm, submit_token: str, query: str) -> None:
    (status, _, payload), (after, _, _) = exchange(
        api_only, submit_token, [("GET", query, None), ("GET", "/health", None)]
    )
    assert 400 <= status < 500 and status != 401, (status, payload[:300])
    assert json.loads(payload)["detail"]
    assert after == 200


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"budget_trials": "5"}, "budget_trials"),
        ({"budget_trials": True}, "budget_trials"),
        ({"budget_seconds": "10"}, "budget_seconds"),
        ({"parallelism": "4"}, "parallelism"),
        ({"parallelism": 4.0}, "parallelism"),
        ({"seed": "7"}, "seed"),
        ({"warm_start": "yes"}, "warm_start"),
        ({"warm_start": 1}, "warm_start"),
        ({"profile_top_k": "3"}, "profile_top_k"),
        ({"strategy": ""}, "strategy"),
    ],
)
def test_job_fields_are_strictly_typed(api_only: Farm, submit_token: str, change: dict, field: str) -> None:
    with client_for(api_only, submit_token) as client:
        response = client.post("/v1/jobs", json={**JOB, **change})
    assert response.status_code == 422, response.text
    assert field in response.text


def test_a_well_typed_job_is_still_accepted(api_only: Farm, submit_token: str) -> None:
    with client_for(api_only, submit_token) as client:
        response = client.post("/v1/jobs", json={**JOB, "budget_seconds": 30, "warm_start": False})
    assert response.status_code == 201, response.text
    assert response.json()["budget_seconds"] == 30.0


def test_an_unknown_objective_is_422_naming_the_objectives_core_knows(api_only: Farm, submit_token: str) -> None:
    """One list of objectives (core/objectives.py): the API refuses what it lacks with a reason that
    names all of them, and its OpenAPI schema offers exactly them."""
    with client_for(api_only, submit_token) as client:
        response = client.post("/v1/jobs", json={**JOB, "objective": "power"})
        schema = client.get("/openapi.json").json()["components"]["schemas"]["JobCreate"]
    assert response.status_code == 422, response.text
    assert f"one of {', '.join(OBJECTIVES)}" in response.text and "'power'" in response.text
    assert schema["properties"]["objective"]["enum"] == list(OBJECTIVES)


def test_a_huge_refused_problem_value_is_not_echoed_back_whole(api_only: Farm, submit_token: str) -> None:
    """A problem parameter's refusal quotes the value, abbreviated: 100 kB sent is not 100 kB echoed."""
    huge = "x" * 100_000
    with client_for(api_only, submit_token) as client:
        response = client.post("/v1/jobs", json={**JOB, "kernel": "matmul_triton", "problem": {"dtype": huge}})
    assert response.status_code in (400, 422), response.text[:300]
    assert "problem.dtype=" in response.text and "is not one of" in response.text
    assert len(response.content) < 2_000


@pytest.mark.parametrize(
    ("strategy", "options", "reason"),
    [
        ("bayes", {"bogus": 1}, "unknown options for strategy 'bayes': ['bogus']"),
        ("bayes", {"population": 6}, "unknown options for strategy 'bayes': ['population']"),  # genetic's
        ("bayes", {"n_init": "10"}, "'n_init' must be an integer, not a string"),
        ("bayes", {"transfer": 1}, "'transfer' must be a boolean, not an integer"),
        ("bayes", {"n_init": 0}, "n_init, pool, train_max, fit_max, local_every must be positive"),
        ("bayes", {"acquisition": "ucb"}, "'acquisition' must be one of ('ei', 'lcb', 'pi')"),
        ("bayes", {"xi": 10**400}, "'xi' must be a finite number of magnitude at most 2147483647"),
        ("bayes", {"pool": 10**4000}, "'pool' must be a finite number"),  # not echoed: 4,001 digits
        # each sets what every ask computes: unbounded, one job could stall the shared coordinator
        ("bayes", {"train_max": 1025}, "'train_max' must be at most 1,024 (it sets the cost of every ask)"),
        ("bayes", {"fit_max": 100_000}, "'fit_max' must be at most 256"),
        ("bayes", {"prior_fit_max": 257}, "'prior_fit_max' must be at most 256"),
        ("bayes", {"pool": 2**31 - 1}, "'pool' must be at most 100,000"),
        ("bayes_llm", {"pool_work": 20_000_001}, "'pool_work' must be at most 20,000,000"),
        ("genetic", {"population": 1}, "'population' must be at least 2"),
        ("genetic", {"tournament": [2]}, "'tournament' must be an integer, not an array"),
        ("random", {"n_init": 4}, "unknown options for strategy 'random': ['n_init']"),
        ("bayes_llm", {"gpu_model": "nvidia-h100"}, "the farm sets it"),
        ("bayes_llm", {"llm_period_min": 8, "llm_period_max": 4}, "1 <= 'llm_period_min' <= 'llm_period_max'"),
        ("bayes_llm", {"llm_period_min": 2, "bogus": 1}, "unknown options for strategy 'bayes_llm': ['bogus']"),
        ("bayes_llm", {"bogus": 1}, "'llm_period_max', 'llm_period_min', 'local_after'"),  # the arm's are known
        ("genetic", {"population": 6, "tournament": 7}, "'tournament' must be from 1 to 'population'"),
        ("bayes", {"x" * 100_000: 1}, "['" + "x" * 64 + "...']"),  # a 100 kB name, not echoed whole
        ("bayes", {f"typo{i}": 1 for i in range(30)}, "['typo0', 'typo1', 'typo10', 'typo11', 'typo12'] and 25 more"),
    ],
)  # fmt: skip
def test_options_the_strategy_would_refuse_are_422_with_its_reason(
    api_only: Farm, submit_token: str, strategy: str, options: dict, reason: str
) -> None:
    """Before, such a job was accepted (201) and its coordinator raised at every step: the job stayed
    queued for good, and held one of its owner's active jobs."""
    with client_for(api_only, submit_token) as client:
        response = client.post("/v1/jobs", json={**JOB, "strategy": strategy, "strategy_options": options})
    assert response.status_code == 422, response.text[:300]
    assert reason in response.json()["detail"], response.text[:600]
    assert len(response.content) < 2_000


@pytest.mark.parametrize(
    ("strategy", "options"),
    [
        ("bayes", {"n_init": 5, "xi": 0.1, "transfer": False, "acquisition": "lcb"}),
        ("bayes", {"xi": 1}),  # an integer where a number is wanted
        ("bayes", {"train_max": 1024, "fit_max": 256, "prior_fit_max": 256, "pool": 100_000, "pool_work": 20_000_000}),
        ("genetic", {"population": 6, "mutation": 0.25}),
        ("bayes_llm", {"llm_period_min": 2, "llm_period_max": 8, "n_init": 6}),
    ],
)
def test_options_the_strategy_takes_are_accepted(
    api_only: Farm, submit_token: str, strategy: str, options: dict
) -> None:
    with client_for(api_only, submit_token) as client:
        response = client.post("/v1/jobs", json={**JOB, "strategy": strategy, "strategy_options": options})
        assert response.status_code == 201, response.text[:600]
        assert response.json()["strategy_options"] == options  # read back as the strategy gets them
        assert client.post(f"/v1/jobs/{response.json()['id']}/cancel").status_code == 200
