"""Compute-, memory- or launch/latency-bound: each operator against the GPU's roofline.

The ceilings are the farm's measured ones (:class:`kernelfarm.worker.measuring.roofline.Ceilings`):
DRAM bandwidth of a large copy, SGEMM and tensor-core GEMM rates.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelfarm.worker.measuring.roofline import Ceilings

# Under this many microseconds per call, launching and synchronising dominate unless the roofline
# says the work itself needs most of that time: such an operator is launch/latency-bound.
LAUNCH_BOUND_US = 10.0
TENSOR_DTYPES = frozenset({"bfloat16", "float16"})


@dataclass(frozen=True)
class Verdict:
    bound: str  # "compute", "memory" or "launch"
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    fraction_of_peak: float  # of the roof that binds it (compute or memory); 0 for launch-bound
    intensity: float
    ridge: float


def classify(flops: float, bytes_moved: float, seconds_per_call: float, ceilings: Ceilings,
             tensor_cores: bool) -> Verdict:  # fmt: skip
    """The bound of an operator taking ``seconds_per_call`` for ``flops`` and ``bytes_moved`` per call."""
    peak = ceilings.tensor_flops if tensor_cores else ceilings.fp32_flops
    bandwidth = ceilings.dram_bytes_per_s
    ridge = peak / bandwidth
    intensity = flops / bytes_moved if bytes_moved > 0 else float("inf")
    achieved_flops = flops / seconds_per_call if seconds_per_call > 0 else 0.0
    achieved_bytes = bytes_moved / seconds_per_call if seconds_per_call > 0 else 0.0
    roof_seconds = max(flops / peak, bytes_moved / bandwidth)
    if seconds_per_call * 1e6 < LAUNCH_BOUND_US and roof_seconds < 0.5 * seconds_per_call:
        return Verdict("launch", achieved_flops, achieved_bytes, 0.0, intensity, ridge)
    if intensity >= ridge:
        return Verdict("compute", achieved_flops, achieved_bytes, achieved_flops / peak, intensity, ridge)
    return Verdict("memory", achieved_flops, achieved_bytes, achieved_bytes / bandwidth, intensity, ridge)
