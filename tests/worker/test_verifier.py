"""The verifier's logic on the CPU (NumPy arrays; the measuring child runs the same code on CuPy):
a norm-only check lets a few zeroed rows through, the element-wise bound does not; correct outputs
with the rounding a real kernel shows pass; tolerances follow from dtype and reduction length."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelfarm.kernels.faultinject import flash_zero_rows
from kernelfarm.kernels.gpu_kernel import GpuKernel
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.kernels.tolerance import UNIT_ROUNDOFF, Tolerance
from kernelfarm.worker.measuring.session import second_seed
from kernelfarm.worker.measuring.verifier import errors, poison, verify

RNG = np.random.default_rng(7)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 (nearest even), as raw uint16 bits like the kernels store them."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + ((bits >> 16) & 1) + 0x7FFF) >> 16).astype(np.uint16)


def attention_like(rows: int, width: int) -> np.ndarray:
    """Rows of averages of random values: the scale of an attention output."""
    return (RNG.standard_normal((rows, width)) * 0.05).astype(np.float32)


def test_zeroed_rows_pass_a_norm_only_check_and_fail_the_element_bound() -> None:
    # 16 of 65,536 rows zeroed: the norm error is sqrt(16/65536) ~ 1.6e-2, under the old 2e-2 tolerance.
    ref = attention_like(65536, 64)
    out = ref.copy()
    out[7::4096] = 0.0
    found = errors(bf16_bits(out), bf16_bits(ref))
    assert 1e-2 < found.norm < 2e-2
    norm_only = verify({"O": bf16_bits(out)}, {"O": bf16_bits(ref)}, 2e-2)
    assert norm_only.ok  # what the farm accepted before: the fault the re-measurement planted

    tolerance = flash_attention_tolerance()
    strict = verify({"O": bf16_bits(out)}, {"O": bf16_bits(ref)}, Tolerance(norm=2e-2, element=tolerance.element))
    assert not strict.ok
    assert "element error" in strict.reason() and "relative error" not in strict.reason()
    assert found.worst_index // 64 % 4096 == 7  # the worst element lies in a zeroed row


def flash_attention_tolerance() -> Tolerance:
    spec = get_kernel("flash_attention")
    return spec.impl("cuda", GpuKernel).tolerance(spec.default_problem)


def test_one_unit_of_bf16_rounding_everywhere_passes() -> None:
    # The kernel and the reference round nearly equal fp32 values to bf16: they may differ by one
    # unit in the last place on any element; that must pass.
    ref32 = attention_like(4096, 128)
    nudged = ref32 * np.float32(1 + 2.0**-9)  # past a rounding boundary for about half the elements
    out, ref = bf16_bits(nudged), bf16_bits(ref32)
    assert (out != ref).mean() > 0.3
    tolerance = flash_attention_tolerance()
    assert verify({"O": out}, {"O": ref}, tolerance).ok


@pytest.mark.parametrize("output,length", [("float32", 4096), ("float32", 225), ("bfloat16", 4096)])
def test_correct_fp32_accumulation_in_another_order_passes(output: str, length: int) -> None:
    a = RNG.uniform(-1, 1, (256, length)).astype(np.float32)
    b = RNG.uniform(-1, 1, (length, 64)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # fp32 sums in a blocked order, as a tiled kernel adds its partial products
    partials = [(a[:, k : k + 8] @ b[k : k + 8]).astype(np.float32) for k in range(0, length, 8)]
    blocked = sum(partials[1:], start=partials[0])
    tolerance = Tolerance.derived(1e-2 if output == "bfloat16" else 1e-5, output, length)
    if output == "bfloat16":
        out, ref = bf16_bits(blocked), bf16_bits(exact.astype(np.float32))
    else:
        out, ref = blocked.astype(np.float32), exact.astype(np.float32)
    verdict = verify({"C": out}, {"C": ref}, tolerance)
    assert verdict.ok, verdict.reason()
    assert verdict.errors.element < tolerance.element / 2  # the bound has room to spare


def test_one_wrong_element_fails_whatever_the_norm() -> None:
    ref = RNG.uniform(-1, 1, (2048, 2048)).astype(np.float32)
    out = ref.copy()
    out[1000, 3] += 0.5  # one element of 4M: norm error ~ 4e-4
    tolerance = Tolerance.derived(1e-3, "float32", 4096)
    verdict = verify({"y": out}, {"y": ref}, tolerance)
    assert verdict.errors.norm < 1e-3 and not verdict.ok
    assert verdict.errors.worst_index == 1000 * 2048 + 3
    assert math.isclose(verdict.errors.max_abs, 0.5, rel_tol=1e-6)


def test_unwritten_nan_and_a_shape_mismatch_fail() -> None:
    ref = RNG.uniform(-1, 1, 1024).astype(np.float32)
    out = ref.copy()
    poison(out[:10])
    assert not verify({"y": out}, {"y": ref}, Tolerance(1.0, 1.0)).ok
    assert "NaN" in verify({"y": out}, {"y": ref}, Tolerance(1.0, 1.0)).reason()
    assert not verify({"y": ref[:-1]}, {"y": ref}, Tolerance(1.0, 1.0)).ok


def test_the_worse_output_decides_and_a_bare_float_is_a_norm_bound() -> None:
    ref = RNG.uniform(-1, 1, 1000).astype(np.float32)
    bad = ref.copy()
    bad[0] = -bad[0]
    verdict = verify({"a": ref.copy(), "b": bad}, {"a": ref, "b": ref}, Tolerance(1.0, 0.1))
    assert not verdict.ok and verdict.errors.worst_index == 0
    assert verify({"a": bad}, {"a": ref}, 0.5).ok  # no element bound declared: norm only


def test_derived_element_bound_follows_dtype_and_reduction_length() -> None:
    fp32_short = Tolerance.derived(1e-5, "float32", 16).element
    fp32_long = Tolerance.derived(1e-5, "float32", 4096).element
    bf16 = Tolerance.derived(1e-2, "bfloat16", 4096).element
    assert fp32_short < fp32_long < bf16 < 0.05
    assert math.isclose(fp32_long, 2 * UNIT_ROUNDOFF["float32"] + 8 * UNIT_ROUNDOFF["float32"] * 64)
    assert bf16 >= 2 * UNIT_ROUNDOFF["bfloat16"]  # one bf16 unit in the last place always passes
    with pytest.raises(ValueError):
        Tolerance(norm=0.0, element=1e-3)


def test_every_registered_cuda_kernel_declares_both_bounds_below_a_zeroed_row() -> None:
    from kernelfarm.kernels.cuda_kernel import CudaKernel
    from kernelfarm.kernels.registry import all_kernels

    for name, spec in all_kernels().items():
        if "cuda" not in spec.backends:
            continue
        kernel = spec.impl("cuda", CudaKernel)
        for problem in (*spec.test_problems, spec.default_problem):
            tolerance = kernel.tolerance(spec.normalize_problem(problem))
            # A zeroed element whose reference is the output's rms scores 1/2: every bound is far below.
            assert isinstance(tolerance, Tolerance) and tolerance.element < 0.1, (name, tolerance)


def test_second_seed_differs_and_the_fault_variant_changes_only_its_anchor_line() -> None:
    assert all(second_seed(s) != s and second_seed(s) > 0 for s in (0, 1, 2, 12345, (1 << 31) - 1))
    real = get_kernel("flash_attention").impls["cuda"].source.text  # type: ignore[attr-defined]
    faulty = flash_zero_rows.SPEC.impls["cuda"].source.text  # type: ignore[attr-defined]
    assert faulty != real and faulty.replace(flash_zero_rows._FAULT, flash_zero_rows._ROW_LINE) == real
