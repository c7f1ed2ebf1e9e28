"""The fleet and workers surface probed as an outsider would, and what a GPU worker does with messages
it should not run (worker/tasks.py, worker/runner.py): against the shared farm (API, coordinator and two
replay workers of the RTX 3090 recordings), with real Celery messages sent to the workers' queue.

- Hostile query parameters on /v1/fleet, /v1/workers and /v1/gpu-models are refused with 422, never a 500,
  and no token scope gets a route that changes a worker.
- A malformed message (a trial id that is a string, a float, a bool, a list; missing or extra arguments; a
  profile batch of no job) was run anyway: a psycopg error with its traceback in the worker's log, or, for
  ``"20"`` and ``20.0``, the claim of trial 20 (PostgreSQL casts them). It is now refused with one line
  that says why, and the worker goes on serving jobs.
- A trial of another GPU model sent to a worker's queue was measured there: the RTX 3090's replayed
  timing was stored as the H100 job's trial and served by /v1/best as the H100's exact best config. It is
  now refused before any claim and stays queued for its own workers.
- /ready answered 500 when the embedded stack's health file held JSON of another shape than the
  supervisor writes (a list, an entry without ``exits``); such a file is now ignored, as an unreadable
  one was.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kernelfarm import launcher
from kernelfarm.core.celery_app import EVALUATE_TASK, PROFILE_TASK, make_celery
from kernelfarm.core.db import session_scope
from kernelfarm.core.gpu import queue_for
from kernelfarm.core.landscape import load_landscape
from kernelfarm.core.models import Trial
from kernelfarm.core.settings import Settings
from kernelfarm.core.space import Config
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.services import free_port
from kernelfarm.stack import api_ready
from kernelfarm.worker import runner
from tests.conftest import CONVOLUTION, RTX3090, Farm, make_token, store_job, wait_for

QUEUE = queue_for(RTX3090)
WORKERS = ("replay-a", "replay-b")
OTHER_MODEL = "nvidia-h100-80gb-hbm3"


@pytest.fixture(scope="module")
def read_client(farm: Farm) -> Iterator[httpx.Client]:
    token = make_token(farm.database_url, "read", name="fleet-probe-reader")
    with httpx.Client(base_url=farm.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        yield client


@pytest.mark.parametrize(
    "path",
    [
        "/v1/fleet?failures=-1", "/v1/fleet?failures=201", "/v1/fleet?failures=NaN", "/v1/fleet?failures=1e3",
        "/v1/fleet?failures=99999999999999999999999", "/v1/fleet?failures=%00", "/v1/fleet?failures=%ED%A0%80",
        "/v1/fleet?failures=", "/v1/workers?all=%00", "/v1/workers?all=NaN", "/v1/workers?all=%ED%A0%80",
    ],
)  # fmt: skip
def test_hostile_query_parameters_are_refused_with_the_reason(read_client: httpx.Client, path: str) -> None:
    response = read_client.get(path)
    assert response.status_code == 422, response.text
    assert isinstance(response.json()["detail"], list)


def test_a_read_token_reads_the_fleet_and_can_change_no_worker(read_client: httpx.Client) -> None:
    for path in ("/v1/fleet", "/v1/workers", "/v1/workers?all=true", "/v1/gpu-models"):
        assert read_client.get(path).status_code == 200, path
    for method, path in (("POST", "/v1/fleet"), ("DELETE", "/v1/workers"), ("POST", "/v1/workers"),
                         ("PUT", "/v1/gpu-models")):  # fmt: skip
        assert read_client.request(method, path).status_code == 405, (method, path)


def _worker_logs(farm: Farm) -> dict[str, str]:
    return {name: farm.log(name) for name in WORKERS}


def _since(farm: Farm, before: dict[str, str]) -> str:
    return "".join(farm.log(name)[len(before[name]) :] for name in WORKERS)


def _send(farm: Farm, messages: list[tuple[str, list[object] | None, dict[str, object] | None]]) -> None:
    app = make_celery(Settings(database_url=farm.database_url, redis_url=farm.redis_url))
    try:
        for task, args, kwargs in messages:
            app.send_task(task, args=args, kwargs=kwargs, queue=QUEUE)
    finally:
        app.close()


def _recorded_config() -> Config:
    landscape = load_landscape(CONVOLUTION)
    key = sorted(k for k, e in landscape.entries.items() if e.failure is None)[0]
    return dict(get_kernel("convolution_kernel").space.config_from_key(key))


def _queued_trial(database_url: str, gpu_model: str) -> tuple[uuid.UUID, int]:
    """A job of ``gpu_model`` with one queued trial of a recorded config (no coordinator dispatches it:
    no worker of that model is live, or, for the RTX 3090, the test sends its message itself)."""
    config = _recorded_config()
    space = get_kernel("convolution_kernel").space
    with session_scope(database_url) as session:
        job = store_job(session, "convolution_kernel", gpu_model, parallelism=1, budget_trials=1)
        [trial] = trial_store.add_trials(session, job, [(space.key(config), config)])
        return job.id, trial.id


def _trial(database_url: str, trial_id: int) -> Trial:
    with session_scope(database_url) as session:
        trial = session.get_one(Trial, trial_id)
        session.expunge(trial)
        return trial


def test_malformed_messages_are_refused_with_the_reason_and_the_worker_goes_on(farm: Farm) -> None:
    job_id, queued = _queued_trial(farm.database_url, OTHER_MODEL)  # a claimable trial id: 20.0 must not claim it
    before = _worker_logs(farm)
    evaluate_bad: list[tuple[list[object] | None, dict[str, object] | None]] = [
        (["abc"], None), ([None], None), ([-1], None), ([0], None), ([2**70], None), ([float(queued)], None),
        ([str(queued)], None), ([True], None), ([{"x": 1}], None), ([[queued]], None), ([], None),
        ([queued, 2], None), (None, {"trial_id": queued, "bogus": 1}), (None, {"nope": 1}),
        ([queued], {"trial_id": queued}),
    ]  # fmt: skip
    profile_bad: list[tuple[list[object] | None, dict[str, object] | None]] = [
        (["not-a-uuid", [1]], None), ([str(job_id), "abc"], None), ([str(job_id), [1, "x"]], None),
        ([None, None], None), ([str(job_id)], None), ([str(uuid.uuid4()), [queued]], None),
        ([str(job_id), [True]], None),
    ]  # fmt: skip
    _send(farm, [(EVALUATE_TASK, a, k) for a, k in evaluate_bad] + [(PROFILE_TASK, a, k) for a, k in profile_bad])

    def refusals() -> tuple[int, int]:
        log = _since(farm, before)
        return log.count(f"refused a {EVALUATE_TASK} message"), log.count(f"refused a {PROFILE_TASK} message")

    try:
        wait_for(lambda: refusals() == (len(evaluate_bad), len(profile_bad)), 30,
                 f"every malformed message refused (so far {refusals()})")  # fmt: skip
    finally:
        log = _since(farm, before)
        assert "Traceback" not in log, log[-4000:]
        assert "raised unexpected" not in log, log[-4000:]
    assert re.search(r"refused a worker\.evaluate message: trial_id must be a positive integer, got 'abc'", log)
    assert f"refused a {PROFILE_TASK} message: there is no job" in log
    farm.check_running()  # no worker died
    trial = _trial(farm.database_url, queued)
    assert (trial.state, trial.attempt) == ("queued", 0)  # "20" / 20.0 claimed nothing
    with session_scope(farm.database_url) as session:
        job_store.cancel_job(session, job_id)

    # A redelivered message of a trial that is finished is skipped, as before; and the workers still
    # measure: a trial of their own model sent now is recorded.
    own_job, own = _queued_trial(farm.database_url, RTX3090)
    _send(farm, [(EVALUATE_TASK, [own], None), (EVALUATE_TASK, [own], None)])
    wait_for(lambda: _trial(farm.database_url, own).state == "complete", 30, "the worker's own trial measured")
    wait_for(lambda: "skipped" in _since(farm, before), 30, "the duplicate skipped")
    with session_scope(farm.database_url) as session:
        job_store.cancel_job(session, own_job)


def test_a_trial_of_another_gpu_model_is_refused_and_stays_queued(farm: Farm, read_client: httpx.Client) -> None:
    job_id, trial_id = _queued_trial(farm.database_url, OTHER_MODEL)
    before = _worker_logs(farm)
    _send(farm, [(EVALUATE_TASK, [trial_id], None)])
    try:
        wait_for(lambda: f"refused trial {trial_id}" in _since(farm, before) or
                 _trial(farm.database_url, trial_id).state != "queued", 30, "the worker to answer")  # fmt: skip
        trial = _trial(farm.database_url, trial_id)
        assert (trial.state, trial.attempt, trial.worker_name) == ("queued", 0, None), (
            f"an RTX 3090 worker took an {OTHER_MODEL} trial: {trial.state}, {trial.time_ms} ms"
        )
        log = _since(farm, before)
        assert f"is for GPU model {OTHER_MODEL!r}; this worker measures {RTX3090!r}" in log
        best = read_client.get("/v1/best", params={"kernel": "convolution_kernel", "gpu": OTHER_MODEL})
        assert best.status_code == 404, best.text
        # the profile task refuses the job's batches too
        _send(farm, [(PROFILE_TASK, [str(job_id), [trial_id]], None)])
        wait_for(lambda: f"refused a {PROFILE_TASK} message: job {job_id} is for GPU model" in _since(farm, before),
                 30, "the profile batch refused")  # fmt: skip
    finally:
        with session_scope(farm.database_url) as session:
            job_store.cancel_job(session, job_id)


def test_serves_names_what_a_worker_may_measure() -> None:
    serves = runner.Serves(RTX3090, ())
    assert serves.refusal(RTX3090, "convolution_kernel", 1, "trial 1") is None
    assert serves.refusal(OTHER_MODEL, "convolution_kernel", 1, "trial 1") == (
        f"trial 1 is for GPU model {OTHER_MODEL!r}; this worker measures {RTX3090!r}"
    )
    # a kernel that is nowhere: the backend reports it as the trial's own failure, as before
    assert serves.refusal(RTX3090, "no_such_kernel", 1, "trial 1") is None


@pytest.fixture(scope="module")
def health_api(farm: Farm) -> Iterator[tuple[Farm, Path]]:
    """An API process reading a stack health file this test writes."""
    other = Farm(farm.database_url, farm.redis_url, farm.directory / "health-api")
    health_file = farm.directory / "health-api-components.json"
    try:
        port = free_port()
        other.api_url = f"http://127.0.0.1:{port}"
        other.start("api", launcher.api_argv(port), KERNELFARM_STACK_HEALTH_FILE=str(health_file))
        wait_for(lambda: other.check_running() and api_ready(other.api_url), 30, "API")
        yield other, health_file
    finally:
        other.stop_all()


@pytest.mark.parametrize(
    ("content", "status", "components"),
    [
        ("[]", 200, None), ('"text"', 200, None), ('{"api": "x"}', 200, None), ("{not json", 200, None),
        ('{"worker-0": {"state": "crash-looping"}}', 503, "failing: worker-0 crash-looping (? exits)"),
        ('{"worker-0": {"state": "crash-looping", "exits": 4}, "api": {"state": "running", "exits": 0}}', 503,
         "failing: worker-0 crash-looping (4 exits)"),
    ],
)  # fmt: skip
def test_ready_reads_any_health_file_without_failing(
    health_api: tuple[Farm, Path], content: str, status: int, components: str | None
) -> None:
    api, health_file = health_api
    health_file.write_text(content)
    response = httpx.get(f"{api.api_url}/ready", timeout=30)
    assert response.status_code == status, response.text
    assert response.json().get("components") == components
