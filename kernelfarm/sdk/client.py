"""``kernelfarm.Client``: the farm's REST API from Python (sync, httpx), with timeouts and retries.

Retries: a request that could not reach the farm, timed out, or got 429/502/503/504 is sent again
(``retries`` times, exponential back-off). That is safe for every call: reads and cancel are
idempotent, and :meth:`Client.submit` sends an ``Idempotency-Key`` (one per call unless you give
one), so a retried submission returns the job the first attempt created, never a second job.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, overload

import httpx

from kernelfarm.client import ApiError
from kernelfarm.core.exports import json_format
from kernelfarm.core.exports.model import BestExport
from kernelfarm.sdk.results import BestConfig, Job, Kernel, Trial

RETRY_STATUSES = frozenset({429, 502, 503, 504})


class WaitTimeout(TimeoutError):
    """:meth:`Client.wait` gave up; ``job`` is the job as last seen (still running on the farm)."""

    def __init__(self, job: Job, seconds: float) -> None:
        super().__init__(f"job {job.id} still {job.state} after {seconds:g} s")
        self.job = job


class Client:
    """A farm's API. ``base_url`` like ``http://farm:8000``; ``token`` from ``kernelfarm token create``.

    Args:
        timeout: seconds per HTTP request (connect, read, write).
        retries: extra attempts after a connection error, a timeout or a 429/502/503/504.
        backoff: seconds before the first retry; doubled for each further one.
        transport: an httpx transport (tests; a proxy-aware one).

    Raises (every method): :class:`kernelfarm.client.ApiError` with the HTTP status (0: the farm
    could not be reached) and the farm's reason.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)
        self.retries, self.backoff = retries, backoff

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ jobs
    def submit(
        self,
        kernel: str,
        gpu_model: str,
        problem: Mapping[str, Any] | None = None,
        *,
        budget_trials: int | None = None,
        budget_seconds: float | None = None,
        parallelism: int = 4,
        strategy: str | None = None,
        seed: int | None = None,
        space: Mapping[str, Any] | None = None,
        profile: str = "all",
        warm_start: bool | None = None,
        objective: str | None = None,
        strategy_options: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        """Submit a tuning job (give ``budget_trials`` and/or ``budget_seconds``). The same
        ``idempotency_key`` again returns the job it created (from any process: CI retries).
        ``warm_start`` None: the farm's default (on: the job learns from the same kernel and problem on
        other GPU models; ``Job.warm_start_prior`` says which); False starts cold. ``objective``: "time"
        (the farm's default), "energy" (per launch, NVML: cuda workers) or "time+energy" (a Pareto front:
        ``best(..., objective="pareto")``). ``strategy_options``: the strategy's own (docs/EXTENDING.md);
        options it would refuse are refused with the reason (ApiError 422)."""
        body: dict[str, Any] = {"kernel": kernel, "gpu_model": gpu_model, "problem": dict(problem or {}),
                                "parallelism": parallelism, "profile": profile}  # fmt: skip
        optional = {"budget_trials": budget_trials, "budget_seconds": budget_seconds, "strategy": strategy,
                    "seed": seed, "space": dict(space) if space is not None else None,
                    "warm_start": warm_start, "objective": objective,
                    "strategy_options": dict(strategy_options) if strategy_options is not None else None}  # fmt: skip
        body |= {k: v for k, v in optional.items() if v is not None}
        key = idempotency_key or f"kernelfarm-client-{uuid.uuid4()}"
        return Job.model_validate(self._json("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": key}))

    def job(self, job_id: str) -> Job:
        return Job.model_validate(self._json("GET", f"/v1/jobs/{job_id}"))

    def follow(self, job_id: str, *, poll: float = 0.5) -> Iterator[Job]:
        """Yield the job each time its progress or state changes, the last time when it finished."""
        last: tuple[Any, ...] | None = None
        while True:
            job = self.job(job_id)
            seen = (job.state, job.progress, job.best)
            if seen != last:
                last = seen
                yield job
            if job.finished:
                return
            time.sleep(poll)

    def wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        poll: float = 0.5,
        progress: Callable[[Job], None] | None = None,
    ) -> Job:
        """Block until the job finished (complete, failed or cancelled) and return it; ``progress``
        is called with the job at every change. Raises :class:`WaitTimeout` after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        job: Job | None = None
        last: tuple[Any, ...] | None = None
        while True:
            job = self.job(job_id)
            seen = (job.state, job.progress, job.best)
            if progress is not None and seen != last:
                progress(job)
            last = seen
            if job.finished:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(job, timeout or 0.0)
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    def cancel(self, job_id: str) -> Job:
        return Job.model_validate(self._json("POST", f"/v1/jobs/{job_id}/cancel"))

    def trials(self, job_id: str, *, state: str | None = None, order: str = "seq") -> list[Trial]:
        """Every trial of a job (all pages)."""
        items: list[Trial] = []
        while True:
            params: dict[str, Any] = {"order": order, "limit": 1000, "offset": len(items)}
            if state:
                params["state"] = state
            page = self._json("GET", f"/v1/jobs/{job_id}/trials", params=params)
            items += [Trial.model_validate(t) for t in page["items"]]
            if not page["items"] or len(items) >= page["total"]:
                return items

    # ------------------------------------------------------------------ best configs
    def best(
        self, kernel: str, gpu: str, problem: Mapping[str, Any] | None = None, *, objective: str = "time"
    ) -> BestConfig:
        """The best config with the farm's fallback order (``match``: exact, nearest_problem,
        same_architecture); ApiError 404 when there is none. ``objective`` "energy": the most frugal
        config; "pareto": the time/energy front (``pareto``), its fastest config as the answer; both
        exact matches only, 404 where no energy was measured."""
        params = [("kernel", kernel), ("gpu", gpu), *_problem_params(problem)]
        if objective != "time":
            params.append(("objective", objective))
        return BestConfig.model_validate(self._json("GET", "/v1/best", params=params))

    @overload
    def export(
        self,
        kernel: str,
        format: Literal["json"] = "json",
        *,
        gpu: list[str] | None = None,
        problem: Mapping[str, Any] | None = None,
    ) -> BestExport: ...
    @overload
    def export(
        self,
        kernel: str,
        format: Literal["header"],
        *,
        gpu: list[str] | None = None,
        problem: Mapping[str, Any] | None = None,
    ) -> str: ...
    @overload
    def export(
        self,
        kernel: str,
        format: Literal["triton"],
        *,
        gpu: list[str] | None = None,
        problem: Mapping[str, Any] | None = None,
    ) -> dict[str, str]: ...
    def export(self, kernel: str, format: str = "json", *, gpu: list[str] | None = None,
               problem: Mapping[str, Any] | None = None) -> BestExport | str | dict[str, str]:  # fmt: skip
        """A kernel's best configs for every recorded GPU model and problem (or those filtered):
        ``json`` → :class:`BestExport`, ``header`` → header text, ``triton`` → file name → text."""
        params = [("kernel", kernel), ("format", format), *(("gpu", g) for g in gpu or []), *_problem_params(problem)]
        response = self._request("GET", "/v1/best/export", params=params)
        if format == "json":
            return json_format.read(response.text)
        if format == "triton":
            files: dict[str, str] = response.json()["files"]
            return files
        return response.text

    def export_trials(self, job_id: str, format: Literal["kernel_tuner", "t4", "csv"] = "kernel_tuner") -> str:
        """A job's trials as a Kernel Tuner cache file, T4 results JSON or CSV (text)."""
        return self._request("GET", f"/v1/jobs/{job_id}/export", params={"format": format}).text

    def kernels(self) -> list[Kernel]:
        return [Kernel.model_validate(k) for k in self._json("GET", "/v1/kernels")]

    def workers(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._json("GET", "/v1/workers")
        return result

    # ------------------------------------------------------------------ transport
    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        delay = self.backoff
        for attempt in range(self.retries + 1):
            last_try = attempt == self.retries
            try:
                response = self.http.request(method, path, **kwargs)
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                if last_try:
                    raise ApiError(0, f"cannot reach the farm at {self.http.base_url}: {exc}") from None
            else:
                if response.status_code < 400:
                    return response
                if response.status_code not in RETRY_STATUSES or last_try:
                    raise ApiError(response.status_code, _detail(response))
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")


def _problem_params(problem: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    return [("problem", f"{k}={v}") for k, v in (problem or {}).items()]


def _detail(response: httpx.Response) -> Any:
    try:
        return response.json().get("detail", response.text)
    except ValueError:
        return response.text
