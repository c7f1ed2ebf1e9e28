"""Submitting the gate's jobs (each under an idempotency key) and waiting for them together."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any

from kernelfarm.client import ApiError
from kernelfarm.core.exports.model import BestEntry, BestExport
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.printable import quoted
from kernelfarm.core.states import JobState
from kernelfarm.gate.config import GateEntry
from kernelfarm.sdk.client import Client
from kernelfarm.sdk.results import Job


class EntryError(Exception):
    """This entry cannot be checked (no baseline, the farm refused a job, ...); the message says why."""


# The farm takes an Idempotency-Key of at most 255 printable ASCII characters without a space
# (kernelfarm/api/routes/jobs.py); the gate's key adds 46 to the run id (for its longest role).
MAX_RUN_ID_CHARS = 200
# The states after which a run's job is replaced when the run is submitted again (not "complete": a
# job that ran its budget answers for this run, with or without a verified config).
ENDED_WITHOUT_RESULT = frozenset({JobState.FAILED.value, JobState.CANCELLED.value})
# How many ended jobs of one entry and role a re-run replaces in a row before it reports the entry.
MAX_REPLACED_JOBS = 20


def run_id_problem(run_id: str) -> str | None:
    """Why ``run_id`` cannot be part of an idempotency key, or None."""
    if not all("!" <= char <= "~" for char in run_id):
        return f"{quoted(run_id)}: a run id is printable ASCII without spaces"
    if len(run_id) > MAX_RUN_ID_CHARS:
        return f"a run id of {len(run_id)} characters: at most {MAX_RUN_ID_CHARS}"
    return None


def idempotency_key(run_id: str, entry: GateEntry, role: str, pinned: BestEntry | None = None) -> str:
    """The same run, entry and role give the same key: a retried or restarted CI step gets the jobs
    it already submitted instead of new ones. The entry's content is part of it, and so is the pinned
    config a re-measurement measures: an edited entry, or a baseline or candidate export pinning another
    config, gets a fresh job rather than the farm's 409 for a key sent again with another body."""
    content = entry.model_dump_json()
    if pinned is not None:
        content += f"|{pinned.gpu_model}|{pinned.problem_key}|{pinned.config_key}"
    digest = hashlib.sha256(content.encode()).hexdigest()[:16]
    return f"kernelfarm-ci:{run_id}:{digest}:{role}"


def pinned_entry(export: BestExport, entry: GateEntry, what: str) -> BestEntry:
    """The export's entry for the gate entry's kernel, GPU model and problem."""
    if export.kernel != entry.kernel:
        raise EntryError(f"the {what} export is of kernel {export.kernel!r}, not {entry.kernel!r}")
    model = model_slug(entry.gpu)
    found = [e for e in export.entries if e.gpu_model == model
             and all(str(e.problem.get(k)) == str(v) for k, v in entry.problem.items())]  # fmt: skip
    if not found:
        raise EntryError(f"the {what} export has no config for {model} and problem {entry.problem or 'any'}")
    if len(found) > 1:
        keys = ", ".join(e.problem_key for e in found)
        raise EntryError(
            f"the {what} export has several problems matching {entry.problem}: {keys}; name the problem fully"
        )
    return found[0]


def submit_remeasure(client: Client, pinned: BestEntry, entry: GateEntry, key: str) -> Job:
    """A one-trial job that measures exactly the pinned config now."""
    return _submit(client, entry.kernel, pinned.gpu_model, pinned.problem, key, budget_trials=1, parallelism=1,
                   space={"parameters": {name: [value] for name, value in pinned.config.items()}}, seed=0)  # fmt: skip


def submit_tuning(client: Client, entry: GateEntry, problem: Mapping[str, Any], key: str) -> Job:
    options: dict[str, Any] = {"budget_trials": entry.budget_trials, "budget_seconds": entry.budget_seconds,
                               "parallelism": entry.parallelism, "strategy": entry.strategy, "seed": entry.seed,
                               "space": entry.space}  # fmt: skip
    return _submit(client, entry.kernel, model_slug(entry.gpu), problem, key, **options)


def _submit(client: Client, kernel: str, gpu_model: str, problem: Mapping[str, Any], key: str, **options: Any) -> Job:
    """The run's job under ``key``; where that job ended failed or cancelled (a re-run of the workflow
    keeps its run id, and a timed-out gate cancels what it waited for), a new one in its place, under a
    key derived from the ended job's: the re-run measures again instead of reporting the same failure
    forever, while a retried step still gets the jobs that are running or complete."""
    try:
        for _ in range(MAX_REPLACED_JOBS + 1):
            job = client.submit(kernel, gpu_model, problem, profile="none", idempotency_key=key, **options)
            if job.state not in ENDED_WITHOUT_RESULT:  # queued, running or complete: this run's job
                return job
            key = replacement_key(key, job.id)
    except ApiError as exc:
        raise EntryError(f"the farm refused the job: {exc.detail if exc.status else exc}") from None
    raise EntryError(
        f"the farm's last {MAX_REPLACED_JOBS + 1} jobs for this entry all ended {job.state}: see job {job.id}"
    )


def replacement_key(key: str, ended_job_id: str) -> str:
    """``key`` with its entry digest replaced by a digest of it and the ended job's id: as long as
    ``key`` (the farm takes at most 255 characters), the same for every re-run after that job."""
    head, _, role = key.rpartition(":")
    prefix, _, digest = head.rpartition(":")
    return f"{prefix}:{hashlib.sha256(f'{digest}:{ended_job_id}'.encode()).hexdigest()[:16]}:{role}"


def wait_all(client: Client, job_ids: list[str], deadline: float, poll: float = 1.0) -> tuple[dict[str, Job], set[str]]:
    """Every job as last seen (finished ones, and the rest as they were when the deadline passed), and
    the ids of those the deadline cancelled: nobody waits for them any more, and left running they
    would hold the farm's workers for a run that has given up on them."""
    seen: dict[str, Job] = {}
    pending = list(dict.fromkeys(job_ids))
    while pending:
        for job_id in list(pending):
            seen[job_id] = client.job(job_id)
            if seen[job_id].finished:
                pending.remove(job_id)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(poll)
    cancelled = set()
    for job_id in pending:
        try:
            client.cancel(job_id)
        except ApiError:
            continue  # the verdict still says it was unfinished; the farm's own timeouts end it
        cancelled.add(job_id)
    return seen, cancelled
