"""bf16 matrix product with Hopper's warpgroup MMA (wgmma, sm_90a): C = A @ B^T, fp32 accumulation.

Same problem, inputs and reference as ``matmul_bf16`` (the mma.sync kernel); only the tiling and the
instruction differ, so the two landscapes compare directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_kernel import Launch
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.matmul_bf16.spec import MatmulBf16
from kernelfarm.kernels.spec import KernelSpec, ProblemParam

SHARED_OPTIN = 227 * 1024
_BM = "(64 * WGS * MT)"

SPACE = SearchSpace(
    parameters=(
        Parameter("BN", (64, 128, 256)),
        Parameter("WGS", (1, 2)),
        Parameter("MT", (1, 2)),
        Parameter("BK", (32, 64)),
        Parameter("STAGES", (2, 3, 4, 5)),
        Parameter("GROUP_M", (1, 8, 16)),
        Parameter("LOAD_MAP", (0, 1)),
    ),
    constraints=(
        "MT * BN <= 256",  # fp32 accumulators: MT * BN / 2 registers per thread
        f"STAGES * ({_BM} + BN) * BK * 2 <= {SHARED_OPTIN}",
        f"M % {_BM} == 0",
        "N % BN == 0",
        "K % BK == 0",
        "K // BK >= STAGES",
    ),
    context_names=frozenset({"M", "N", "K"}),
)


class MatmulBf16Wgmma(MatmulBf16):
    entry = "kf_matmul_bf16_wgmma"
    arch_specific = True  # wgmma exists only in the sm_90a target

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        c = {k: int(v) for k, v in config.items()}
        bm = 64 * c["WGS"] * c["MT"]
        blocks = (int(problem["M"]) // bm) * (int(problem["N"]) // c["BN"])
        smem = c["STAGES"] * (bm + c["BN"]) * c["BK"] * 2
        return Launch(grid=(blocks, 1, 1), block=(c["WGS"] * 128, 1, 1), shared_bytes=smem)


SPEC = KernelSpec(
    name="matmul_bf16_wgmma",
    version=2,
    description="C = A @ B^T, bf16 in/out, fp32 accumulation, Hopper wgmma (sm_90a) fed by cp.async",
    space=SPACE,
    # No partial tiles: M, N multiples of the smallest tile (64), K of the smallest BK (32).
    problem_params=(
        ProblemParam("M", minimum=64, multiple_of=64),
        ProblemParam("N", minimum=64, multiple_of=64),
        ProblemParam("K", minimum=64, multiple_of=32),
    ),
    default_problem={"M": 4096, "N": 4096, "K": 4096},
    impls={"cuda": MatmulBf16Wgmma(CudaSource.from_file(Path(__file__).with_name("matmul_bf16_wgmma.cu")))},
    test_problems=({"M": 512, "N": 512, "K": 1024},),
)
