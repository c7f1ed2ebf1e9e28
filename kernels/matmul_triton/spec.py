"""Triton matrix product C = A @ B, bf16 or fp16, fp32 accumulation, any M, N, K.

Two schedules in one space (``TMA``): tiled with pointer loads, or persistent with TMA tensor
descriptors (Hopper). B is K x N (``b_layout="kn"``, ``x @ W``) or N x K (``"nk"``, ``x @ W.T``).
The jit functions are in ``kernels/triton_jit/matmul.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_dtypes import ELEMENT_BYTES
from kernelfarm.kernels.spec import KernelSpec, ProblemParam
from kernelfarm.kernels.tolerance import Tolerance
from kernelfarm.kernels.triton_kernel import (
    TRITON_DTYPES,
    BufferArg,
    Grid,
    TensorDescriptorArg,
    TritonKernel,
    cdiv,
)

SHARED_OPTIN = 227 * 1024
DTYPES = ("bfloat16", "float16")
LAYOUTS = ("kn", "nk")

PROBLEM_PARAMS = (
    ProblemParam("M", minimum=1, maximum=1 << 17),
    ProblemParam("N", minimum=1, maximum=1 << 17),
    ProblemParam("K", minimum=1, maximum=1 << 17),
    ProblemParam("dtype", kind="str", choices=DTYPES),
    ProblemParam("b_layout", kind="str", choices=LAYOUTS),
)

SPACE = SearchSpace(
    parameters=(
        Parameter("BLOCK_M", (64, 128, 256)),
        Parameter("BLOCK_N", (64, 128, 256)),
        Parameter("BLOCK_K", (32, 64, 128)),
        Parameter("GROUP_M", (8,)),
        Parameter("num_warps", (4, 8)),
        Parameter("num_stages", (2, 3, 4, 5)),
        Parameter("TMA", (0, 1)),
        Parameter("SUBTILE", (0, 1)),  # TMA only: the epilogue stores two half tiles
    ),
    constraints=(
        # at most 128 fp32 accumulators per thread, or they spill
        "BLOCK_M * BLOCK_N <= 128 * 32 * num_warps",
        # the pipelined A and B tiles (and the TMA kernel's C tile, or half of it, for its store) in shared memory
        "num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 + TMA * BLOCK_M * BLOCK_N * 2 // (1 + SUBTILE)"
        f" <= {SHARED_OPTIN}",
        "SUBTILE == 0 or TMA == 1",
        # TMA needs 16-byte aligned row strides
        "TMA == 0 or (K % 8 == 0 and N % 8 == 0)",
    ),
    context_names=frozenset({"M", "N", "K", "dtype", "b_layout"}),
)


class TritonMatmul(TritonKernel):
    """C = A @ B (``EPILOGUE`` 0), or GELU(A @ B + bias) (``EPILOGUE`` 1 erf, 2 tanh: the fused kernel's
    subclass, which picks one per problem)."""

    EPILOGUE = 0

    def epilogue(self, problem: Mapping[str, Any]) -> int:
        """The jit functions' ``EPILOGUE`` constexpr for this problem."""
        return self.EPILOGUE

    def entry(self, config: Mapping[str, Any]) -> str:
        return "kf_triton_matmul_tma" if int(config["TMA"]) else "kf_triton_matmul"

    def entries(self) -> tuple[str, ...]:
        return ("kf_triton_matmul", "kf_triton_matmul_tma")

    def constexprs(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | float | bool]:
        out: dict[str, int | float | bool] = {
            name: int(config[name]) for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")
        }
        out["EPILOGUE"] = self.epilogue(problem)
        if int(config["TMA"]):
            out["B_KN"] = int(problem["b_layout"] == "kn")
            out["SUBTILE"] = int(config.get("SUBTILE", 0))
        return out

    def _strides(self, problem: Mapping[str, Any]) -> dict[str, int]:
        n, k = int(problem["N"]), int(problem["K"])
        kn = problem["b_layout"] == "kn"
        return {
            "stride_am": k,
            "stride_ak": 1,
            "stride_bk": n if kn else 1,
            "stride_bn": 1 if kn else k,
            "stride_cm": n,
            "stride_cn": 1,
        }

    def scalars(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int]:
        sizes = {name: int(problem[name]) for name in ("M", "N", "K")}
        return sizes if int(config["TMA"]) else sizes | self._strides(problem)

    def signature(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, str]:
        dtype = str(problem["dtype"])
        element = "*" + TRITON_DTYPES[dtype]
        if int(config["TMA"]):
            descriptors = self._descriptors(config, problem)
            return {
                **{name: d.triton_type(dtype) for name, d in descriptors.items()},
                "bias_ptr": element,
                **dict.fromkeys(("M", "N", "K", "NUM_SMS"), "i32"),
            }
        return {
            "a_ptr": element,
            "b_ptr": element,
            "c_ptr": element,
            "bias_ptr": element,
            **dict.fromkeys(("M", "N", "K", *self._strides(problem)), "i32"),
        }

    def _descriptors(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, TensorDescriptorArg]:
        m, n, k = (int(problem[name]) for name in ("M", "N", "K"))
        bm, bn, bk = (int(config[name]) for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
        if problem["b_layout"] == "kn":
            b = TensorDescriptorArg("B", (k, n), (n, 1), (bk, bn))
        else:
            b = TensorDescriptorArg("B", (n, k), (k, 1), (bn, bk))
        return {
            "a_desc": TensorDescriptorArg("A", (m, k), (k, 1), (bm, bk)),
            "b_desc": b,
            "c_desc": TensorDescriptorArg("C", (m, n), (n, 1), (bm, bn // (1 + int(config.get("SUBTILE", 0))))),
        }

    def _tiles(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> int:
        return cdiv(int(problem["M"]), int(config["BLOCK_M"])) * cdiv(int(problem["N"]), int(config["BLOCK_N"]))

    def grid(self, config: Mapping[str, Any], problem: Mapping[str, Any], sm_count: int) -> Grid:
        tiles = self._tiles(config, problem)
        return Grid(min(tiles, sm_count) if int(config["TMA"]) else tiles)

    def arguments(self, config: Mapping[str, Any], problem: Mapping[str, Any], sm_count: int) -> dict[str, Any]:
        sizes = {name: int(problem[name]) for name in ("M", "N", "K")}
        bias = BufferArg("bias" if self.epilogue(problem) else "C")  # read only by the fused epilogue
        if int(config["TMA"]):
            return {**self._descriptors(config, problem), "bias_ptr": bias, **sizes,
                    "NUM_SMS": min(sm_count, self._tiles(config, problem))}  # fmt: skip
        return {"a_ptr": BufferArg("A"), "b_ptr": BufferArg("B"), "c_ptr": BufferArg("C"), "bias_ptr": bias,
                **sizes, **self._strides(problem)}  # fmt: skip

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        from kernelfarm.kernels.cuda_dtypes import random_tensor

        m, n, k, dtype = int(problem["M"]), int(problem["N"]), int(problem["K"]), str(problem["dtype"])
        b_shape = (k, n) if problem["b_layout"] == "kn" else (n, k)
        return {
            "A": random_tensor((m, k), dtype, seed),
            "B": random_tensor(b_shape, dtype, seed + 1),
            "C": cp.empty((m, n), dtype=cp.uint16 if dtype == "bfloat16" else cp.float16),
        }

    def product(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Any:
        """A @ B in fp32 (cuBLAS SGEMM of the exact 16-bit inputs)."""
        import cupy as cp

        from kernelfarm.kernels.cuda_dtypes import to_float32

        dtype = str(problem["dtype"])
        a, b = to_float32(buffers["A"], dtype), to_float32(buffers["B"], dtype)
        return cp.matmul(a, b if problem["b_layout"] == "kn" else b.T)

    def outputs(self) -> Sequence[str]:
        return ("C",)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        from kernelfarm.kernels.cuda_dtypes import from_float32

        return {"C": from_float32(self.product(buffers, problem), str(problem["dtype"]))}

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        # The norm bound of the CUDA bf16 products (measured, docs/benchmarks/GPU.md): the same fp32
        # accumulation of bf16/fp16 operands; fp16's finer rounding only makes it looser there.
        return Tolerance.derived(1e-3, str(problem["dtype"]), int(problem["K"]))

    def flops(self, problem: Mapping[str, Any]) -> float:
        return 2.0 * int(problem["M"]) * int(problem["N"]) * int(problem["K"])

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        return float(ELEMENT_BYTES[str(problem["dtype"])] * (m * k + k * n + m * n))

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        m, n, k = int(problem["M"]), int(problem["N"]), int(problem["K"])
        return ELEMENT_BYTES[str(problem["dtype"])] * (m * k + k * n + 2 * m * n)  # A, B, C, the reference C

    def peak_kind(self, problem: Mapping[str, Any]) -> str:
        return "tensor"


JIT_MODULE = "kernelfarm.kernels.triton_jit.matmul"

SPEC = KernelSpec(
    name="matmul_triton",
    version=1,
    description="C = A @ B in Triton, bf16/fp16 in and out, fp32 accumulation, any M/N/K; tiled or "
    "persistent with TMA descriptors (Hopper); B as K x N or N x K",
    space=SPACE,
    problem_params=PROBLEM_PARAMS,
    default_problem={"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16", "b_layout": "kn"},
    impls={"triton": TritonMatmul(JIT_MODULE, "kf_triton_matmul")},
    test_problems=(
        {"M": 1000, "N": 777, "K": 520, "dtype": "bfloat16", "b_layout": "kn"},  # ragged: masks, no TMA
        {"M": 512, "N": 1000, "K": 768, "dtype": "float16", "b_layout": "nk"},
        {"M": 384, "N": 520, "K": 1000, "dtype": "bfloat16", "b_layout": "nk"},  # TMA with tails
    ),
)
