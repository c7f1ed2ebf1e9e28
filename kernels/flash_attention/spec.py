"""Flash-attention forward (FA2 scheme, bf16 tensor cores via mma.sync): O = softmax(Q K^T / sqrt(D)) V."""

from __future__ import annotations

import math
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
_SMEM = "2 * (WARPS * 16 * MT + 2 * STAGES * BLOCK_N) * (D + PAD)"

SPACE = SearchSpace(
    parameters=(
        Parameter("WARPS", (2, 4, 8)),
        Parameter("MT", (1, 2)),
        Parameter("BLOCK_N", (16, 32, 64, 128)),
        Parameter("STAGES", (1, 2)),
        Parameter("PAD", (0, 8)),
        Parameter("MIN_BLOCKS", (1, 2)),
    ),
    constraints=(
        f"{_SMEM} <= {SHARED_OPTIN}",
        f"MIN_BLOCKS * ({_SMEM}) <= {SHARED_OPTIN}",
        # fp32 registers per thread: O accumulators + S tile + Q fragments (the rest spills)
        "MT * (D // 2 + BLOCK_N // 2 + D // 4) <= 224",
        "S % (WARPS * 16 * MT) == 0",
        "S % BLOCK_N == 0",
    ),
    context_names=frozenset({"B", "H", "S", "D", "causal"}),
)


class FlashAttention(CudaKernel):
    entry = "kf_flash_attention"

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        return {
            "S": int(problem["S"]),
            "D": int(problem["D"]),
            "CAUSAL": int(problem["causal"]),
            **{k: int(v) for k, v in config.items()},
        }

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        c = {k: int(v) for k, v in config.items()}
        block_m = c["WARPS"] * 16 * c["MT"]
        d = int(problem["D"])
        smem = 2 * (block_m + 2 * c["STAGES"] * c["BLOCK_N"]) * (d + c["PAD"])
        return Launch(
            grid=(int(problem["S"]) // block_m, int(problem["B"]) * int(problem["H"]), 1),
            block=(c["WARPS"] * 32, 1, 1),
            shared_bytes=smem,
        )

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        shape = (int(problem["B"]), int(problem["H"]), int(problem["S"]), int(problem["D"]))
        rng = cp.random.default_rng(seed)
        return {
            **{name: bf16_from_float32(rng.standard_normal(shape, dtype=cp.float32)) for name in ("Q", "K", "V")},
            "O": cp.empty(shape, dtype=cp.uint16),
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        import numpy as np

        scale_log2 = np.float32(math.log2(math.e) / math.sqrt(int(problem["D"])))
        return (buffers["Q"], buffers["K"], buffers["V"], buffers["O"], scale_log2)

    def outputs(self) -> Sequence[str]:
        return ("O",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        import cupy as cp

        b, h, s, d = (int(problem[k]) for k in ("B", "H", "S", "D"))
        q, k, v = (bf16_to_float32(buffers[n]).reshape(b * h, s, d) for n in ("Q", "K", "V"))
        out = cp.empty((b * h, s, d), dtype=cp.float32)
        mask = cp.triu(cp.ones((s, s), dtype=cp.bool_), 1) if problem["causal"] else None
        chunk = max(1, (1 << 28) // (s * s))  # bound the fp32 score matrices to ~1 GiB
        for start in range(0, b * h, chunk):
            scores = cp.matmul(q[start : start + chunk], k[start : start + chunk].transpose(0, 2, 1)) / math.sqrt(d)
            if mask is not None:
                scores[:, mask] = -cp.inf
            scores -= scores.max(axis=-1, keepdims=True)
            p = cp.exp(scores)
            p /= p.sum(axis=-1, keepdims=True)
            out[start : start + chunk] = cp.matmul(p, v[start : start + chunk])
        return {"O": bf16_from_float32(out.reshape(b, h, s, d))}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        # The probabilities are rounded to bf16 for the second product (P V); its sum runs over S keys.
        return Tolerance.derived(5e-3, "bfloat16", int(problem["S"]), operand_rounding="bfloat16")

    def flops(self, problem: Mapping[str, Any]) -> float:
        b, h, s, d = (int(problem[k]) for k in ("B", "H", "S", "D"))
        full = 4.0 * b * h * s * s * d
        return full / 2 if problem["causal"] else full

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        b, h, s, d = (int(problem[k]) for k in ("B", "H", "S", "D"))
        return 2.0 * 4 * b * h * s * d

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        b, h, s, d = (int(problem[k]) for k in ("B", "H", "S", "D"))
        return 2 * 5 * b * h * s * d  # bf16 Q, K, V, O and the reference O

    def peak_kind(self, problem: Mapping[str, Any]) -> str:
        return "tensor"


SPEC = KernelSpec(
    name="flash_attention",
    version=1,
    description="Flash-attention forward, bf16 [B, H, S, D], fp32 accumulation, mma.sync tensor cores (FA2 scheme)",
    space=SPACE,
    problem_params=(
        ProblemParam("B", maximum=1024),
        ProblemParam("H", maximum=1024),
        # No partial query or key tiles: S a multiple of the smallest BLOCK_M (2 warps x 16 rows).
        ProblemParam("S", minimum=32, maximum=1 << 17, multiple_of=32),
        ProblemParam("D", choices=(64, 128)),
        ProblemParam("causal", minimum=0, maximum=1),
    ),
    default_problem={"B": 4, "H": 16, "S": 4096, "D": 128, "causal": 0},
    impls={"cuda": FlashAttention(CudaSource.from_file(Path(__file__).with_name("flash_attention.cu")))},
    test_problems=(
        {"B": 1, "H": 2, "S": 256, "D": 64, "causal": 1},
        {"B": 1, "H": 2, "S": 512, "D": 128, "causal": 0},
    ),
)
