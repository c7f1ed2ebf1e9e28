"""``t4``: a job's trials in the T4 "Open Autotuning Results Schema" (version 1.0.0, the schema
Kernel Tuner 1.5.0 ships as ``kernel_tuner/schema/T4/1.0.0/results-schema.json``).

One result per finished trial: its configuration, the objective ``time`` (milliseconds, as the
metadata says), every repetition under ``times.runtimes``, the validity as T4 names it and the
correctness of the output (1 verified, 0 not).
"""

from __future__ import annotations

import json
from typing import Any

from kernelfarm.core.exports.model import TrialRow, TrialsExport

T4_VERSION = "1.0.0"
# Our failure kinds → T4's invalidity values.
INVALIDITY = {
    "compile": "compile", "launch": "runtime", "crash": "runtime", "timeout": "timeout",
    "wrong_result": "correctness", "constraint": "constraints",
}  # fmt: skip


def write(export: TrialsExport) -> str:
    results = [_result(export, t) for t in export.trials if t.state in ("complete", "failed")]
    document = {
        "schema_version": T4_VERSION,
        "metadata": {"timeunit": "milliseconds", "kernel": export.kernel, "device": export.gpu_name or export.gpu_model,
                     "problem": export.problem, "job_id": export.job_id},
        "results": results,
    }  # fmt: skip
    return json.dumps(document, indent=1) + "\n"


def _result(export: TrialsExport, trial: TrialRow) -> dict[str, Any]:
    complete = trial.state == "complete" and trial.time_ms is not None
    times: dict[str, Any] = {"runtimes": list(trial.times_ms or [])}
    if trial.compile_seconds is not None:
        times["compilation_time"] = trial.compile_seconds * 1000.0
    result: dict[str, Any] = {
        "configuration": {name: trial.config[name] for name in export.parameters if name in trial.config},
        "objectives": ["time"],
        "times": times,
        "invalidity": "correct" if complete else INVALIDITY.get(trial.failure_kind or "", "runtime"),
        "correctness": 1 if complete and trial.verified else 0,
        "measurements": [{"name": "time", "value": trial.time_ms, "unit": "ms"}] if complete else [],
    }
    if trial.finished_at is not None:
        result["timestamp"] = trial.finished_at.isoformat()
    return result
