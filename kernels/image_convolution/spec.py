"""Single-channel 2D image convolution with an F x F filter: the catalogue's compile-heavy kernel.

Fully unrolled filter and register-tile loops make NVRTC take seconds per config, the situation of
Kernel Tuner's own 2D convolution example (a serial tuner pays that compile for every config; the
farm compiles ahead on every core of the host).
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

SHARED_LIMIT = 48 * 1024  # static shared memory; no opt-in needed

SPACE = SearchSpace(
    parameters=(
        Parameter("BX", (16, 32, 64, 128)),
        Parameter("BY", (1, 2, 4, 8, 16, 32)),
        Parameter("TX", (1, 2, 4, 8)),
        Parameter("TY", (1, 2, 4, 8)),
        Parameter("PAD", (0, 1)),
        Parameter("FILTER_SMEM", (0, 1)),
    ),
    constraints=(
        "BX * BY >= 32",
        "BX * BY <= 1024",
        "TX * TY <= 16",  # 32 accumulators spill kilobytes and compile for 10-40 s each
        "W % (BX * TX) == 0",
        "H % (BY * TY) == 0",
        f"(BY * TY + F - 1) * (BX * TX + F - 1 + PAD) * 4 + FILTER_SMEM * F * F * 4 <= {SHARED_LIMIT}",
    ),
    context_names=frozenset({"H", "W", "F"}),
)


class ImageConvolution(CudaKernel):
    entry = "kf_image_conv"

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        return {**{k: int(problem[k]) for k in ("H", "W", "F")}, **{k: int(v) for k, v in config.items()}}

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        c = {k: int(v) for k, v in config.items()}
        blocks = (int(problem["W"]) // (c["BX"] * c["TX"])) * (int(problem["H"]) // (c["BY"] * c["TY"]))
        return Launch(grid=(blocks, 1, 1), block=(c["BX"] * c["BY"], 1, 1))

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        h, w, f = int(problem["H"]), int(problem["W"]), int(problem["F"])
        rng = cp.random.default_rng(seed)
        return {
            "image": rng.standard_normal((h + f - 1, w + f - 1), dtype=cp.float32),
            "filter": rng.standard_normal((f, f), dtype=cp.float32),
            "out": cp.empty((h, w), dtype=cp.float32),
        }

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        return (buffers["image"], buffers["filter"], buffers["out"])

    def outputs(self) -> Sequence[str]:
        return ("out",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        """F*F shifted multiply-adds in float64 (cuDNN has no single-channel "valid" shortcut that
        is more trustworthy than this, and float64 makes the summation order irrelevant)."""
        import cupy as cp

        h, w, f = int(problem["H"]), int(problem["W"]), int(problem["F"])
        image = buffers["image"].astype(cp.float64)
        weights = cp.asnumpy(buffers["filter"]).astype("float64")
        out = cp.zeros((h, w), dtype=cp.float64)
        for i in range(f):
            for j in range(f):
                out += image[i : i + h, j : j + w] * weights[i, j]
        return {"out": out.astype(cp.float32)}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        return Tolerance.derived(2e-6, "float32", int(problem["F"]) ** 2)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 2.0 * int(problem["H"]) * int(problem["W"]) * int(problem["F"]) ** 2

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        h, w, f = int(problem["H"]), int(problem["W"]), int(problem["F"])
        return 4.0 * ((h + f - 1) * (w + f - 1) + h * w + f * f)

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        h, w, f = int(problem["H"]), int(problem["W"]), int(problem["F"])
        return 4 * ((h + f - 1) * (w + f - 1) + f * f + 2 * h * w)  # fp32 image, filter, out, reference out


SPEC = KernelSpec(
    name="image_convolution",
    version=1,
    description=(
        "2D convolution of one fp32 image with an F x F filter (fully unrolled: the compile-heavy kernel, "
        "seconds of NVRTC per config)"
    ),
    space=SPACE,
    problem_params=(
        ProblemParam("H", minimum=16, maximum=1 << 15),
        ProblemParam("W", minimum=16, maximum=1 << 15, multiple_of=16),  # BX >= 16; no partial tiles
        ProblemParam("F", choices=(3, 5, 7, 9, 11, 13, 15, 17)),
    ),
    default_problem={"H": 4096, "W": 4096, "F": 15},
    impls={"cuda": ImageConvolution(CudaSource.from_file(Path(__file__).with_name("image_convolution.cu")))},
    test_problems=({"H": 256, "W": 512, "F": 7}, {"H": 512, "W": 1024, "F": 15}, {"H": 2048, "W": 2048, "F": 5}),
)
