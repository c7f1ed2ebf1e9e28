"""The best-config answer cache (api/best_cache.py) and the stamps that invalidate it
(migrations/versions/0003_best_versions.py), on the real schema with the app in-process.

The property: after a write that changes an answer commits, the API serves the new answer within
``best_cache_seconds``; writes that cannot change it leave cached answers in place."""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete

from kernelfarm.api import routes
from kernelfarm.api.app import create_app
from kernelfarm.api.best_cache import Answer, BestCache
from kernelfarm.core.db import session_scope
from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.models import Trial
from kernelfarm.core.settings import Settings
from kernelfarm.core.states import FailureKind
from kernelfarm.core.store import jobs as job_store
from kernelfarm.core.store import trials as trial_store
from kernelfarm.core.store.best import REGISTRY_SCOPE, answer_versions
from kernelfarm.core.store.kernels import ensure_kernel
from kernelfarm.core.store.workers import WorkerIdentity, register_worker
from kernelfarm.kernels.registry import get_kernel
from tests.conftest import make_token

KERNEL = "cn_pnpoly"
MAX_AGE = 0.3
SLACK = 0.5  # the test's own request and scheduling time on a loaded 2-core machine


def new_model() -> str:
    return f"test-cache-{secrets.token_hex(4)}"


def add_job(database_url: str, gpu_model: str, problem: dict[str, Any] | None = None) -> uuid.UUID:
    spec = get_kernel(KERNEL)
    problem = dict(problem or spec.default_problem)
    with session_scope(database_url) as session:
        kernel = ensure_kernel(session, spec)
        job = job_store.create_job(
            session,
            job_store.NewJob(
                kernel_id=kernel.id, kernel_name=spec.name, problem=problem, problem_key=spec.problem_key(problem),
                gpu_model=gpu_model, space={}, strategy="random", strategy_options={}, seed=1, budget_trials=100,
                budget_seconds=None, parallelism=2, profile="none", profile_top_k=5, warm_start=False, owner="test",
            ),
        )  # fmt: skip
        return job.id


def record(database_url: str, job_id: uuid.UUID, time_ms: float, *, verified: bool = True, failed: bool = False) -> int:
    """One trial through its real lifecycle: queued → claimed → result written."""
    key = secrets.token_hex(4)
    with session_scope(database_url) as session:
        [trial] = trial_store.add_trials(session, job_store.get_job(session, job_id), [(key, {"key": key})])
        trial_id = trial.id
    with session_scope(database_url) as session:
        claim = trial_store.claim(session, trial_id, "test-worker", None)
        assert claim is not None
    if failed:
        measurement = Measurement.failed(FailureKind.COMPILE, "does not compile")
    else:
        measurement = Measurement(timing=TimingStats.from_times([time_ms]), verified=verified)
    with session_scope(database_url) as session:
        assert trial_store.record_result(session, trial_id, claim.attempt, measurement)
    return trial_id


def versions(database_url: str) -> dict[str, int]:
    with session_scope(database_url) as session:
        return answer_versions(session)


@pytest.fixture(scope="module")
def client(database_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=database_url, redis_url="redis://127.0.0.1:1/0", best_cache_seconds=MAX_AGE)
    with TestClient(create_app(settings)) as test_client:
        test_client.headers["Authorization"] = f"Bearer {make_token(database_url, 'read', name='cache-test')}"
        yield test_client


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """GPU models for which the route really ran find_best (a cache miss)."""
    seen: list[str] = []
    real = routes.best.find_best

    def counting(session: Any, spec: Any, problem: Any, gpu_model: str) -> Any:
        seen.append(gpu_model)
        return real(session, spec, problem, gpu_model)

    monkeypatch.setattr(routes.best, "find_best", counting)
    return seen


def best(client: TestClient, gpu: str, **params: Any) -> tuple[int, dict[str, Any]]:
    response = client.get("/v1/best", params={"kernel": KERNEL, "gpu": gpu, **params})
    return response.status_code, response.json()


def served_within(check: Callable[[], bool], seconds: float) -> float:
    """Seconds until ``check`` first holds, polling the API; fails after ``seconds``."""
    started = time.monotonic()
    while not check():
        elapsed = time.monotonic() - started
        assert elapsed < seconds, f"still the old answer after {elapsed:.2f} s (bound {MAX_AGE} s)"
        time.sleep(0.01)
    return time.monotonic() - started


def test_a_faster_trial_is_served_within_the_bound(client: TestClient, database_url: str, lookups: list[str]) -> None:
    model = new_model()
    job = add_job(database_url, model)
    first = record(database_url, job, 2.0)
    status, body = best(client, model)
    assert status == 200 and body["trial_id"] == first and body["match"] == "exact"
    for _ in range(20):  # answered from the cache: no further database lookups
        assert best(client, model)[1]["trial_id"] == first
    time.sleep(MAX_AGE * 1.5)  # the stamps are re-read; nothing changed, so still cached
    assert best(client, model)[1]["trial_id"] == first
    assert lookups == [model]

    before = versions(database_url)
    record(database_url, job, 3.0)  # slower: cannot change the answer
    record(database_url, job, 0.5, verified=False)  # faster but wrong: never "best"
    record(database_url, job, 0.5, failed=True)
    assert versions(database_url) == before
    time.sleep(MAX_AGE * 1.5)
    assert best(client, model)[1]["trial_id"] == first
    assert lookups == [model]

    faster = record(database_url, job, 1.0)
    assert versions(database_url)[KERNEL] == before[KERNEL] + 1
    waited = served_within(lambda: best(client, model)[1]["trial_id"] == faster, MAX_AGE + SLACK)
    assert waited <= MAX_AGE + SLACK
    for _ in range(5):  # and it stays
        assert best(client, model)[1]["trial_id"] == faster

    # Finished trials never change, but a deleted (or repaired) best must not be served either.
    with session_scope(database_url) as session:
        session.execute(delete(Trial).where(Trial.id == faster))
    served_within(lambda: best(client, model)[1]["trial_id"] == first, MAX_AGE + SLACK)


def test_a_404_turns_into_an_answer_and_a_new_problem_is_noticed(client: TestClient, database_url: str) -> None:
    model = new_model()
    status, body = best(client, model)
    assert status == 404 and "no verified measurement" in body["detail"]
    assert best(client, model)[0] == 404  # the cached 404 is rendered like the first one
    # Only another problem measured on this model: the nearest-problem fallback.
    other = add_job(database_url, model, {"size_x": 10_000_000})
    elsewhere = record(database_url, other, 1.0)
    served_within(lambda: best(client, model)[0] == 200, MAX_AGE + SLACK)
    status, body = best(client, model)
    assert body["match"] == "nearest_problem" and body["trial_id"] == elsewhere
    assert body["matched_problem"] == {"size_x": 10_000_000}
    # A first measurement of the exact problem is a new group, slower or not: it wins.
    exact = record(database_url, add_job(database_url, model), 5.0)
    served_within(lambda: best(client, model)[1].get("match") == "exact", MAX_AGE + SLACK)
    assert best(client, model)[1]["trial_id"] == exact


def test_same_architecture_follows_the_worker_registry(client: TestClient, database_url: str) -> None:
    asked, sibling = new_model(), new_model()
    measured = record(database_url, add_job(database_url, sibling), 1.0)
    status, body = best(client, asked)
    assert status == 404 and "architecture of this GPU model unknown" in body["detail"]
    before = versions(database_url).get(REGISTRY_SCOPE, 0)
    with session_scope(database_url) as session:
        for model in (asked, sibling):
            register_worker(
                session,
                WorkerIdentity(name=f"{model}@test", hostname="test", backend="replay", gpu_model=model,
                               gpu_name=model, queue=f"gpu.{model}", compute_capability="99.9"),
            )  # fmt: skip
    assert versions(database_url)[REGISTRY_SCOPE] > before
    served_within(lambda: best(client, asked)[0] == 200, MAX_AGE + SLACK)
    status, body = best(client, asked)
    assert body["match"] == "same_architecture" and body["trial_id"] == measured
    assert body["matched_gpu_model"] == sibling
    # A worker that registers again unchanged (every restart) does not invalidate anything.
    stamp = versions(database_url)[REGISTRY_SCOPE]
    with session_scope(database_url) as session:
        register_worker(
            session,
            WorkerIdentity(name=f"{asked}@test", hostname="test", backend="replay", gpu_model=asked,
                           gpu_name=asked, queue=f"gpu.{asked}", compute_capability="99.9"),
        )  # fmt: skip
    assert versions(database_url)[REGISTRY_SCOPE] == stamp


def test_validation_errors_keep_their_answers(client: TestClient, lookups: list[str]) -> None:
    for _ in range(2):
        status, body = best(client, new_model(), problem=["size_x=big"])
        assert status == 422 and "size_x" in body["detail"]
        response = client.get("/v1/best", params={"kernel": "no_such_kernel", "gpu": "x"})
        assert response.status_code == 404 and "unknown kernel" in response.json()["detail"]
    assert lookups == []


def test_without_the_cache_every_lookup_reads_the_database(database_url: str, lookups: list[str]) -> None:
    settings = Settings(database_url=database_url, redis_url="redis://127.0.0.1:1/0", best_cache_seconds=0)
    with TestClient(create_app(settings)) as client:
        client.headers["Authorization"] = f"Bearer {make_token(database_url, 'read', name='no-cache-test')}"
        model = new_model()
        job = add_job(database_url, model)
        record(database_url, job, 2.0)
        best(client, model)
        faster = record(database_url, job, 1.0)
        assert best(client, model)[1]["trial_id"] == faster  # at once
    assert lookups == [model, model]


def test_an_answer_computed_across_a_change_is_not_kept() -> None:
    """The stamp is taken before the answer's queries: a change committed meanwhile bumps the
    stamps past it, so the next refresh drops the answer instead of keeping it for good."""
    stamps = iter([{"k": 1}, {"k": 2}])
    cache = BestCache(max_age=0.05, read_versions=lambda: next(stamps))
    cache.refresh()
    stamp = cache.stamp("k")  # before the queries
    cache.put("key", Answer(stamp, body=b"{}"))  # ... which raced with a commit that bumped "k"
    assert cache.get("key", "k") is not None
    time.sleep(0.06)
    assert not cache.current()
    cache.refresh()
    assert cache.get("key", "k") is None


def test_concurrent_refreshes_read_once() -> None:
    reads: list[int] = []

    def read() -> dict[str, int]:
        reads.append(1)
        time.sleep(0.05)
        return {}

    cache = BestCache(max_age=10, read_versions=read)
    threads = [threading.Thread(target=cache.refresh) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reads) == 1 and cache.current()
