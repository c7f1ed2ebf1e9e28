"""The gate's checks: ``gate`` (candidate vs the pinned baseline, both measured in this run) and
``recheck`` (re-measure pinned configs; re-tune where the toolchain changed; flag changed bests)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from kernelfarm.core.exports.model import BestEntry, Toolchain
from kernelfarm.gate.config import GateConfig, GateEntry, load_export
from kernelfarm.gate.measure import (
    EntryError,
    idempotency_key,
    pinned_entry,
    submit_remeasure,
    submit_tuning,
    wait_all,
)
from kernelfarm.sdk.client import Client
from kernelfarm.sdk.results import Job

TOOLCHAIN_FIELDS = ("driver_version", "cuda_version", "nvrtc_version", "triton_version")
# How far past the threshold a change must be to count as beyond it. The change is a ratio of two
# times minus 1, so float rounding leaves it off by ~1e-16 (2.0 -> 2.1 ms is +0.050000000000000044,
# not +5 %); no measurement is a millionth of a percent exact, so anything closer is rounding.
CHANGE_TOLERANCE = 1e-9


@dataclass
class Verdict:
    """One entry's outcome. ``status``: pass, regression, best_changed (failures) or error."""

    name: str
    kernel: str
    status: str = "pass"
    message: str = ""
    baseline_config: str | None = None
    baseline_pinned_ms: float | None = None
    baseline_now_ms: float | None = None
    candidate_config: str | None = None
    candidate_ms: float | None = None
    toolchain_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)

    @property
    def change(self) -> float | None:
        """Candidate time relative to the baseline measured now (+0.10: 10 % slower); None unless
        both times are usable (:func:`unusable_time`)."""
        if self.candidate_ms is None or self.baseline_now_ms is None:
            return None
        if unusable_time(self.candidate_ms) or unusable_time(self.baseline_now_ms):
            return None
        return self.candidate_ms / self.baseline_now_ms - 1.0


def unusable_time(time_ms: float) -> str | None:
    """Why ``time_ms`` cannot be compared (NaN, infinite, 0 or negative), or None. Such a time is a
    farm's or a measurement's bug; compared, NaN and -inf would pass any threshold, and 0 divides."""
    if not math.isfinite(time_ms):
        return "not a finite number"
    if time_ms <= 0:
        return "not more than 0"
    return None


def beyond(change: float, threshold: float) -> bool:
    """``change`` exceeds ``threshold`` by more than float rounding (:data:`CHANGE_TOLERANCE`)."""
    return change - threshold > CHANGE_TOLERANCE


def run_gate(client: Client, config: GateConfig, run_id: str, poll: float = 1.0) -> list[Verdict]:
    """Measure, in this run and on each entry's GPU model, the baseline's pinned config and the
    candidate (a fresh tuning job, or the candidate export's config); a candidate slower than the
    baseline by more than the threshold is a regression. The pinned time is shown, not compared:
    another day's or machine's number would make the gate flaky."""
    deadline = time.monotonic() + config.timeout
    baseline = load_export(config.baseline)
    candidate_export = load_export(config.candidate) if config.candidate is not None else None
    verdicts: list[Verdict] = []
    plans: list[tuple[GateEntry, Verdict, Job, Job]] = []
    for entry in config.entry:
        verdict = Verdict(entry.name, entry.kernel)
        verdicts.append(verdict)
        try:
            pinned = pinned_entry(baseline, entry, "baseline")
            verdict.baseline_config, verdict.baseline_pinned_ms = pinned.config_key, pinned.time_ms
            base_job = submit_remeasure(client, pinned, entry, idempotency_key(run_id, entry, "baseline", pinned))
            if entry.mode == "pinned":
                assert candidate_export is not None  # load_config checked
                chosen = pinned_entry(candidate_export, entry, "candidate")
                cand_job = submit_remeasure(client, chosen, entry, idempotency_key(run_id, entry, "candidate", chosen))
            else:
                cand_job = submit_tuning(client, entry, pinned.problem, idempotency_key(run_id, entry, "candidate"))
        except EntryError as exc:
            verdict.status, verdict.message = "error", str(exc)
            continue
        verdict.jobs = {"baseline": base_job.id, "candidate": cand_job.id}
        plans.append((entry, verdict, base_job, cand_job))
    jobs, cancelled = wait_all(client, [j.id for _, _, b, c in plans for j in (b, c)], deadline, poll)
    for entry, verdict, base_job, cand_job in plans:
        threshold = entry.threshold if entry.threshold is not None else config.threshold
        _judge(verdict, jobs[base_job.id], jobs[cand_job.id], threshold, cancelled)
    return verdicts


def _judge(verdict: Verdict, base: Job, cand: Job, threshold: float, cancelled: set[str]) -> None:
    problem = _unfinished_or_failed(base, "baseline", cancelled) or _unfinished_or_failed(cand, "candidate", cancelled)
    if problem:
        verdict.status, verdict.message = "error", problem
        return
    assert base.best is not None and cand.best is not None
    verdict.baseline_now_ms = base.best.time_ms
    verdict.candidate_ms, verdict.candidate_config = cand.best.time_ms, cand.best.config_key
    problems = [p for p in (_unusable_best(base, "baseline"), _unusable_best(cand, "candidate")) if p]
    if problems:
        verdict.status, verdict.message = "error", "; ".join(problems)
        return
    change = verdict.change
    assert change is not None  # both times usable
    if beyond(change, threshold):
        verdict.status = "regression"
        verdict.message = f"candidate {change:+.1%} slower than the baseline measured now (threshold {threshold:.1%})"
    else:
        verdict.message = f"candidate {change:+.1%} vs the baseline measured now (threshold {threshold:.1%})"


def _unfinished_or_failed(job: Job, role: str, cancelled: set[str]) -> str | None:
    if not job.finished:
        ended = "; the gate cancelled it (a re-run with this run id submits it again)" if job.id in cancelled else ""
        return f"the {role} job {job.id} was still {job.state} at the timeout{ended}"
    if job.state != "complete" or job.best is None:
        return f"the {role} job {job.id} ended {job.state} without a verified result: {job.status_message}"
    return None


def _unusable_best(job: Job, role: str) -> str | None:
    assert job.best is not None
    why = unusable_time(job.best.time_ms)
    if why is None:
        return None
    return f"the {role} job {job.id} measured {job.best.time_ms} ms for {job.best.config_key}: {why}"


def run_recheck(
    client: Client, config: GateConfig, run_id: str, force: bool = False, poll: float = 1.0
) -> list[Verdict]:
    """Re-measure every entry's pinned config; where the toolchain it runs on now (driver, CUDA,
    NVRTC, Triton versions, from the re-measurement's provenance) differs from the pinned one's, or
    with ``force``, tune again and flag the entry when another config is now faster than the pinned
    one by more than the threshold."""
    deadline = time.monotonic() + config.timeout
    baseline = load_export(config.baseline)
    verdicts: list[Verdict] = []
    plans: list[tuple[GateEntry, Verdict, BestEntry, Job]] = []
    for entry in config.entry:
        verdict = Verdict(entry.name, entry.kernel)
        verdicts.append(verdict)
        try:
            pinned = pinned_entry(baseline, entry, "baseline")
            verdict.baseline_config, verdict.baseline_pinned_ms = pinned.config_key, pinned.time_ms
            job = submit_remeasure(client, pinned, entry, idempotency_key(run_id, entry, "recheck-pinned", pinned))
        except EntryError as exc:
            verdict.status, verdict.message = "error", str(exc)
            continue
        verdict.jobs["pinned"] = job.id
        plans.append((entry, verdict, pinned, job))
    remeasured, cancelled = wait_all(client, [job.id for *_, job in plans], deadline, poll)
    tunes: list[tuple[GateEntry, Verdict, Job]] = []
    for entry, verdict, pinned, job in plans:
        finished = remeasured[job.id]
        problem = _unfinished_or_failed(finished, "re-measure", cancelled)
        if problem:
            verdict.status, verdict.message = "error", problem
            continue
        assert finished.best is not None
        verdict.baseline_now_ms = finished.best.time_ms
        problem = _unusable_best(finished, "re-measure")
        if problem:
            verdict.status, verdict.message = "error", problem
            continue
        verdict.toolchain_changes = _toolchain_changes(pinned.toolchain, _toolchain_now(client, finished))
        if not verdict.toolchain_changes and not force:
            verdict.message = "toolchain unchanged: pinned config re-measured, not re-tuned"
            continue
        if entry.budget_trials is None and entry.budget_seconds is None:
            verdict.message = "toolchain changed, but the entry has no tuning budget: re-measured only"
            continue
        try:
            tune = submit_tuning(client, entry, pinned.problem, idempotency_key(run_id, entry, "recheck-tune"))
        except EntryError as exc:
            verdict.status, verdict.message = "error", str(exc)
            continue
        verdict.jobs["tune"] = tune.id
        tunes.append((entry, verdict, tune))
    tuned, cancelled = wait_all(client, [t.id for *_, t in tunes], deadline, poll)
    for entry, verdict, tune in tunes:
        finished = tuned[tune.id]
        problem = _unfinished_or_failed(finished, "re-tune", cancelled)
        if problem:
            verdict.status, verdict.message = "error", problem
            continue
        assert finished.best is not None and verdict.baseline_now_ms is not None
        verdict.candidate_ms, verdict.candidate_config = finished.best.time_ms, finished.best.config_key
        problem = _unusable_best(finished, "re-tune")
        if problem:
            verdict.status, verdict.message = "error", problem
            continue
        threshold = entry.threshold if entry.threshold is not None else config.threshold
        change = verdict.change
        assert change is not None  # both times usable
        if finished.best.config_key != verdict.baseline_config and beyond(-change, threshold):
            verdict.status = "best_changed"
            verdict.message = (f"config {finished.best.config_key} is now {-change:.1%} faster than the pinned "
                               f"{verdict.baseline_config}: update the pinned export")  # fmt: skip
        else:
            verdict.message = "re-tuned: the pinned config is still the best (within the threshold)"
    return verdicts


def _toolchain_now(client: Client, job: Job) -> Toolchain:
    trials = client.trials(job.id, state="complete")
    provenance = trials[0].provenance if trials else {}
    return Toolchain.from_provenance(provenance)


def _toolchain_changes(pinned: Toolchain, now: Toolchain) -> dict[str, tuple[Any, Any]]:
    return {f: (getattr(pinned, f), getattr(now, f)) for f in TOOLCHAIN_FIELDS if getattr(pinned, f) != getattr(now, f)}
