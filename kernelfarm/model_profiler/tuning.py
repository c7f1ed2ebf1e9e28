"""Profile → tune: submit the hot operators to the farm as tuning jobs and collect what tuning bought.

Everything goes through the farm's REST API (the profiler is one more client). An operator the farm
already knows (an exact best for this GPU model and problem) is not tuned again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from kernelfarm.client import ApiError, Client
from kernelfarm.model_profiler.analysis import OperatorReport
from kernelfarm.model_profiler.mapping import choose_kernels, family_problem

logger = logging.getLogger(__name__)
FINISHED = frozenset({"complete", "failed", "cancelled"})


@dataclass(frozen=True)
class TuningPlan:
    budget_trials: int = 48
    top: int = 3
    parallelism: int = 8
    timeout_s: float = 420.0
    strategy: str | None = None


def tune_hot_operators(client: Client, operators: list[OperatorReport], *, dtype: str, gpu_model: str,
                       plan: TuningPlan) -> list[dict[str, Any]]:  # fmt: skip
    """One entry per mapped hot operator: kernel, problem, baseline and tuned times, speedup, status.

    ``plan.top`` counts the operators the farm has a kernel for; hotter ones it has none for (e.g.
    attention in a dtype no farm kernel takes) are listed with the status "no farm kernel".
    """
    offered = client.kernels()
    entries: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}
    for op in operators:
        if sum(1 for e in entries if e["kernel"]) >= plan.top:
            break
        mapped = family_problem(op, dtype)
        if mapped is None:
            continue
        entry: dict[str, Any] = {
            "operator": op.name, "input_shapes": op.input_shapes, "family": mapped.family,
            "problem": mapped.problem, "calls": op.calls, "baseline_ms": op.self_ms / op.calls,
            "share": op.share, "kernel": None, "tuned_ms": None, "speedup": None, "status": "no farm kernel",
        }  # fmt: skip
        entries.append(entry)
        for kernel, problem in choose_kernels(mapped.family, dtype, mapped.problem, offered):
            entry["kernel"], entry["kernel_problem"] = kernel, problem
            known = _exact_best(client, kernel, gpu_model, problem)
            if known is not None:
                _record(entry, known, "known")
                break
            try:
                job = client.submit(_job_body(kernel, problem, gpu_model, plan))
            except ApiError as exc:  # this kernel cannot run the problem here: try the next one
                entry["status"] = f"refused by the farm: {exc.detail}"
                continue
            entry["job_id"], entry["status"] = job["id"], "submitted"
            pending[job["id"]] = entry
            break
    _wait(client, pending, plan.timeout_s)
    for entry in pending.values():
        best = _exact_best(client, entry["kernel"], gpu_model, entry["kernel_problem"])
        if best is not None:
            _record(entry, best, "tuned")
    return entries


def estimated_end_to_end(latency_ms: float, entries: list[dict[str, Any]]) -> float:
    """The inference latency if every tuned operator ran at its tuned time (the rest unchanged)."""
    saved = sum((e["baseline_ms"] - e["tuned_ms"]) * e["calls"] for e in entries if e.get("tuned_ms") is not None)
    return latency_ms - max(0.0, saved)


def _job_body(kernel: str, problem: dict[str, Any], gpu_model: str, plan: TuningPlan) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kernel": kernel, "problem": problem, "gpu_model": gpu_model, "budget_trials": plan.budget_trials,
        "parallelism": plan.parallelism, "profile": "none",
    }  # fmt: skip
    if plan.strategy:
        body["strategy"] = plan.strategy
    return body


def _exact_best(client: Client, kernel: str, gpu_model: str, problem: dict[str, Any]) -> dict[str, Any] | None:
    try:
        best = client.best(kernel, gpu_model, problem)
    except ApiError as exc:
        if exc.status in (404, 422):
            return None
        raise
    return best if best.get("match") == "exact" else None


def _record(entry: dict[str, Any], best: dict[str, Any], status: str) -> None:
    entry.update(
        tuned_ms=best["time_ms"], config=best["config"], status=status,
        speedup=entry["baseline_ms"] / best["time_ms"] if best["time_ms"] else None,
    )  # fmt: skip


def _wait(client: Client, pending: dict[str, dict[str, Any]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = dict(pending)
    while waiting and time.monotonic() < deadline:
        for job_id in list(waiting):
            job = client.job(job_id)
            if job["state"] in FINISHED:
                waiting.pop(job_id)["status"] = job["state"]
        if waiting:
            time.sleep(1.0)
    for entry in waiting.values():
        entry["status"] = "timed out"
        logger.warning("tuning job %s did not finish in %.0f s", entry.get("job_id"), timeout_s)
