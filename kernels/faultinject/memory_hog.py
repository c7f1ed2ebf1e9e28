"""A kernel whose inputs do not fit in the GPU's memory though its declared footprint does: the fault
injection kernel's correct copy, except that ``make_inputs`` also asks for more device memory than the
GPU has. It stands for what the declared footprint does not count (a kernel that understates it,
transients, another process on the GPU): the worker's check before compiling passes it, and the
measuring child's out-of-memory handling is what must make it a CONSTRAINT failure.

Not in the registry; the GPU tests hand it to the cuda backend by reference (:data:`REF`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kernelfarm.kernels.faultinject import kernel as fault

REF = "kernelfarm.kernels.faultinject.memory_hog:SPEC"


class MemoryHog(fault.FaultKernel):
    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        inputs = super().make_inputs(problem, seed)
        _, total = cp.cuda.runtime.memGetInfo()
        inputs["hog"] = cp.empty(total + (1 << 30), dtype=cp.uint8)  # more than the whole GPU
        return inputs


SPEC = replace(
    fault.SPEC,
    name="memory_hog",
    description="fault injection: inputs larger than the GPU's memory behind a footprint that fits",
    impls={"cuda": MemoryHog(fault.SPEC.impl("cuda", fault.FaultKernel).source)},
)
