"""Profile → tune: submit the hot operators to the farm as tuning jobs and collect what tuning bought.

Everything goes through the farm's REST API (the profiler is one more client). An operator the farm
already knows (an exact best for this GPU model and problem) is not tuned again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelfarm.client import ApiError, Client
from kernelfarm.model_profiler.analysis import OperatorReport
from kernelfarm.model_profiler.fusion import FAMILY
from kernelfarm.model_profiler.mapping import choose_kernels, family_problem

logger = logging.getLogger(__name__)
FINISHED = frozenset({"complete", "failed", "cancelled"})
FUSED_OPERATOR = "c_fc + act"  # a fused candidate's "operator": the two modules it runs as one kernel
FUSED_AWAY = "fused: tuned with its GELU (the c_fc + act entry)"


@dataclass(frozen=True)
class TuningPlan:
    budget_trials: int = 48
    top: int = 3
    parallelism: int = 8
    timeout_s: float = 420.0
    strategy: str | None = None


def tune_hot_operators(client: Client, operators: list[OperatorReport], *, dtype: str, gpu_model: str,
                       plan: TuningPlan, fused: Sequence[dict[str, Any]] = (),
                       progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One entry per mapped hot operator: kernel, problem, baseline and tuned times, speedup, status.

    The submitted jobs are waited for up to ``plan.timeout_s``; ``progress`` (the command's console) is told
    when the wait starts and as each job finishes. A job still unfinished then is cancelled (nothing is left
    queued on the farm): its status says so.

    ``plan.top`` counts the operators the farm has a kernel for; hotter ones it has none for (e.g.
    attention in a dtype no farm kernel takes) are listed with the status "no farm kernel".

    ``fused``: the candidates of :func:`kernelfarm.model_profiler.fusion.fused_mlp_candidates` (an MLP's
    up-projection and GELU as one kernel). Each is ranked with the operators by its time per inference (its
    baseline times its calls, against an operator's self time) and counts toward ``plan.top`` as an operator
    does: it is one more tuning job. The operator that is exactly a candidate's GEMM (same M, N, K, dtype,
    layout and as many calls: the MLPs' ``c_fc`` and nothing else) is then not tuned on its own (the fused
    kernel replaces it where it wins): it is listed with the status ``FUSED_AWAY`` and not counted, unless
    the farm offers no fused kernel for the problem (float32: the GEMM is tuned alone, as without fusion).
    """
    offered = client.kernels()
    entries: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}
    # only where the farm has a fused kernel for the dtype (none for float32): else the GEMM is tuned alone
    fused_gemms = {
        _gemm_key(c["problem"], c["calls"]) for c in fused if choose_kernels(FAMILY, dtype, c["problem"], offered)
    }
    ranked: list[tuple[float, OperatorReport | dict[str, Any]]] = [(op.self_ms, op) for op in operators]
    ranked += [(candidate["baseline_ms"] * candidate["calls"], candidate) for candidate in fused]
    for _, item in sorted(ranked, key=lambda pair: pair[0], reverse=True):  # stable: ties keep their order
        if sum(1 for e in entries if e["kernel"]) >= plan.top:
            break
        if isinstance(item, dict):
            entry = _fused_entry(item)
        else:
            mapped = family_problem(item, dtype)
            if mapped is None:
                continue
            entry = {
                "operator": item.name, "input_shapes": item.input_shapes, "family": mapped.family,
                "problem": mapped.problem, "calls": item.calls, "baseline_ms": item.self_ms / item.calls,
                "share": item.share, "kernel": None, "tuned_ms": None, "speedup": None, "status": "no farm kernel",
            }  # fmt: skip
            if mapped.family == "matmul" and _gemm_key(mapped.problem, item.calls) in fused_gemms:
                entries.append(entry | {"status": FUSED_AWAY})
                continue
        entries.append(entry)
        _submit(client, entry, offered, dtype=dtype, gpu_model=gpu_model, plan=plan, pending=pending)
    _wait(client, pending, plan.timeout_s, progress or (lambda line: logger.info("%s", line)))
    for entry in pending.values():
        best = _exact_best(client, entry["kernel"], gpu_model, entry["kernel_problem"])
        if best is not None:
            _record(entry, best, "tuned")
    return entries


def _fused_entry(candidate: dict[str, Any]) -> dict[str, Any]:
    problem = candidate["problem"]
    return {
        "operator": FUSED_OPERATOR, "input_shapes": [[problem["M"], problem["K"]]], "family": FAMILY,
        "problem": dict(problem), "calls": candidate["calls"], "baseline_ms": candidate["baseline_ms"],
        "baseline_how": candidate["baseline_how"], "modules": list(candidate["modules"]),
        # not a row of the profile (timed in isolation): no share of the profiled device time
        "share": None, "kernel": None, "tuned_ms": None, "speedup": None, "status": "no farm kernel",
    }  # fmt: skip


def _gemm_key(problem: dict[str, Any], calls: int) -> tuple[Any, ...]:
    return (*(problem[name] for name in ("M", "N", "K", "dtype", "b_layout")), calls)


def _submit(client: Client, entry: dict[str, Any], offered: list[dict[str, Any]], *, dtype: str, gpu_model: str,
            plan: TuningPlan, pending: dict[str, dict[str, Any]]) -> None:  # fmt: skip
    """Find the entry's best on the farm, or submit a job for the first farm kernel that takes it."""
    for kernel, problem in choose_kernels(entry["family"], dtype, entry["problem"], offered):
        entry["kernel"], entry["kernel_problem"] = kernel, problem
        known = _exact_best(client, kernel, gpu_model, problem)
        if known is not None:
            _record(entry, known, "known")
            return
        try:
            job = client.submit(_job_body(kernel, problem, gpu_model, plan))
        except ApiError as exc:  # this kernel cannot run the problem here: try the next one
            entry["status"] = f"refused by the farm: {exc.detail}"
            continue
        entry["job_id"], entry["status"] = job["id"], "submitted"
        pending[job["id"]] = entry
        return


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


def _wait(client: Client, pending: dict[str, dict[str, Any]], timeout_s: float, say: Callable[[str], None]) -> None:
    if not pending:
        return
    say(f"waiting up to {timeout_s:.0f} s for {len(pending)} tuning job(s) on the farm: {', '.join(pending)}")
    deadline = time.monotonic() + timeout_s
    waiting = dict(pending)
    while waiting and time.monotonic() < deadline:
        for job_id in list(waiting):
            job = client.job(job_id)
            if job["state"] in FINISHED:
                entry = waiting.pop(job_id)
                entry["status"] = job["state"]
                say(f"tuning job {job_id} ({entry['kernel']}) {job['state']}; {len(waiting)} still running")
        if waiting:
            time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))
    for job_id, entry in waiting.items():
        try:
            client.cancel(job_id)
        except ApiError as exc:  # the wait is over either way; say what is left on the farm
            entry["status"] = f"timed out after {timeout_s:.0f} s; not cancelled ({exc.message}): cancel it"
        else:
            entry["status"] = f"timed out after {timeout_s:.0f} s: cancelled"
        logger.warning("tuning job %s did not finish in %.0f s: %s", job_id, timeout_s, entry["status"])
        say(f"tuning job {job_id} ({entry['kernel']}) {entry['status']}")
