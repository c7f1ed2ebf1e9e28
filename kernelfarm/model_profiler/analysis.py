"""From a capture and the GPU's ceilings to the report's operator table: shares, rates, classes, hints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kernelfarm.model_profiler.capture import Capture
from kernelfarm.model_profiler.classify import TENSOR_DTYPES, classify
from kernelfarm.model_profiler.estimate import ELEMENTWISE_OPS, MATMUL_OPS, estimate, gemm_shape
from kernelfarm.worker.measuring.roofline import Ceilings

ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# A GEMM under this fraction of the tensor-core peak is worth tuning.
GEMM_TUNE_BELOW = 0.6
# A GEMM dimension that is not a multiple of this defeats the vendor library's vectorised, aligned
# tiles (cuBLAS falls back to old kernels for N = 50257): worth naming in the hint.
GEMM_ALIGNMENT = 16
# Per-operator hints are given for operators with at least this share of the time.
HINT_MIN_SHARE = 0.02


@dataclass
class OperatorReport:
    name: str
    input_shapes: list[list[int]]
    calls: int
    self_ms: float  # per inference
    share: float  # of the profiled self time
    flops: float  # per inference
    bytes: float  # per inference (minimum traffic)
    tflops_per_s: float
    gb_per_s: float
    bound: str
    fraction_of_peak: float
    kernels: list[str]
    hint: str | None = None
    input_strides: list[list[int]] | None = None


@dataclass
class ProfileReport:
    model: str
    dtype: str
    batch: int
    seq: int
    device: str
    device_name: str
    latency_ms: float  # median wall time of an unprofiled inference
    # Median wall time of an inference in the timed pass (the one the table's times come from; see
    # capture.py): the profiler's own cost included.
    profiled_ms: float
    profiling_overhead: float  # profiled / unprofiled - 1
    # Per inference, the time the table accounts for: the device's busy time in kernels on a GPU, host
    # self time of the operators on a CPU.
    accounted_ms: float
    ceilings: dict[str, Any]
    operators: list[OperatorReport]
    hints: list[str] = field(default_factory=list)
    # How the figures were taken and where the rest of the latency goes (timing_summary()).
    timing: dict[str, Any] | None = None
    compile_ab: dict[str, Any] | None = None
    tuning: list[dict[str, Any]] | None = None
    swap: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def analyse(capture: Capture, ceilings: Ceilings, *, model: str, dtype: str, batch: int, seq: int) -> ProfileReport:
    total_us = capture.total_self_us or 1.0
    element_bytes = ELEMENT_BYTES[dtype]
    operators = []
    for row in capture.rows:
        per_call_flops, per_call_bytes = estimate(row.name, row.input_shapes, row.flops / row.calls, element_bytes)
        seconds_per_call = row.self_us * 1e-6 / row.calls
        tensor = dtype in TENSOR_DTYPES and row.name in MATMUL_OPS
        verdict = classify(per_call_flops, per_call_bytes, seconds_per_call, ceilings, tensor)
        report = OperatorReport(
            name=row.name, input_shapes=row.input_shapes, calls=row.calls, self_ms=row.self_us / 1e3,
            share=row.self_us / total_us, flops=per_call_flops * row.calls, bytes=per_call_bytes * row.calls,
            tflops_per_s=verdict.achieved_flops_per_s / 1e12, gb_per_s=verdict.achieved_bytes_per_s / 1e9,
            bound=verdict.bound, fraction_of_peak=verdict.fraction_of_peak, kernels=row.kernels,
            input_strides=row.input_strides,
        )  # fmt: skip
        report.hint = operator_hint(report, capture.device) if report.share >= HINT_MIN_SHARE else None
        operators.append(report)
    return ProfileReport(
        model=model, dtype=dtype, batch=batch, seq=seq, device=capture.device, device_name=capture.device_name,
        latency_ms=capture.latency_ms, profiled_ms=capture.profiled_ms,
        profiling_overhead=capture.profiling_overhead,
        accounted_ms=capture.total_self_us / 1e3,
        ceilings=asdict(ceilings), operators=operators, hints=model_hints(operators, capture.device),
        timing=timing_summary(capture),
    )  # fmt: skip


def timing_summary(capture: Capture) -> dict[str, Any] | None:
    """The timed pass, the attribution, and the latency split into what the table accounts for and the rest.

    On a GPU, the timed inference's wall time is the device's busy time (the table), the device's idle
    gaps between its first and last kernel (the host did not launch fast enough: launch-bound), and the
    time outside that span (Python before the first launch, the launch latency, the final synchronisation).
    """
    timing = capture.timing
    if timing is None:
        return None
    busy_ms = capture.total_self_us / 1e3
    summary: dict[str, Any] = asdict(timing) | {
        "profiled_overhead": capture.profiling_overhead,
        "pooled_overhead": capture.profiled_ms / capture.latency_ms - 1 if capture.latency_ms else 0.0,
        "recorded_overhead": timing.recorded_ms / capture.latency_ms - 1 if capture.latency_ms else 0.0,
        "accounted_share_of_latency": busy_ms / capture.latency_ms if capture.latency_ms else 0.0,
        "not_accounted_ms": capture.latency_ms - busy_ms,
    }
    if timing.device_span_ms is not None:
        summary["device_idle_in_span_ms"] = max(0.0, timing.device_span_ms - busy_ms)
        summary["outside_span_ms"] = capture.profiled_ms - timing.device_span_ms
    return summary


def operator_hint(op: OperatorReport, device: str) -> str | None:
    """Why this operator is slow and what to do, or None when nothing stands out."""
    percent = round(op.fraction_of_peak * 100)
    gemm = gemm_shape(op.name, op.input_shapes) if op.name in MATMUL_OPS else None
    if gemm is not None and op.bound == "compute" and op.fraction_of_peak < GEMM_TUNE_BELOW:
        odd = [f"{label} = {value}" for label, value in (("M", gemm.m), ("N", gemm.n), ("K", gemm.k))
               if value % GEMM_ALIGNMENT]  # fmt: skip
        why = f" ({', '.join(odd)} not a multiple of {GEMM_ALIGNMENT})" if odd else ""
        return f"GEMM {gemm.m}x{gemm.n}x{gemm.k} runs at {percent} % of peak{why}: tune"
    if op.bound == "launch":
        remedy = "CUDA graphs or fuse" if device == "cuda" else "fuse or batch"
        return f"launch/latency-bound ({op.self_ms * 1e3 / op.calls:.1f} µs per call): {remedy}"
    if op.bound == "memory" and op.fraction_of_peak < 0.5 and op.share >= 0.01:
        return f"memory-bound at {percent} % of DRAM bandwidth: tune or fuse"
    return None


def model_hints(operators: list[OperatorReport], device: str) -> list[str]:
    """Hints about the model as a whole (chains of small operators, launch overhead)."""
    hints = []
    elementwise = [op for op in operators if op.name in ELEMENTWISE_OPS and op.bound != "compute"]
    share = sum(op.share for op in elementwise)
    if share >= 0.05:
        calls = sum(op.calls for op in elementwise)
        hints.append(
            f"chain of elementwise ops: {calls} calls take {share:.0%} of the time: fuse or compile (torch.compile)"
        )
    launch = [op for op in operators if op.bound == "launch"]
    if launch and sum(op.share for op in launch) >= 0.1:
        remedy = "CUDA graphs" if device == "cuda" else "fewer, larger operators"
        hints.append(f"launch-bound: {sum(op.share for op in launch):.0%} of the time in short calls: {remedy}")
    gemms = [(op, hint) for op in operators if (hint := operator_hint(op, device)) and hint.startswith("GEMM")]
    if gemms:
        top, hint = max(gemms, key=lambda pair: pair[0].share)
        hints.append(f"{hint} ({top.share:.0%} of the time)")
    return hints
