"""torch.compile A/B: eager against compiled latency, the compile time, and the per-operator change."""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

from kernelfarm.model_profiler.capture import Capture, capture, latency
from kernelfarm.model_profiler.models import ModelUnderTest


def compile_ab(mut: ModelUnderTest, eager: Capture, *, iterations: int, top: int = 10) -> dict[str, Any]:
    """Compile the model, time it like the eager run, and profile it for the per-operator difference."""
    import torch

    compiled_model = torch.compile(mut.model)
    sync = torch.cuda.synchronize if mut.device.startswith("cuda") else (lambda: None)
    start = time.perf_counter()
    with torch.inference_mode():
        compiled_model(**mut.inputs)
    sync()
    compile_s = time.perf_counter() - start
    compiled = replace(mut, model=compiled_model)
    with torch.inference_mode():
        runs = latency(lambda: compiled_model(**mut.inputs), mut.device, iterations)
    profile = capture(compiled, warmup=1, iterations=iterations, trace_path=None)
    eager_ms, compiled_ms = eager.latency_ms, statistics.median(runs)
    return {
        "eager_ms": eager_ms, "compiled_ms": compiled_ms, "speedup": eager_ms / compiled_ms,
        "compile_s": compile_s, "per_operator": per_operator_difference(eager, profile, top),
    }  # fmt: skip


def per_operator_difference(eager: Capture, compiled: Capture, top: int) -> list[dict[str, Any]]:
    """Self time per operator, eager against compiled, largest changes first (ms per inference).

    The compiled side is counted per operator where an operator still launches its kernels (a GEMM
    left to cuBLAS stays ``aten::mm``) and per kernel for the fused kernels the compiled graph launches
    itself (``triton_poi_fused_…``); eager's elementwise operators then show as gone (0 ms compiled).
    """
    return _difference(_by_operator(eager), _by_operator(compiled), top)


def _by_operator(capture: Capture) -> dict[str, float]:
    times: dict[str, float] = defaultdict(float)
    claimed: set[str] = set()
    for row in capture.rows:
        if "::" in row.name:
            times[row.name] += row.self_us / 1e3
            claimed.update(row.kernels)
    if capture.kernels:
        for kernel in capture.kernels:
            if kernel.name not in claimed:
                times[kernel.name] += kernel.self_us / 1e3
    else:  # no kernel rows (the CPU, or a profile without them): the remaining host rows stand for themselves
        for row in capture.rows:
            if "::" not in row.name:
                times[_host_range(row.name)] += row.self_us / 1e3
    return times


def _host_range(name: str) -> str:
    """A readable name for a host range that owns device time: Inductor's "## Call CompiledFxGraph <hash> ##"
    is the compiled graph launching its fused kernels."""
    return "compiled graph (its fused kernels)" if name.startswith("## Call CompiledFxGraph") else name


def _difference(before: dict[str, float], after: dict[str, float], top: int) -> list[dict[str, Any]]:
    names = set(before) | set(after)
    changes = sorted(names, key=lambda n: abs(before.get(n, 0.0) - after.get(n, 0.0)), reverse=True)
    return [{"operator": n, "eager_ms": before.get(n, 0.0), "compiled_ms": after.get(n, 0.0)} for n in changes[:top]]
