"""Run a model under torch.profiler and collect one row per operator and input shapes.

Times are *self* times: the device time of the kernels an operator launched itself, not through a
nested operator (``aten::linear`` → ``aten::addmm`` counts once, at ``aten::addmm``), so the rows
add up to the whole device time and shares sum to 1. On the CPU the self CPU time stands in.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelfarm.model_profiler.models import ModelUnderTest


@dataclass
class OpRow:
    name: str  # "aten::mm"
    input_shapes: list[list[int]]
    calls: int  # per inference
    self_us: float  # per inference, summed over calls
    flops: float  # per inference, from torch's FLOP counter (0 where it has none)
    kernels: list[str] = field(default_factory=list)
    # From the trace (None without one): the inputs' strides tell a transposed weight (x @ W.T) from a
    # plain one, and their types the element type.
    input_strides: list[list[int]] | None = None
    input_types: list[str] | None = None

    @property
    def key(self) -> str:
        return f"{self.name}{self.input_shapes}"


@dataclass
class KernelRow:
    name: str  # the device kernel's name
    calls: int  # per inference
    self_us: float  # per inference


@dataclass
class Capture:
    device: str  # "cuda" or "cpu"
    device_name: str
    latency_ms: float  # median of unprofiled runs
    latency_runs_ms: list[float]
    profiled_ms: float  # median wall time per inference while profiled
    rows: list[OpRow]
    iterations: int
    kernels: list[KernelRow] = field(default_factory=list)  # every device kernel, by name (GPU only)

    @property
    def total_self_us(self) -> float:
        return sum(row.self_us for row in self.rows)


def latency(run: Callable[[], Any], device: str, repeats: int) -> list[float]:
    """Wall time of ``repeats`` inferences, each synchronised, in ms."""
    sync = _synchronizer(device)
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        run()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def capture(mut: ModelUnderTest, *, warmup: int, iterations: int, trace_path: Path | None) -> Capture:
    """Profile ``iterations`` inferences after ``warmup`` unprofiled ones (same count timed unprofiled)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    on_gpu = mut.device.startswith("cuda")

    def run() -> Any:
        with torch.inference_mode():
            return mut.model(**mut.inputs)

    for _ in range(warmup):
        run()
    unprofiled = latency(run, mut.device, iterations)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    sync = _synchronizer(mut.device)
    # No with_flops: FLOPs come from the shapes (estimate.py), and the FLOP counter's bookkeeping is
    # CPU time that a launch-bound model pays in its profiled wall time.
    with profile(activities=activities, record_shapes=True) as prof:
        profiled = latency(run, mut.device, iterations)
    sync()
    if trace_path is not None:
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_path))
    rows = _rows(prof, iterations, on_gpu)
    if trace_path is not None:
        _add_trace_details(rows, trace_path)
    kernels = _kernel_rows(prof, iterations) if on_gpu else []
    device_name = torch.cuda.get_device_name() if on_gpu else "cpu"
    return Capture(
        device="cuda" if on_gpu else "cpu", device_name=device_name,
        latency_ms=statistics.median(unprofiled), latency_runs_ms=unprofiled,
        profiled_ms=statistics.median(profiled), rows=rows, iterations=iterations,
        kernels=kernels,
    )  # fmt: skip


def _synchronizer(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.synchronize
    return lambda: None


def _is_operator(name: str) -> bool:
    # Operators have a namespace ("aten::mm", "kernelfarm::matmul"); profiler steps, runtime calls
    # (cudaLaunchKernel) and Python ranges do not.
    return "::" in name and not name.startswith("ProfilerStep")


def _on_host(event: Any) -> bool:
    """True for host-side events (operators, ranges, runtime calls); the device's own events (the
    kernels, memsets) are already counted in the self device time of the host event that launched them."""
    return str(getattr(event, "device_type", "CPU")).endswith("CPU")


def _counts(event: Any, on_gpu: bool) -> bool:
    """Whether an event gets a row. On the GPU every host event that owns device time does (a compiled
    graph's Triton kernels are launched by a range without a namespace); on the CPU only operators,
    because Python ranges and runtime calls own CPU time too."""
    if on_gpu:
        return _on_host(event) and not event.key.startswith("ProfilerStep")
    return _is_operator(event.key)


def _self_time_us(event: Any, on_gpu: bool) -> float:
    if on_gpu:
        value = getattr(event, "self_device_time_total", None)
        if value is None:  # torch < 2.4 named it after CUDA
            value = event.self_cuda_time_total
        return float(value)
    return float(event.self_cpu_time_total)


def _rows(prof: Any, iterations: int, on_gpu: bool) -> list[OpRow]:
    kernels = _kernels_by_key(prof.events()) if on_gpu else {}
    rows = []
    for event in prof.key_averages(group_by_input_shape=True):
        if not _counts(event, on_gpu):
            continue
        self_us = _self_time_us(event, on_gpu)
        if self_us <= 0:
            continue
        shapes = [list(shape) for shape in (event.input_shapes or [])]
        key = (event.key, repr(shapes))
        rows.append(
            OpRow(
                name=event.key, input_shapes=shapes,
                calls=max(1, round(event.count / iterations)), self_us=self_us / iterations,
                flops=float(event.flops or 0) / iterations, kernels=sorted(kernels.get(key, ())),
            )
        )  # fmt: skip
    rows.sort(key=lambda row: row.self_us, reverse=True)
    return rows


def _kernel_rows(prof: Any, iterations: int) -> list[KernelRow]:
    rows = [
        KernelRow(event.key, max(1, round(event.count / iterations)), _self_time_us(event, True) / iterations)
        for event in prof.key_averages()
        if not _on_host(event) and _self_time_us(event, True) > 0
    ]
    return sorted(rows, key=lambda row: row.self_us, reverse=True)


def _kernels_by_key(events: Any) -> dict[tuple[str, str], set[str]]:
    """The device kernels each (operator, shapes) launched itself, from the raw event tree."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for event in events:
        if not _is_operator(event.name):
            continue
        key = (event.name, repr([list(shape) for shape in (event.input_shapes or [])]))
        for kernel in getattr(event, "kernels", None) or ():
            found[key].add(kernel.name)
        # Newer torch links kernels as device-side children of the launching runtime call.
        for child in event.cpu_children:
            if _is_operator(child.name):
                continue
            for grandchild in getattr(child, "cpu_children", []):
                if str(getattr(grandchild, "device_type", "")).endswith("CUDA"):
                    found[key].add(grandchild.name)
    return found


def _add_trace_details(rows: list[OpRow], trace_path: Path) -> None:
    """Strides and element types of each row's inputs, from the Chrome trace (the profiler's Python
    events carry shapes only)."""
    details: dict[tuple[str, str], tuple[list[list[int]], list[str]]] = {}
    for event in json.loads(trace_path.read_text()).get("traceEvents", []):
        args = event.get("args") or {}
        if "Input Dims" in args and "Input Strides" in args:
            key = (event.get("name", ""), repr(args["Input Dims"]))
            details.setdefault(key, (args["Input Strides"], args.get("Input type", [])))
    for row in rows:
        found = details.get((row.name, repr(row.input_shapes)))
        if found is not None:
            row.input_strides, row.input_types = found
