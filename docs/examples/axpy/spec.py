"""The worked example of docs/EXTENDING.md: out = a * x + y in fp32, tuned over block size and items per thread.

Copied into ``kernels/axpy/`` (this file and ``axpy.cu``) it joins the catalogue: the registry finds the
folder, and tests/kernels/test_kernel_contract.py checks it with every other kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_kernel import CudaKernel, Launch
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.spec import KernelSpec, ProblemParam
from kernelfarm.kernels.tolerance import Tolerance

SCALE = 1.5  # the ``a`` of a * x + y


class Axpy(CudaKernel):
    entry = "axpy"  # the extern "C" function; ncu's kernel filter is built from it

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        return {"BLOCK": int(config["BLOCK"]), "ITEMS": int(config["ITEMS"])}

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        per_block = int(config["BLOCK"]) * int(config["ITEMS"])
        blocks = -(-int(problem["n"]) // per_block)  # ceil: the kernel guards the ragged tail
        return Launch(grid=(blocks, 1, 1), block=(int(config["BLOCK"]), 1, 1))

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        rng, n = cp.random.default_rng(seed), int(problem["n"])
        return {
            "x": rng.random(n, dtype=cp.float32) - 0.5,
            "y": rng.random(n, dtype=cp.float32) - 0.5,
            "out": cp.empty(n, dtype=cp.float32),  # separate from y: outputs are poisoned before each run
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        import numpy as np

        return (buffers["x"], buffers["y"], buffers["out"], np.float32(SCALE), np.int32(problem["n"]))

    def outputs(self) -> Sequence[str]:
        return ("out",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        import cupy as cp

        return {"out": (SCALE * buffers["x"].astype(cp.float64) + buffers["y"]).astype(cp.float32)}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        return Tolerance.derived(1e-6, "float32", 1)  # one rounding (fused multiply-add) per element

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 2.0 * int(problem["n"])

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        return 12.0 * int(problem["n"])  # read x and y, write out

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        return 16 * int(problem["n"])  # fp32 x, y, out and the reference out: what the farm's memory check counts


SPEC = KernelSpec(
    name="axpy",
    version=1,
    description="out = a * x + y, fp32 (the worked example of docs/EXTENDING.md)",
    # 320 configs: the contract suite asks for a space rich enough to be worth a search.
    space=SearchSpace(
        parameters=(
            Parameter("BLOCK", tuple(range(32, 1025, 32))),
            Parameter("ITEMS", (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)),
        )
    ),
    problem_params=(ProblemParam("n", maximum=1 << 28),),
    default_problem={"n": 1 << 24},
    impls={"cuda": Axpy(CudaSource.from_file(Path(__file__).with_name("axpy.cu")))},
    test_problems=({"n": 100_003},),  # not a multiple of any block: exercises the tail guard
)
