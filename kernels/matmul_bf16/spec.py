"""bf16 matrix product on the tensor cores (mma.sync m16n8k16, fp32 accumulation): C = A @ B^T."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_dtypes import bf16_from_float32, bf16_to_float32
from kernelfarm.kernels.cuda_kernel import CudaKernel, Launch
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.spec import KernelSpec, ProblemParam
from kernelfarm.kernels.tolerance import Tolerance

SHARED_OPTIN = 227 * 1024

SPACE = SearchSpace(
    parameters=(
        Parameter("BM", (64, 128, 256)),
        Parameter("BN", (64, 128, 256)),
        Parameter("BK", (32, 64)),
        Parameter("WM", (1, 2, 4)),
        Parameter("WN", (1, 2, 4)),
        Parameter("STAGES", (2, 3, 4)),
        Parameter("PAD", (0, 8)),
        Parameter("GROUP_M", (1, 8)),
    ),
    constraints=(
        "WM * WN >= 2",
        "(BM // WM) % 16 == 0",
        "(BN // WN) % 16 == 0",
        "(BM // WM) * (BN // WN) <= 4096",  # 128 fp32 accumulators per thread at most
        f"STAGES * (BM + BN) * (BK + PAD) * 2 <= {SHARED_OPTIN}",
        "M % BM == 0",
        "N % BN == 0",
        "K % BK == 0",
        "K // BK >= STAGES",
    ),
    context_names=frozenset({"M", "N", "K"}),
)


class MatmulBf16(CudaKernel):
    entry = "kf_matmul_bf16"

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        return {**{k: int(problem[k]) for k in ("M", "N", "K")}, **{k: int(v) for k, v in config.items()}}

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        c = {k: int(v) for k, v in config.items()}
        blocks = (int(problem["M"]) // c["BM"]) * (int(problem["N"]) // c["BN"])
        smem = c["STAGES"] * (c["BM"] + c["BN"]) * (c["BK"] + c["PAD"]) * 2
        return Launch(grid=(blocks, 1, 1), block=(c["WM"] * c["WN"] * 32, 1, 1), shared_bytes=smem)

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        rng = cp.random.default_rng(seed)
        return {
            "A": bf16_from_float32(rng.random((m, k), dtype=cp.float32) * 2 - 1),
            "B": bf16_from_float32(rng.random((n, k), dtype=cp.float32) * 2 - 1),
            "C": cp.empty((m, n), dtype=cp.uint16),
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        return (buffers["A"], buffers["B"], buffers["C"])

    def outputs(self) -> Sequence[str]:
        return ("C",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        import cupy as cp

        # fp32 SGEMM of the exact bf16 inputs, rounded to bf16 like the kernel's epilogue
        a, b = bf16_to_float32(buffers["A"]), bf16_to_float32(buffers["B"])
        return {"C": bf16_from_float32(cp.matmul(a, b.T))}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        return Tolerance.derived(1e-3, "bfloat16", int(problem["K"]))

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 2.0 * int(problem["M"]) * int(problem["N"]) * int(problem["K"])

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        return 2.0 * (m * k + k * n + m * n)

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        return 2 * (m * k + n * k + 2 * m * n)  # bf16 A, B, C and the reference C

    def peak_kind(self, problem: Mapping[str, Any]) -> str:
        return "tensor"


SPEC = KernelSpec(
    name="matmul_bf16",
    version=1,
    description="C = A @ B^T, bf16 in/out, fp32 accumulation, tensor cores (mma.sync + ldmatrix + cp.async)",
    space=SPACE,
    # No partial tiles: M, N multiples of the smallest tile (64), K of the smallest BK (32).
    problem_params=(
        ProblemParam("M", minimum=64, multiple_of=64),
        ProblemParam("N", minimum=64, multiple_of=64),
        ProblemParam("K", minimum=64, multiple_of=32),
    ),
    default_problem={"M": 4096, "N": 4096, "K": 4096},
    impls={"cuda": MatmulBf16(CudaSource.from_file(Path(__file__).with_name("matmul_bf16.cu")))},
    test_problems=({"M": 512, "N": 512, "K": 1024},),
)
