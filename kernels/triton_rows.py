"""Shared pieces of the Triton row kernels (softmax, layernorm): one search space, the grid, the
arguments, and the CUDA row kernel's inputs, reference and roofline figures (the same problem
signature, so the same references check both).

A program handles ``ROWS`` consecutive rows; the row lives in registers, N rounded up to a power
of two (``BLOCK_N``), so a thread holds ``BLOCK_N / (32 * num_warps)`` elements: at least one, and
at most 64 floats (more spill).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.tolerance import Tolerance
from kernelfarm.kernels.triton_kernel import TRITON_DTYPES, BufferArg, Grid, TritonKernel, cdiv, next_power_of_two

ROW_SPACE = SearchSpace(
    parameters=(
        Parameter("ROWS", (1, 2, 4, 8, 16)),
        Parameter("num_warps", (1, 2, 4, 8, 16, 32)),
        Parameter("num_stages", (1, 2, 3, 4)),
    ),
    constraints=("num_warps * 32 <= N", "N <= num_warps * 32 * 64"),
    context_names=frozenset({"M", "N", "dtype"}),
)


class TritonRowKernel(TritonKernel):
    """A row kernel whose runtime arguments are its buffers' pointers, then M and N."""

    def __init__(self, module: str, function: str, cuda_spec: KernelSpec) -> None:
        """
        Args:
            module, function: the jit function.
            cuda_spec: the CUDA kernel of the same problem, whose inputs and reference are reused.
        """
        super().__init__(module, function)
        self.cuda = cuda_spec.impl("cuda", CudaKernel)

    def pointer_names(self) -> tuple[str, ...]:
        """The jit function's pointer parameters, in the order of :meth:`buffer_names`."""
        raise NotImplementedError

    def buffer_names(self) -> tuple[str, ...]:
        """The buffers of ``make_inputs`` passed to those parameters."""
        raise NotImplementedError

    def constexprs(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | float | bool]:
        return {"BLOCK_N": next_power_of_two(int(problem["N"])), "ROWS": int(config["ROWS"])}

    def scalars(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int]:
        return {"M": int(problem["M"]), "N": int(problem["N"])}

    def signature(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, str]:
        element = "*" + TRITON_DTYPES[str(problem["dtype"])]
        return {**dict.fromkeys(self.pointer_names(), element), "M": "i32", "N": "i32"}

    def grid(self, config: Mapping[str, Any], problem: Mapping[str, Any], sm_count: int) -> Grid:
        return Grid(cdiv(int(problem["M"]), int(config["ROWS"])))

    def arguments(self, config: Mapping[str, Any], problem: Mapping[str, Any], sm_count: int) -> dict[str, Any]:
        pointers = {p: BufferArg(b) for p, b in zip(self.pointer_names(), self.buffer_names(), strict=True)}
        return pointers | self.scalars(config, problem)

    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        return self.cuda.make_inputs(problem, seed)

    def outputs(self) -> Sequence[str]:
        return self.cuda.outputs()

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        return self.cuda.reference(buffers, problem)

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        return self.cuda.tolerance(problem)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return self.cuda.flops(problem)

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        return self.cuda.bytes_moved(problem)

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int | None:
        return self.cuda.input_set_bytes(problem)  # the same inputs and reference
