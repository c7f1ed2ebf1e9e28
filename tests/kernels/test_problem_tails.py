"""Kernels without tail handling refuse non-multiples in their problem signature, with the multiple
named; the problems they are tested and measured on are multiples."""

from __future__ import annotations

import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.kernels.registry import all_kernels, get_kernel

WITH_MULTIPLES = sorted(
    name for name, spec in all_kernels().items() if any(p.multiple_of > 1 for p in spec.problem_params)
)


def test_the_kernels_without_tails_declare_their_multiples() -> None:
    assert {"matmul_fp32", "matmul_bf16", "matmul_bf16_wgmma", "flash_attention", "conv2d",
            "image_convolution"} <= set(WITH_MULTIPLES)  # fmt: skip


@pytest.mark.parametrize("name", WITH_MULTIPLES)
def test_a_non_multiple_is_refused_with_the_multiple_named(name: str) -> None:
    spec = get_kernel(name)
    for param in spec.problem_params:
        if param.multiple_of <= 1:
            continue
        problem = dict(spec.default_problem)
        problem[param.name] = int(problem[param.name]) + param.multiple_of // 2 + 1
        with pytest.raises(InvalidInput, match=f"multiple of {param.multiple_of}"):
            spec.normalize_problem(problem)


@pytest.mark.parametrize("name", WITH_MULTIPLES)
def test_declared_problems_are_multiples_and_have_valid_configs(name: str) -> None:
    spec = get_kernel(name)
    for problem in (*spec.test_problems, spec.default_problem):
        normalized = spec.normalize_problem(problem)
        assert spec.space.valid_configs(normalized), problem


def test_the_row_kernels_accept_a_ragged_row_count_and_test_one() -> None:
    for name in ("softmax", "layernorm"):
        spec = get_kernel(name)
        assert spec.normalize_problem({"M": 1001, "N": 4096, "dtype": "float32"})["M"] == 1001
        assert any(int(p["M"]) % 16 for p in spec.test_problems)  # not a multiple of the largest ROWS
