"""Write a sweep as a Kernel Tuner cache file (gzip): the replay data of CPU-only runs.

Readable by core.landscape.load_landscape. Failures use Kernel Tuner's markers (compile →
CompilationFailedConfig, launch → RuntimeFailedConfig, the rest → ErrorConfig) and keep the farm's
own kind in ``failure_kind``. ``problem_size`` holds the integer dimensions; ``problem`` the full
problem (dtype included).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelfarm.core.measurement import Measurement
from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.spec import KernelSpec

_MARKER = {FailureKind.COMPILE: "CompilationFailedConfig", FailureKind.LAUNCH: "RuntimeFailedConfig"}


def problem_slug(problem: Mapping[str, Any]) -> str:
    return "_".join(f"{k}{v}" for k, v in problem.items())


def entry(spec: KernelSpec, config: Mapping[str, Any], m: Measurement) -> dict[str, Any]:
    out: dict[str, Any] = {name: config[name] for name in spec.space.names}
    if m.timing is not None:
        times = [float(f"{t:.5g}") for t in m.timing.times_ms]
        out["time"] = sum(times) / len(times)  # Kernel Tuner's "time" is the mean of "times"
        out["times"] = times
        out["median"] = m.timing.median_ms
        for key in ("compile_s", "achieved_flops_per_s", "achieved_bytes_per_s", "registers", "rel_error"):
            if key in m.metrics:
                out[key] = m.metrics[key]
    else:
        assert m.failure is not None
        out["time"] = _MARKER.get(m.failure, "ErrorConfig")
        out["failure_kind"] = m.failure.value
        out["failure_message"] = (m.failure_message or "")[:300]
    return out


def write_landscape(
    path: Path,
    spec: KernelSpec,
    device_name: str,
    problem: Mapping[str, Any],
    results: Sequence[tuple[Mapping[str, Any], Measurement]],
    meta: Mapping[str, Any],
) -> Path:
    cache = {spec.space.key(config): entry(spec, config, m) for config, m in results}
    data = {
        "device_name": device_name,
        "kernel_name": spec.name,
        "problem_size": [v for v in problem.values() if isinstance(v, int)],
        "problem": dict(problem),
        "tune_params_keys": list(spec.space.names),
        "tune_params": {p.name: list(p.values) for p in spec.space.parameters},
        "objective": "time",
        "objective_higher_is_better": False,
        "meta": dict(meta),
        "cache": cache,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), compresslevel=9))
    return path
