"""2D convolution (NHWC, bf16, stride 1, "same" padding) as an implicit GEMM on the tensor cores."""

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
_GEMM_M = "N * H * W"
_GEMM_K = "R * R * C"

SPACE = SearchSpace(
    parameters=(
        Parameter("BM", (64, 128, 256)),
        Parameter("BN", (32, 64, 128, 256)),
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
        "(BM // WM) * (BN // WN) <= 4096",
        f"STAGES * (BM + BN) * (BK + PAD) * 2 <= {SHARED_OPTIN}",
        f"({_GEMM_M}) % BM == 0",
        "K % BN == 0",
        "C % BK == 0",
        f"({_GEMM_K}) // BK >= STAGES",
    ),
    context_names=frozenset({"N", "H", "W", "C", "K", "R"}),
)


class Conv2d(CudaKernel):
    entry = "kf_conv2d"

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        p = {k: int(problem[k]) for k in ("N", "H", "W", "C", "K", "R")}
        return {
            "NB": p["N"],
            "H": p["H"],
            "W": p["W"],
            "C": p["C"],
            "KO": p["K"],
            "R": p["R"],
            **{k: int(v) for k, v in config.items()},
        }

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        c = {k: int(v) for k, v in config.items()}
        m = int(problem["N"]) * int(problem["H"]) * int(problem["W"])
        blocks = (m // c["BM"]) * (int(problem["K"]) // c["BN"])
        smem = c["STAGES"] * (c["BM"] + c["BN"]) * (c["BK"] + c["PAD"]) * 2
        return Launch(grid=(blocks, 1, 1), block=(c["WM"] * c["WN"] * 32, 1, 1), shared_bytes=smem)

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        n, h, w, c, k, r = (int(problem[x]) for x in ("N", "H", "W", "C", "K", "R"))
        rng = cp.random.default_rng(seed)
        return {
            "X": bf16_from_float32(rng.random((n, h, w, c), dtype=cp.float32) * 2 - 1),
            "Wt": bf16_from_float32((rng.random((k, r, r, c), dtype=cp.float32) * 2 - 1) / r),
            "Y": cp.empty((n, h, w, k), dtype=cp.uint16),
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        return (buffers["X"], buffers["Wt"], buffers["Y"])

    def outputs(self) -> Sequence[str]:
        return ("Y",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        import cupy as cp

        n, h, w, c, k, r = (int(problem[x]) for x in ("N", "H", "W", "C", "K", "R"))
        pad = r // 2
        x = cp.pad(bf16_to_float32(buffers["X"]), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        wt = bf16_to_float32(buffers["Wt"])
        out = cp.zeros((n * h * w, k), dtype=cp.float32)
        for fr in range(r):  # one GEMM per filter tap, fp32 (cuBLAS SGEMM)
            for fs in range(r):
                patch = x[:, fr : fr + h, fs : fs + w, :].reshape(n * h * w, c)
                out += patch @ wt[:, fr, fs, :].T
        return {"Y": bf16_from_float32(out.reshape(n, h, w, k))}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        taps = int(problem["R"]) ** 2 * int(problem["C"])
        return Tolerance.derived(1e-3, "bfloat16", taps)

    def flops(self, problem: Mapping[str, Any]) -> float:
        n, h, w, c, k, r = (int(problem[x]) for x in ("N", "H", "W", "C", "K", "R"))
        return 2.0 * n * h * w * k * c * r * r

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        n, h, w, c, k, r = (int(problem[x]) for x in ("N", "H", "W", "C", "K", "R"))
        return 2.0 * (n * h * w * c + k * r * r * c + n * h * w * k)

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        n, h, w, c, k, r = (int(problem[x]) for x in ("N", "H", "W", "C", "K", "R"))
        return 2 * (n * h * w * c + k * r * r * c + 2 * n * h * w * k)  # bf16 X, Wt, Y and the reference Y

    def peak_kind(self, problem: Mapping[str, Any]) -> str:
        return "tensor"


SPEC = KernelSpec(
    name="conv2d",
    version=1,
    description="2D convolution, NHWC bf16, stride 1, same padding: implicit GEMM on tensor cores (mma.sync)",
    space=SPACE,
    problem_params=(
        ProblemParam("N", maximum=4096),
        ProblemParam("H", maximum=4096),
        ProblemParam("W", maximum=4096),
        # No partial channel tiles: C a multiple of the smallest BK, K of the smallest BN (32 each);
        # N*H*W must be a multiple of a BM (64 at least), which the space's constraints check.
        ProblemParam("C", minimum=32, maximum=8192, multiple_of=32),
        ProblemParam("K", minimum=32, maximum=8192, multiple_of=32),
        ProblemParam("R", choices=(1, 3, 5, 7)),
    ),
    default_problem={"N": 32, "H": 28, "W": 28, "C": 256, "K": 256, "R": 3},
    impls={"cuda": Conv2d(CudaSource.from_file(Path(__file__).with_name("conv2d.cu")))},
    test_problems=({"N": 2, "H": 8, "W": 8, "C": 64, "K": 64, "R": 3},),
)
