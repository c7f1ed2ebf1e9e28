"""``kernelfarm.Client``: the farm's REST API from Python (sync, httpx), with timeouts and retries.

Retries: a request that could not reach the farm, timed out, or got 429/502/503/504 is sent again
(``retries`` times, exponential back-off). That is safe for every call: reads and cancel are
idempotent, and :meth:`Client.submit` sends an ``Idempotency-Key`` (one per call unless you give
one), so a retried submission returns the job the first attempt created, never a second job.

Errors: every method raises :class:`kernelfarm.client.ApiError`, whatever went wrong with the request. A
request that cannot be encoded (a NaN, a lone surrogate) is not sent and raises ApiError 422, as the farm
would answer it; ids are sent as one quoted path segment each, so ``job("../kernels")`` asks for that job
(and gets the farm's 404), never another resource. An answer that is not what was asked for is an
ApiError with the answer's status and one line saying why (for a result model: each field and its reason);
a triton export naming a file that is not a plain file name (``../x``, ``/x``) is refused so.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, TypeVar, overload

import httpx
from pydantic import BaseModel, ValidationError

from kernelfarm.client import ApiError, quoted_segment, token_problem
from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports import is_plain_file_name, json_format
from kernelfarm.core.exports.model import BestExport
from kernelfarm.core.printable import listed, one_line, quoted, validation_reasons
from kernelfarm.sdk.results import BestConfig, Job, Kernel, Trial

RETRY_STATUSES = frozenset({429, 502, 503, 504})
NOT_SENT = 422  # the status of a request the client refuses to send: what the farm answers such a request
# The most reasons or names one error quotes: a broken answer may hold thousands.
QUOTED_ITEMS = 5
_Model = TypeVar("_Model", bound=BaseModel)


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
    could not be reached; 422 also for a request that was not sent because it cannot be encoded) and
    the farm's reason. The constructor raises ValueError for an argument out of range.
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
        _check_arguments(base_url, token, timeout, retries, backoff)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)
        except httpx.InvalidURL as exc:  # a port that is not a number: neither a ValueError nor an httpx.HTTPError
            raise ValueError(f"base_url {base_url!r} is not a valid URL: {exc}") from None
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
        return self._model(Job, "POST", "/v1/jobs", json=body, headers={"Idempotency-Key": key})

    def job(self, job_id: str) -> Job:
        return self._model(Job, "GET", _job_path(job_id))

    def follow(self, job_id: str, *, poll: float = 0.5) -> Iterator[Job]:
        """Yield the job each time its progress or state changes, the last time when it finished.
        Raises ValueError for a ``poll`` that is not a finite number of seconds > 0."""
        _check_seconds("poll", poll, positive=True)
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
        is called with the job at every change. Raises :class:`WaitTimeout` after ``timeout`` s, and
        ValueError (before asking the farm) for a ``poll`` or ``timeout`` that is not a finite number of
        seconds (``poll`` > 0: 0 would ask the farm without pause)."""
        _check_seconds("poll", poll, positive=True)
        if timeout is not None:
            _check_seconds("timeout", timeout, positive=False)
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
        return self._model(Job, "POST", _job_path(job_id, "cancel"))

    def trials(self, job_id: str, *, state: str | None = None, order: str = "seq") -> list[Trial]:
        """Every trial of a job (all pages)."""
        items: list[Trial] = []
        while True:
            params: dict[str, Any] = {"order": order, "limit": 1000, "offset": len(items)}
            if state:
                params["state"] = state
            page = self._json("GET", _job_path(job_id, "trials"), params=params)
            try:
                new, total = [Trial.model_validate(t) for t in page["items"]], int(page["total"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ApiError(200, f"the farm's answer is not a page of trials: {_reasons(exc)}") from None
            items += new
            if not new or len(items) >= total:
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
        return self._model(BestConfig, "GET", "/v1/best", params=params)

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
            try:
                # Validated here first for a one-line reason; json_format.read's quotes pydantic's, many lines long.
                BestExport.model_validate_json(response.text)
                return json_format.read(response.text)
            except ValidationError as exc:
                raise ApiError(response.status_code, f"the farm's export is not readable: {_reasons(exc)}") from None
            except InvalidInput as exc:  # another schema version
                raise ApiError(response.status_code, f"the farm's export is not readable: {exc}") from None
        if format == "triton":
            answer = _decoded(response)
            files = answer.get("files") if isinstance(answer, dict) else None
            if not isinstance(files, dict):
                raise ApiError(response.status_code, "the farm's triton export has no files")
            _check_triton_files(files, response.status_code)
            return files
        return response.text

    def export_trials(self, job_id: str, format: Literal["kernel_tuner", "t4", "csv"] = "kernel_tuner") -> str:
        """A job's trials as a Kernel Tuner cache file, T4 results JSON or CSV (text)."""
        return self._request("GET", _job_path(job_id, "export"), params={"format": format}).text

    def kernels(self) -> list[Kernel]:
        listed = self._json("GET", "/v1/kernels")
        try:
            return [Kernel.model_validate(k) for k in listed]
        except (TypeError, ValidationError) as exc:
            raise ApiError(200, f"the farm's answer is not a list of kernels: {_reasons(exc)}") from None

    def kernel(self, name: str) -> Kernel:
        """One kernel of the catalogue (or uploaded); ApiError 404 when the farm has no such kernel."""
        return self._model(Kernel, "GET", f"/v1/kernels/{_segment(name, 'kernel')}")

    def workers(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._json("GET", "/v1/workers")
        return result

    # ------------------------------------------------------------------ transport
    def _model(self, model: type[_Model], method: str, path: str, **kwargs: Any) -> _Model:
        response = self._request(method, path, **kwargs)
        try:
            return model.model_validate(_decoded(response))
        except ValidationError as exc:
            what = f"the farm's answer to {method} {path} is not a {model.__name__}"
            raise ApiError(response.status_code, f"{what}: {_reasons(exc)}") from None

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return _decoded(self._request(method, path, **kwargs))

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            request = self.http.build_request(method, path, **kwargs)
        except (ValueError, TypeError, httpx.InvalidURL) as exc:  # UnicodeEncodeError is a ValueError
            raise ApiError(NOT_SENT, f"not sent: the request cannot be encoded ({_unencodable(exc)})") from None
        delay = self.backoff
        for attempt in range(self.retries + 1):
            last_try = attempt == self.retries
            try:
                response = self.http.send(request)
            except httpx.RequestError as exc:  # not reached, timed out, the answer undecodable
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


def _check_arguments(base_url: str, token: str | None, timeout: float, retries: int, backoff: float) -> None:
    """The constructor's arguments, refused with the reason (ValueError) rather than failing later."""
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
    problem = token_problem(token)
    if problem:
        raise ValueError(problem)
    _check_seconds("timeout", timeout, positive=True)
    _check_seconds("backoff", backoff, positive=False)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0 (extra attempts after the first), got {retries!r}")


def _check_seconds(name: str, value: float, *, positive: bool) -> None:
    """A duration argument, refused with the reason (ValueError): ``time.sleep`` would raise only after a
    first request for a NaN or a negative value, and sleep forever for infinity."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number of seconds {bound}, got {value!r}")
    if positive and value == 0:
        raise ValueError(f"{name} must be more than 0 seconds")


def _check_triton_files(files: dict[Any, Any], status: int) -> None:
    """The triton export's ``{file name: text}`` as :meth:`Client.export` promises it. A caller writes
    each as ``folder / name``: a name such as ``../x`` or ``/x`` would leave the folder. The farm never
    sends one (its writer refuses them); another server at the address might.

    Raises:
        ApiError: (``status``) a name that is not a plain file name, or a file whose content is not text.
    """
    unsafe = [name for name in files if not is_plain_file_name(name)]
    if unsafe:
        raise ApiError(status, f"the farm's triton export names files that are not plain file names: {_listed(unsafe)}")
    not_text = [name for name, text in files.items() if not isinstance(text, str)]
    if not_text:
        raise ApiError(status, f"the farm's triton export has files whose content is not text: {_listed(not_text)}")


def _reasons(exc: Exception) -> str:
    """What is wrong with an answer, on one line (the CLI and CI logs print it as one error)."""
    if not isinstance(exc, ValidationError):
        return one_line(str(exc))
    return validation_reasons(exc, "the answer", QUOTED_ITEMS)


def _listed(names: list[str]) -> str:
    return listed([quoted(name) for name in names], QUOTED_ITEMS, ", ")


def _segment(value: str, what: str) -> str:
    """``value`` as one path segment: quoted, so that it can never name another resource."""
    if not isinstance(value, str) or not value:
        raise ApiError(404, f"{what} {value!r} not found")
    try:
        return quoted_segment(value)
    except UnicodeEncodeError as exc:
        raise ApiError(NOT_SENT, f"not sent: the {what} cannot be encoded ({_unencodable(exc)})") from None


def _job_path(job_id: str, *rest: str) -> str:
    """``/v1/jobs/<id>[/rest]``; a ``uuid.UUID`` is taken as its text."""
    return "/".join(["/v1/jobs", _segment(job_id if isinstance(job_id, str) else str(job_id), "job"), *rest])


def _unencodable(exc: Exception) -> str:
    if isinstance(exc, UnicodeEncodeError):
        return f"text that is not valid Unicode: {exc.object[exc.start : exc.end]!r} at position {exc.start}"
    if isinstance(exc, ValueError) and "JSON compliant" in str(exc):
        return "a NaN or infinite number: JSON has none"
    return str(exc)


def _decoded(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError):  # a proxy's HTML page, a truncated answer, nesting no decoder follows
        raise ApiError(response.status_code, f"the farm's answer is not JSON: {response.text[:200]!r}") from None


def _problem_params(problem: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    return [("problem", f"{k}={v}") for k, v in (problem or {}).items()]


def _detail(response: httpx.Response) -> Any:
    """An error answer's reason: its ``detail``, any other JSON as it is (a list had no ``.get``:
    AttributeError), or its text."""
    try:
        data = response.json()
    except (ValueError, RecursionError):  # not JSON; nested deeper than the decoder goes
        return response.text
    return data.get("detail", response.text) if isinstance(data, dict) else data
