"""Fault injection: not in the registry (no spec.py); the GPU tests pass it to the cuda backend by
reference (:data:`REF`), so the backend's child processes can import it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_kernel import CudaKernel, Launch
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.spec import KernelSpec, ProblemParam
from kernelfarm.kernels.tolerance import Tolerance

REF = "kernelfarm.kernels.faultinject.kernel:SPEC"
MODES = {"ok": 0, "compile": 1, "launch": 2, "crash": 3, "timeout": 4, "wrong_result": 5, "wrong_on_some_inputs": 6}


class FaultKernel(CudaKernel):
    entry = "kf_fault"

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        return {"MODE": int(config["MODE"])}

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        threads = 2048 if config["MODE"] == MODES["launch"] else 256
        return Launch(grid=((int(problem["n"]) + 255) // 256, 1, 1), block=(threads, 1, 1))

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        n = int(problem["n"])
        return {
            "x": cp.random.default_rng(seed).random(n, dtype=cp.float32) + 0.5,
            "y": cp.empty(n, dtype=cp.float32),
            "never": cp.ones(1, dtype=cp.int32),
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        import numpy as np

        return (buffers["x"], buffers["y"], np.int32(problem["n"]), buffers["never"])

    def outputs(self) -> Sequence[str]:
        return ("y",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        return {"y": buffers["x"].copy()}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        return Tolerance.derived(1e-6, "float32", 1)  # an exact copy

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 0.0

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        return 8.0 * int(problem["n"])

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        return 12 * int(problem["n"]) + 4  # fp32 x, y, the reference y; int32 never


SPEC = KernelSpec(
    name="faultinject",
    version=1,
    description="test kernel that fails on purpose (compile, launch, crash, hang, wrong result)",
    space=SearchSpace((Parameter("MODE", tuple(MODES.values())),)),
    problem_params=(ProblemParam("n", maximum=1 << 28),),
    default_problem={"n": 1 << 20},
    impls={"cuda": FaultKernel(CudaSource.from_file(Path(__file__).with_name("fault.cu")))},
)
