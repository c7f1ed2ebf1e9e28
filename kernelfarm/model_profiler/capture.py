"""Run a model under torch.profiler in two passes and collect one row per operator and input shapes.

The *timed* pass records as little as it can, so that the profiled inferences run about as fast as
unprofiled ones: on a GPU only the device's activity (CUPTI's kernel, copy and set records; no host
operators, so nothing is added to the launching host's work but the records themselves); on the CPU
the operators without their shapes. The *recorded* pass then runs one inference with every operator
and its input shapes, which tells for each kernel the operator that launched it (attribution.py maps
the timed events onto it). The table's times are the timed pass's.

Times are *self* times: the device time of the kernels an operator launched itself, not through a
nested operator (``aten::linear`` → ``aten::addmm`` counts once, at ``aten::addmm``), so the rows
add up to the whole device time and shares sum to 1. On the CPU the self CPU time stands in.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelfarm.model_profiler.attribution import Attribution, Owner, RecordedEvent, TimedEvent, attribute
from kernelfarm.model_profiler.models import ModelError, ModelUnderTest, exception_line
from kernelfarm.model_profiler.output import OutputError, write_atomically

# Inferences run inside the timed profiler session before the timed ones: the session's first
# inference pays one-time costs (CUPTI's buffers, the first records) that are no part of the figure.
SESSION_WARMUP = 1
# Timed sessions, each between two unprofiled blocks. The H100 host's speed for eager GPT-2 shifts by up to
# half for spells of about a second (unprofiled blocks at 10 and at 16 ms minutes apart, and within one
# capture): with 3 rounds the pooled medians gave overheads from -14 % to +16 % in three runs of the same
# command. More, shorter rounds, each compared with its own neighbours (paired_overhead), follow the spells.
ROUNDS = 6
# Whole sessions run and thrown away before the timed ones. On the H100 (torch 2.11, CUPTI 13) the
# first two kernels-only sessions of a process ran 60-90 % slower than unprofiled inferences, and so did
# the unprofiled block right after the first; the third ran 5-10 % slower (run2 of
# benchmarks/profiler/results). The discarded sessions take those first sessions' costs out of the figure.
DISCARDED_SESSIONS = 2


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
class Timing:
    """How the figures were taken: what the timed pass recorded and how its events found their operators."""

    timed_pass: str  # what the timed profiler session recorded
    attribution: str  # "by order", "by name", or how else the rows were made
    warmup: int  # unprofiled inferences before anything was timed
    iterations: int  # inferences in each block, unprofiled or timed
    rounds: int  # timed sessions (ROUNDS), each between two unprofiled blocks
    discarded_sessions: int  # whole timed-pass sessions run and thrown away before the timed ones
    unprofiled_runs_ms: list[float]
    profiled_runs_ms: list[float]
    recorded_ms: float  # wall time of the recorded inference (operators and shapes)
    device_span_ms: float | None  # median, per timed inference: first kernel's start to last one's end


@dataclass
class Capture:
    device: str  # "cuda" or "cpu"
    device_name: str
    latency_ms: float  # median of unprofiled runs
    latency_runs_ms: list[float]
    profiled_ms: float  # median wall time per inference while profiled by the timed pass
    rows: list[OpRow]
    iterations: int
    kernels: list[KernelRow] = field(default_factory=list)  # every device kernel, by name (GPU only)
    timing: Timing | None = None
    paired_overhead: float | None = None  # see paired_overhead(); None without timed sessions

    @property
    def profiling_overhead(self) -> float:
        """The profiled run's cost over the unprofiled one: paired by round where there were timed
        sessions, else the ratio of the two medians."""
        if self.paired_overhead is not None:
            return self.paired_overhead
        return self.profiled_ms / self.latency_ms - 1 if self.latency_ms else 0.0

    @property
    def total_self_us(self) -> float:
        return sum(row.self_us for row in self.rows)


def paired_overhead(unprofiled: list[float], profiled: list[float], iterations: int) -> float | None:
    """The profiling overhead, round by round: each timed session's median against the median of the two
    unprofiled blocks around it (U P U P ... U, ``iterations`` inferences each), then the median of those
    ratios, minus one. A host that changes speed between rounds moves a session and its neighbours
    together, where the pooled medians would mix a fast spell's blocks with a slow spell's sessions.
    None if the runs are not in that shape."""
    rounds = len(profiled) // iterations if iterations else 0
    if rounds == 0 or len(profiled) != rounds * iterations or len(unprofiled) != (rounds + 1) * iterations:
        return None
    ratios = []
    for i in range(rounds):
        session = profiled[i * iterations : (i + 1) * iterations]
        around = unprofiled[i * iterations : (i + 2) * iterations]
        ratios.append(statistics.median(session) / statistics.median(around))
    return statistics.median(ratios) - 1


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
    """``warmup`` unprofiled inferences (at least one: a forward that raises is a ModelError) and
    ``DISCARDED_SESSIONS`` timed-pass sessions thrown away; then
    blocks of ``iterations`` inferences, unprofiled and in the timed pass by turns (U P U P U P U:
    ``ROUNDS`` timed sessions between ``ROUNDS + 1`` unprofiled blocks, so that a host that speeds up or
    slows down meanwhile weighs on both figures alike); then one recorded inference."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    on_gpu = mut.device.startswith("cuda")

    def run() -> Any:
        with torch.inference_mode():
            return mut.model(**mut.inputs)

    light_activities = [ProfilerActivity.CUDA] if on_gpu else [ProfilerActivity.CPU]
    try:  # the first warmup inference (one more with warmup=0): a model that cannot run is said in one line
        run()
    except Exception as exc:  # the user's model: whatever its forward raises (a wrong input, out of memory)
        raise ModelError(f"{mut.name}: the model's forward raised {exception_line(exc)}") from None
    for _ in range(warmup - 1):
        run()
    for _ in range(DISCARDED_SESSIONS):
        with profile(activities=light_activities):
            latency(run, mut.device, SESSION_WARMUP + iterations)
        gc.collect()
    unprofiled = latency(run, mut.device, iterations)
    profiled: list[float] = []
    sessions: list[list[TimedEvent]] = []
    for _ in range(ROUNDS):
        # No with_flops: FLOPs come from the shapes (estimate.py), and the FLOP counter's bookkeeping is
        # host time that a launch-bound model pays in its profiled wall time.
        with profile(activities=light_activities) as light:
            latency(run, mut.device, SESSION_WARMUP)
            profiled += latency(run, mut.device, iterations)
        sessions.append(_timed_kernels(light) if on_gpu else _timed_operators(light))
        # the session's parsed events are many small objects: collected here, not in the next timed block
        gc.collect()
        unprofiled += latency(run, mut.device, iterations)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities, record_shapes=True) as full:
        recorded_ms = latency(run, mut.device, 1)[0]
    if trace_path is not None:
        try:
            trace_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot make the folder {trace_path.parent}: {exc.strerror or exc}") from None
        write_atomically(trace_path, lambda tmp: full.export_chrome_trace(str(tmp)))

    recorded, ops = _recorded_kernels(full) if on_gpu else _recorded_operators(full)
    timed_pass = "device activity only (kernels, copies, sets)" if on_gpu else "operators without shapes"
    if on_gpu and not any(sessions) and recorded:
        # The kernels-only sessions saw nothing (a torch or CUPTI that needs host operators to trace the
        # device): the recorded inference's kernels are the times then, and its wall time the profiled one.
        sessions = [[TimedEvent(e.name, e.us) for e in recorded]]
        result = attribute(sessions, inferences=1, skip=0, recorded=recorded)
        timed_pass = "none (the kernels-only pass saw no kernels): the recorded inference's"
        profiled = [recorded_ms]
    else:
        result = attribute(sessions, inferences=iterations, skip=SESSION_WARMUP, recorded=recorded)
    rows = _rows(result, ops, recorded if on_gpu else [])
    if trace_path is not None:
        _add_trace_details(rows, trace_path)
    kernels = (
        sorted(
            (KernelRow(name, result.calls_per_event[name], us) for name, us in result.per_event_us.items() if us > 0),
            key=lambda row: row.self_us,
            reverse=True,
        )
        if on_gpu
        else []
    )
    spans = result.spans_us
    timing = Timing(
        timed_pass=timed_pass, attribution=result.method, warmup=warmup, iterations=iterations,
        rounds=len(sessions), discarded_sessions=DISCARDED_SESSIONS,
        unprofiled_runs_ms=unprofiled, profiled_runs_ms=profiled,
        recorded_ms=recorded_ms, device_span_ms=statistics.median(spans) / 1e3 if spans else None,
    )  # fmt: skip
    return Capture(
        device="cuda" if on_gpu else "cpu", device_name=torch.cuda.get_device_name() if on_gpu else "cpu",
        latency_ms=statistics.median(unprofiled), latency_runs_ms=unprofiled,
        profiled_ms=statistics.median(profiled), rows=rows, iterations=iterations, kernels=kernels, timing=timing,
        paired_overhead=paired_overhead(unprofiled, profiled, iterations) if len(profiled) > 1 else None,
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


def _on_device(event: Any) -> bool:
    return str(event.device_type()).endswith("CUDA")


def _shapes_text(shapes: Any) -> str:
    return repr([list(shape) for shape in (shapes or [])])


@dataclass
class _OpInfo:
    shapes: list[list[int]]
    calls: int  # in the recorded inference


def _timed_kernels(prof: Any) -> list[TimedEvent]:
    """The device's events of the timed pass in launch order (start time: one stream runs them in order)."""
    events = sorted((e for e in prof.profiler.kineto_results.events() if _on_device(e)), key=lambda e: e.start_ns())
    return [TimedEvent(e.name(), (e.end_ns() - e.start_ns()) / 1e3, e.start_ns() / 1e3, e.end_ns() / 1e3)
            for e in events]  # fmt: skip


def _recorded_kernels(prof: Any) -> tuple[list[RecordedEvent], dict[Owner, _OpInfo]]:
    """The recorded inference's device events in launch order, each with the host event that launched it:
    the innermost operator (or range: a compiled graph launches its kernels from one) open at the launch,
    which the device event names by its linked correlation id."""
    raw = list(prof.profiler.kineto_results.events())
    hosts: dict[int, Any] = {}
    ops: dict[Owner, _OpInfo] = {}
    for event in raw:
        if _on_device(event) or event.linked_correlation_id() != 0:
            continue  # device events and runtime calls (cudaLaunchKernel) are linked to a host event
        hosts[event.correlation_id()] = event
        if _is_operator(event.name()):
            key = (event.name(), _shapes_text(event.shapes()))
            info = ops.setdefault(key, _OpInfo([list(s) for s in (event.shapes() or [])], 0))
            info.calls += 1
    recorded = []
    for event in sorted((e for e in raw if _on_device(e)), key=lambda e: e.start_ns()):
        host = hosts.get(event.linked_correlation_id())
        owner = (host.name(), _shapes_text(host.shapes())) if host is not None else (event.name(), "[]")
        if host is not None and owner not in ops:  # a range, not an operator (a compiled graph's call)
            ops[owner] = _OpInfo([list(s) for s in (host.shapes() or [])], 1)
        recorded.append(RecordedEvent(event.name(), (event.end_ns() - event.start_ns()) / 1e3, owner))
    return recorded, ops


def _operator_events(prof: Any) -> list[Any]:
    return [e for e in prof.events() if _is_operator(e.name) and not e.is_async]


def _timed_operators(prof: Any) -> list[TimedEvent]:
    return [TimedEvent(e.name, float(e.self_cpu_time_total)) for e in _operator_events(prof)]


def _recorded_operators(prof: Any) -> tuple[list[RecordedEvent], dict[Owner, _OpInfo]]:
    recorded: list[RecordedEvent] = []
    ops: dict[Owner, _OpInfo] = {}
    for event in _operator_events(prof):
        owner = (event.name, _shapes_text(event.input_shapes))
        info = ops.setdefault(owner, _OpInfo([list(s) for s in (event.input_shapes or [])], 0))
        info.calls += 1
        recorded.append(RecordedEvent(event.name, float(event.self_cpu_time_total), owner))
    return recorded, ops


def _rows(result: Attribution, ops: dict[Owner, _OpInfo], launches: list[RecordedEvent]) -> list[OpRow]:
    """One row per owner; ``launches`` (the recorded kernels, GPU only) name each row's kernels."""
    kernels: dict[Owner, set[str]] = defaultdict(set)
    for launch in launches:
        kernels[launch.owner].add(launch.name)
    rows = []
    for owner, us in result.per_owner_us.items():
        if us <= 0:
            continue
        info = ops.get(owner)
        calls = info.calls if info is not None else result.calls_per_event.get(owner[0], 1)
        shapes = info.shapes if info is not None else []
        rows.append(OpRow(name=owner[0], input_shapes=shapes, calls=max(1, calls), self_us=us, flops=0.0,
                          kernels=sorted(kernels.get(owner, ()))))  # fmt: skip
    rows.sort(key=lambda row: row.self_us, reverse=True)
    return rows


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
