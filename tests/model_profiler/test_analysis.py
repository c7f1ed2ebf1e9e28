"""The profiler's arithmetic without a model: shapes → FLOPs, bytes and GEMM dimensions, roofline classes,
hints, and the mapping of operators onto farm kernels."""

from __future__ import annotations

from typing import Any

import pytest

from kernelfarm.model_profiler.analysis import OperatorReport, model_hints, operator_hint
from kernelfarm.model_profiler.classify import classify
from kernelfarm.model_profiler.estimate import GemmShape, attention_flops, estimate, gemm_shape
from kernelfarm.model_profiler.mapping import accepts, choose_kernels, family_problem
from kernelfarm.model_profiler.tuning import estimated_end_to_end
from kernelfarm.worker.measuring.roofline import Ceilings

# An H100's measured ceilings, rounded (docs/benchmarks/GPU.md): 3.0 TB/s, 51 TFLOP/s fp32, 800 tensor.
H100 = Ceilings(dram_bytes_per_s=3.0e12, fp32_flops=51e12, tensor_flops=800e12)


@pytest.mark.parametrize(
    ("name", "shapes", "expected"),
    [
        ("aten::mm", [[4096, 768], [768, 50257]], GemmShape(4096, 50257, 768)),
        ("aten::addmm", [[3072], [4096, 768], [768, 3072]], GemmShape(4096, 3072, 768)),
        ("aten::linear", [[8, 512, 768], [50257, 768], []], GemmShape(4096, 50257, 768)),
        ("aten::bmm", [[96, 512, 64], [96, 64, 512]], GemmShape(512, 512, 64, batch=96)),
        ("aten::mm", [[4096]], None),
    ],
)
def test_gemm_dimensions_come_from_the_operator_shapes(name: str, shapes: list[list[int]], expected: GemmShape) -> None:
    assert gemm_shape(name, shapes) == expected


def test_flops_and_minimum_bytes() -> None:
    flops, nbytes = estimate("aten::mm", [[4096, 768], [768, 50257]], 0.0, 2)
    assert flops == 2 * 4096 * 768 * 50257
    assert nbytes == 2 * (4096 * 768 + 768 * 50257 + 4096 * 50257)
    # torch's own FLOP count wins where it has one
    assert estimate("aten::mm", [[4, 4], [4, 4]], 999.0, 4)[0] == 999.0
    # attention: 4·B·H·S·S·D, halved for causal
    work = 2 * 8 * 12 * 512 * 512 * 64
    assert attention_flops("aten::_scaled_dot_product_cudnn_attention", [[8, 12, 512, 64]] * 3, causal=True) == work
    # the flash kernel's own operator takes (batch, seq, heads, dim): the same work
    assert attention_flops("aten::_flash_attention_forward", [[8, 512, 12, 64]] * 3, causal=True) == work
    # elementwise: every input read, one output written
    assert estimate("aten::add", [[1000], [1000]], 0.0, 4) == (1000.0, 12000.0)


def test_classes_follow_the_roofline() -> None:
    gemm_flops, gemm_bytes = estimate("aten::mm", [[4096, 768], [768, 50257]], 0.0, 2)
    assert classify(gemm_flops, gemm_bytes, 3.33e-3, H100, tensor_cores=True).bound == "compute"
    add_flops, add_bytes = estimate("aten::add", [[8, 512, 768], [8, 512, 768]], 0.0, 2)
    memory = classify(add_flops, add_bytes, 30e-6, H100, tensor_cores=False)
    assert memory.bound == "memory" and 0.0 < memory.fraction_of_peak < 1.0
    # 3 µs for 8 bytes: the launch, not the work, takes the time
    assert classify(4.0, 8.0, 3e-6, H100, tensor_cores=False).bound == "launch"


def _op(
    name: str, shapes: list[list[int]], self_ms: float, share: float, calls: int = 1, dtype_bytes: int = 2
) -> OperatorReport:
    flops, nbytes = estimate(name, shapes, 0.0, dtype_bytes)
    verdict = classify(flops, nbytes, self_ms * 1e-3 / calls, H100, tensor_cores=name == "aten::mm")
    return OperatorReport(
        name=name, input_shapes=shapes, calls=calls, self_ms=self_ms, share=share, flops=flops * calls,
        bytes=nbytes * calls, tflops_per_s=verdict.achieved_flops_per_s / 1e12,
        gb_per_s=verdict.achieved_bytes_per_s / 1e9, bound=verdict.bound,
        fraction_of_peak=verdict.fraction_of_peak, kernels=[],
    )  # fmt: skip


def test_the_lm_head_gemm_is_hinted_with_its_odd_dimension() -> None:
    lm_head = _op("aten::mm", [[4096, 768], [768, 50257]], self_ms=3.33, share=0.42)
    assert lm_head.bound == "compute"
    assert (
        operator_hint(lm_head, "cuda")
        == "GEMM 4096x50257x768 runs at 12 % of peak (N = 50257 not a multiple of 16): tune"
    )
    elementwise = [_op("aten::add", [[8, 512, 768], [8, 512, 768]], 0.05, 0.04, calls=24) for _ in range(2)]
    hints = model_hints([lm_head, *elementwise], "cuda")
    assert any(h.startswith("chain of elementwise ops: 48 calls take 8% of the time") for h in hints), hints
    assert any(h.startswith("GEMM 4096x50257x768") and h.endswith("(42% of the time)") for h in hints), hints


def test_operators_map_to_farm_kernels_with_their_problems() -> None:
    # the LM head: x @ W.T with W stored vocabulary x hidden, so B's strides are (1, 768)
    lm_head = _op("aten::mm", [[4096, 768], [768, 50257]], 3.33, 0.42)
    lm_head.input_strides = [[768, 1], [1, 768]]
    mapped = family_problem(lm_head, "bfloat16")
    assert mapped is not None and mapped.family == "matmul"
    assert mapped.problem == {"M": 4096, "N": 50257, "K": 768, "dtype": "bfloat16", "b_layout": "nk"}
    # GPT-2's Conv1D: addmm(bias, x, W) with W stored hidden x out
    conv1d = _op("aten::addmm", [[3072], [4096, 768], [768, 3072], [], []], 0.38, 0.03)
    conv1d.input_strides = [[1], [768, 1], [3072, 1], [], []]
    assert family_problem(conv1d, "bfloat16").problem["b_layout"] == "kn"  # type: ignore[union-attr]
    norm = _op("aten::native_layer_norm", [[8, 512, 768], [768], [768], [768]], 0.02, 0.01)
    assert family_problem(norm, "bfloat16").problem == {"M": 4096, "N": 768, "dtype": "bfloat16"}  # type: ignore[union-attr]
    sdpa = _op("aten::_scaled_dot_product_flash_attention", [[8, 12, 512, 64]] * 3, 0.2, 0.05)
    assert family_problem(sdpa, "bfloat16").problem == {"B": 8, "H": 12, "S": 512, "D": 64, "causal": 1}  # type: ignore[union-attr]
    flash = _op("aten::_flash_attention_forward", [[8, 512, 12, 64]] * 3, 0.2, 0.05)
    assert family_problem(flash, "bfloat16").problem == {"B": 8, "H": 12, "S": 512, "D": 64, "causal": 1}  # type: ignore[union-attr]
    assert family_problem(_op("aten::add", [[4], [4]], 0.01, 0.01), "bfloat16") is None

    mnk = [{"name": n, "kind": "int", "choices": None} for n in "MNK"]
    offered: list[dict[str, Any]] = [
        {"name": "matmul_bf16", "problem_params": mnk},  # A @ B^T: takes "nk" only
        {"name": "matmul_triton", "problem_params": [*mnk, {"name": "dtype", "choices": ["bfloat16", "float16"]},
                                                     {"name": "b_layout", "choices": ["kn", "nk"]}]},
        {"name": "layernorm", "problem_params": [{"name": "M"}, {"name": "N"},
                                                 {"name": "dtype", "choices": ["float32"]}]},
    ]  # fmt: skip
    # matmul_triton tunes N rounded up to 8 (TMA needs aligned rows; the swap pads the weight)
    assert choose_kernels("matmul", "bfloat16", mapped.problem, offered) == [
        ("matmul_triton", {**mapped.problem, "N": 50264}),
        ("matmul_bf16", {"M": 4096, "N": 50257, "K": 768}),
    ]
    kn = {**mapped.problem, "b_layout": "kn"}
    assert [name for name, _ in choose_kernels("matmul", "bfloat16", kn, offered)] == ["matmul_triton"]
    # a kernel whose problem signature does not take the problem is not chosen
    assert not accepts(offered[2], {"M": 4096, "N": 768, "dtype": "bfloat16"})
    assert choose_kernels("layernorm", "bfloat16", {"M": 1, "N": 1, "dtype": "bfloat16"}, offered) == []


def test_estimated_end_to_end_counts_each_tuned_operator_per_call() -> None:
    entries: list[dict[str, Any]] = [
        {"baseline_ms": 3.33, "tuned_ms": 0.6, "calls": 1},
        {"baseline_ms": 0.1, "tuned_ms": 0.05, "calls": 12},
        {"baseline_ms": 0.5, "tuned_ms": None, "calls": 1},  # not tuned: unchanged
    ]
    assert estimated_end_to_end(7.9, entries) == pytest.approx(7.9 - 2.73 - 0.6)
