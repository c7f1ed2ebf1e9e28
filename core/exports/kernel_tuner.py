"""``kernel_tuner``: a job's trials as a Kernel Tuner cache file, which Kernel Tuner loads to continue
tuning or to replay (``tune_kernel(..., cache=path, simulation_mode=True)``).

The cache key is the config's values comma-joined in parameter order: the farm's own config key.
Only finished trials are written; a failed one carries Kernel Tuner's error marker as its time.
Times are milliseconds, as Kernel Tuner's.
"""

from __future__ import annotations

import json
from typing import Any

from kernelfarm.core.errors import NotFound
from kernelfarm.core.exports.model import TrialRow, TrialsExport

# Our failure kinds → the marker Kernel Tuner writes for them in a cache.
ERROR_MARKERS = {"compile": "CompilationFailedConfig", "constraint": "InvalidConfig"}
RUNTIME_FAILURE = "RuntimeFailedConfig"


def integer_problem_size(export: TrialsExport) -> list[int]:
    """Kernel Tuner's ``problem_size``: the integer dimensions of the problem, in order."""
    return [v for v in export.problem.values() if isinstance(v, int) and not isinstance(v, bool)]


def write(export: TrialsExport) -> str:
    """The cache file's text.

    Raises:
        NotFound: no trial of the job has finished (queued or running, or cancelled before any did).
            Kernel Tuner cannot continue from a cache without an entry: it reopens a cache for
            appending by dropping its closing ``}\n}`` and adding a comma, which gives ``"cache": {,``.
    """
    cache: dict[str, dict[str, Any]] = {}
    for trial in export.trials:
        if trial.state not in ("complete", "failed"):
            continue
        cache[trial.config_key] = _entry(export, trial)
    if not cache:
        raise NotFound(
            f"job {export.job_id}: none of its {len(export.trials)} trials has finished (complete or failed), "
            "and a Kernel Tuner cache needs one (the csv export lists every trial)"
        )
    document = {
        "device_name": export.gpu_name or export.gpu_model,
        "kernel_name": export.kernel,
        "problem_size": integer_problem_size(export),
        "tune_params_keys": list(export.parameters),
        "tune_params": export.parameters,
        "objective": "time",
        "cache": cache,
    }
    return json.dumps(document, indent=1) + "\n"


def _entry(export: TrialsExport, trial: TrialRow) -> dict[str, Any]:
    entry: dict[str, Any] = {name: trial.config[name] for name in export.parameters if name in trial.config}
    if trial.state == "complete" and trial.time_ms is not None:
        entry["time"] = trial.time_ms
        entry["times"] = list(trial.times_ms or [trial.time_ms])
    else:
        entry["time"] = ERROR_MARKERS.get(trial.failure_kind or "", RUNTIME_FAILURE)
    compile_ms = (trial.compile_seconds or 0.0) * 1000.0
    entry |= {
        "compile_time": compile_ms, "verification_time": 0, "benchmark_time": sum(trial.times_ms or []),
        "strategy_time": 0, "framework_time": 0,
        "timestamp": trial.finished_at.isoformat() if trial.finished_at else "",
    }  # fmt: skip
    return entry
