"""Best configuration per kernel, problem and GPU model, with the documented fallback order."""

from __future__ import annotations

import re
import reprlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response

from kernelfarm.api.best_cache import Answer, BestCache
from kernelfarm.api.deadline import in_thread
from kernelfarm.api.deps import ReadToken, SettingsDep
from kernelfarm.api.schemas import BestPublic, ParetoPoint
from kernelfarm.core.db import session_scope
from kernelfarm.core.errors import InvalidInput, NotFound
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.models import Job
from kernelfarm.core.store.best import BestMatch, energy_front, find_best
from kernelfarm.kernels.registry import get_kernel

router = APIRouter(prefix="/v1", tags=["best"])


# Integers are ASCII digits: str.isdigit() also takes "²" and other digits int() refuses (a 500).
_INTEGER = re.compile(r"-?[0-9]+")
MAX_INTEGER_DIGITS = 19  # beyond any problem size; int() of 5000 digits raised (a 500)


def parse_problem(pairs: list[str]) -> dict[str, Any]:
    """``["M=4096", "dtype=bf16"]`` → ``{"M": 4096, "dtype": "bf16"}`` (integers where they parse).

    Raises:
        InvalidInput: an entry that is not name=value, a name given twice, or an integer too long.
    """
    problem: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not name:
            raise InvalidInput(f"problem entries look like name=value, got {reprlib.repr(pair)}")
        if name in problem:
            raise InvalidInput(f"problem {reprlib.repr(name)} is given twice")
        integer = _INTEGER.fullmatch(value) is not None
        digits = len(value.lstrip("-"))
        if integer and digits > MAX_INTEGER_DIGITS:
            raise InvalidInput(f"problem {reprlib.repr(name)}: {digits} digits, at most {MAX_INTEGER_DIGITS}")
        problem[name] = int(value) if integer else value
    return problem


@router.get("/best", response_model=BestPublic)
async def best_config(
    request: Request,
    _: ReadToken,
    settings: SettingsDep,
    kernel: Annotated[str, Query(min_length=1, max_length=128)],
    gpu: Annotated[str, Query(min_length=1, max_length=128, description="GPU model slug or device name")],
    problem: Annotated[list[str], Query(max_length=32, description="repeated name=value; defaults fill the rest")] = [],  # noqa: B006
    objective: Annotated[
        Literal["time", "energy", "pareto"],
        Query(description="time (with fallbacks), energy, or pareto (time/energy front); the last two: exact match"),
    ] = "time",
) -> Response:
    """Fallback order: ``exact`` (same GPU model and problem) → ``nearest_problem`` (same GPU model,
    nearest recorded problem by log-ratio of sizes, same dtype) → ``same_architecture`` (another GPU
    model of the same compute capability) → 404 saying nothing was found. Only complete, verified
    trials of the kernel's current source count. Answers are cached per API process: a new best is
    served at most ``best_cache_seconds`` (default 0.25 s) after it was recorded."""
    # The hot path of the farm: a cached answer is served on the event loop, with no thread hop,
    # database read or response validation (api/best_cache.py).
    if objective != "time":  # rare and exact-match only: no cache (api/best_cache.py keys time answers)
        return _respond(
            await in_thread(settings.api_database_deadline_seconds, _energy_answer, settings.database_url, kernel, gpu,
                            problem, objective)
        )  # fmt: skip
    cache: BestCache = request.app.state.best_cache
    deadline = settings.api_database_deadline_seconds
    if not cache.enabled:
        return _respond(await in_thread(deadline, _answer, settings.database_url, kernel, gpu, problem, None))
    if not cache.current():
        await in_thread(deadline, cache.refresh)
    key = (kernel, gpu, tuple(problem))
    answer = cache.get(key, kernel)
    if answer is None:
        # Validation errors (unknown kernel, bad problem or GPU name) raise and are not kept.
        answer = await in_thread(deadline, _answer, settings.database_url, kernel, gpu, problem, cache)
        cache.put(key, answer)
    return _respond(answer)


def _answer(database_url: str | None, kernel: str, gpu: str, pairs: list[str], cache: BestCache | None) -> Answer:
    spec = get_kernel(kernel)
    # A problem never recorded for a replay-only kernel is still a fair question: it is answered
    # by the nearest recorded problem (match "nearest_problem"), as documented.
    normalized = spec.normalize_problem(parse_problem(pairs), recorded_only=False)
    try:
        gpu_model = model_slug(gpu)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    stamp = cache.stamp(spec.name) if cache is not None else (0, 0)  # before any query (see BestCache)
    with session_scope(database_url) as session:
        try:
            found = find_best(session, spec, normalized, gpu_model)
        except NotFound as exc:
            return Answer(stamp, missing=str(exc))
        return Answer(stamp, body=_public(spec.name, gpu_model, normalized, found).model_dump_json().encode())


def _energy_answer(database_url: str | None, kernel: str, gpu: str, pairs: list[str], objective: str) -> Answer:
    spec = get_kernel(kernel)
    normalized = spec.normalize_problem(parse_problem(pairs))
    try:
        gpu_model = model_slug(gpu)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    with session_scope(database_url) as session:
        try:
            front = energy_front(session, spec, normalized, gpu_model)
        except NotFound as exc:
            return Answer((0, 0), missing=str(exc))
        chosen = min(front, key=lambda t: float(t.metrics["energy_mj"])) if objective == "energy" else front[0]
        job = session.get(Job, chosen.job_id)
        assert job is not None
        match = BestMatch(chosen, job, "exact", dict(job.problem), gpu_model)
        public = _public(spec.name, gpu_model, normalized, match).model_copy(
            update={
                "objective": objective,
                "energy_mj": float(chosen.metrics["energy_mj"]),
                "pareto": None
                if objective == "energy"
                else [
                    ParetoPoint(
                        config=t.config,
                        config_key=t.config_key,
                        time_ms=float(t.time_ms or 0.0),
                        energy_mj=float(t.metrics["energy_mj"]),
                        trial_id=t.id,
                    )
                    for t in front
                ],
            }
        )
        return Answer((0, 0), body=public.model_dump_json().encode())


def _respond(answer: Answer) -> Response:
    if answer.missing is not None:
        raise NotFound(answer.missing)  # a new exception each time: re-raising one grows its traceback
    return Response(content=answer.body, media_type="application/json")


def _public(kernel: str, gpu_model: str, problem: dict[str, Any], found: BestMatch) -> BestPublic:
    trial = found.trial
    assert trial.time_ms is not None
    return BestPublic(
        kernel=kernel,
        gpu_model=gpu_model,
        problem=problem,
        match=found.match,  # type: ignore[arg-type]
        matched_gpu_model=found.gpu_model,
        matched_problem=found.problem,
        config=trial.config,
        config_key=trial.config_key,
        time_ms=trial.time_ms,
        time_p20_ms=trial.time_p20_ms,
        time_p80_ms=trial.time_p80_ms,
        trial_id=trial.id,
        job_id=trial.job_id,
        measured_at=trial.finished_at,
        provenance=trial.provenance,
        metrics=trial.metrics,
    )
