"""FP32 matrix product on the SIMT cores: tiled in shared memory, register-blocked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_kernel import CudaKernel, Launch
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.spec import KernelSpec, ProblemParam
from kernelfarm.kernels.tolerance import Tolerance

SHARED_LIMIT = 48 * 1024  # static shared memory; no opt-in needed

SPACE = SearchSpace(
    parameters=(
        Parameter("BM", (32, 64, 128, 256)),
        Parameter("BN", (32, 64, 128, 256)),
        Parameter("BK", (8, 16, 32)),
        Parameter("TM", (4, 8, 16)),
        Parameter("TN", (4, 8, 16)),
        Parameter("PREFETCH", (0, 1)),
        Parameter("PAD", (0, 4)),
        Parameter("GROUP_M", (1, 8)),
    ),
    constraints=(
        "(BM // TM) * (BN // TN) >= 64",
        "(BM // TM) * (BN // TN) <= 1024",
        "(BM * BK // 4) % ((BM // TM) * (BN // TN)) == 0",
        "(BK * BN // 4) % ((BM // TM) * (BN // TN)) == 0",
        "(1 + PREFETCH) * BK * (BM + PAD + BN) * 4 <= 49152",
        "TM * TN <= 128",  # accumulators beyond ~128 registers per thread spill
        "M % BM == 0",
        "N % BN == 0",
        "K % BK == 0",
    ),
    context_names=frozenset({"M", "N", "K"}),
)


class MatmulFp32(CudaKernel):
    entry = "kf_matmul_fp32"

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        return {**{k: int(problem[k]) for k in ("M", "N", "K")}, **{k: int(v) for k, v in config.items()}}

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        blocks = (int(problem["M"]) // int(config["BM"])) * (int(problem["N"]) // int(config["BN"]))
        threads = (int(config["BM"]) // int(config["TM"])) * (int(config["BN"]) // int(config["TN"]))
        return Launch(grid=(blocks, 1, 1), block=(threads, 1, 1))

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        rng = cp.random.default_rng(seed)
        return {
            "A": rng.random((m, k), dtype=cp.float32) * 2 - 1,
            "B": rng.random((k, n), dtype=cp.float32) * 2 - 1,
            "C": cp.empty((m, n), dtype=cp.float32),
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        return (buffers["A"], buffers["B"], buffers["C"])

    def outputs(self) -> Sequence[str]:
        return ("C",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        import cupy as cp

        return {"C": cp.matmul(buffers["A"], buffers["B"])}  # cuBLAS SGEMM (no TF32 unless CUPY_TF32=1)

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        return Tolerance.derived(2e-6, "float32", int(problem["K"]))

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 2.0 * int(problem["M"]) * int(problem["N"]) * int(problem["K"])

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        return 4.0 * (m * k + k * n + m * n)

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        return 4 * (m * k + k * n + 2 * m * n)  # fp32 A, B, C and the reference C


SPEC = KernelSpec(
    name="matmul_fp32",
    version=1,
    description="C = A @ B, fp32, row-major, on the SIMT cores (FFMA): shared-memory tiles, register blocking",
    space=SPACE,
    problem_params=(
        # No partial tiles: M, N, K multiples of the smallest tile (BM, BN 32; BK 8).
        ProblemParam("M", minimum=32, multiple_of=32),
        ProblemParam("N", minimum=32, multiple_of=32),
        ProblemParam("K", minimum=8, multiple_of=8),
    ),
    default_problem={"M": 4096, "N": 4096, "K": 4096},
    impls={"cuda": MatmulFp32(CudaSource.from_file(Path(__file__).with_name("matmul_fp32.cu")))},
    test_problems=({"M": 512, "N": 256, "K": 384},),
)
