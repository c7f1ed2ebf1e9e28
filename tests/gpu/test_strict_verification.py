"""On the GPU: a wrong-but-fast config cannot pass verification.

- flash_zero_rows is the real flash-attention kernel storing zeros for one query row per head: as
  fast as the real one, and its norm error is under the old norm-only tolerance (2e-2). The
  element-wise bound rejects it; the real kernel with the same config passes.
- faultinject's MODE 6 is wrong only on inputs whose first element exceeds 1 (half the seeds): a
  config that passes on its job's input set is checked on a second one before it can be best.
"""

from __future__ import annotations

from typing import Any

import pytest

from kernelfarm.core.states import FailureKind
from kernelfarm.kernels.faultinject import flash_zero_rows
from kernelfarm.kernels.faultinject.kernel import MODES
from kernelfarm.kernels.gpu_kernel import GpuKernel
from kernelfarm.kernels.registry import get_kernel
from kernelfarm.worker.backends.base import MeasureRequest

pytestmark = pytest.mark.gpu

# 16 heads x 4096 queries = 65,536 rows; one zeroed per head: 16 rows, a norm error near 1.6e-2.
PROBLEM = {"B": 1, "H": 16, "S": 4096, "D": 64, "causal": 0}


def flash_config() -> dict[str, Any]:
    spec = get_kernel("flash_attention")
    configs = spec.space.valid_configs(spec.normalize_problem(PROBLEM))
    return next(c for c in configs if c["WARPS"] == 4 and c["BLOCK_N"] == 64) if configs else {}


def test_flash_attention_with_zeroed_rows_is_rejected_and_the_real_kernel_passes(backend: Any) -> None:
    config = flash_config()
    real = backend.measure(MeasureRequest("flash_attention", PROBLEM, config, profile=False, seed=11))
    assert real.failure is None and real.verified, real.failure_message
    tolerance = get_kernel("flash_attention").impl("cuda", GpuKernel).tolerance(PROBLEM)
    assert real.metrics["element_error"] < tolerance.element

    faulty_config = {**config, "ZERO_EVERY": 1 << 20, "ZERO_AT": 7}
    faulty = backend.measure(MeasureRequest(flash_zero_rows.SPEC.name, PROBLEM, faulty_config, profile=False, seed=11))
    assert faulty.failure == FailureKind.WRONG_RESULT, faulty.failure_message
    assert not faulty.verified and faulty.timing is None
    assert "element error" in (faulty.failure_message or "")
    # The old check alone (norm under 2e-2) would have passed it: the element bound is what caught it.
    assert faulty.metrics["rel_error"] < 2e-2 < faulty.metrics["element_error"]


def test_a_config_wrong_on_some_inputs_is_caught_by_the_second_input_set(backend: Any) -> None:
    outcomes = []
    for seed in range(100, 140):
        m = backend.measure(
            MeasureRequest("faultinject", {"n": 1 << 16}, {"MODE": MODES["wrong_on_some_inputs"]}, False, seed=seed)
        )
        outcomes.append(m)
        assert m.failure == FailureKind.WRONG_RESULT or m.verified
    second = [m for m in outcomes if "second input seed" in (m.failure_message or "")]
    assert second, [m.failure_message for m in outcomes]
    assert all(m.metrics["rel_error"] == 0.0 for m in second)  # it did pass on the job's own inputs
    # A verified one was right on both input sets (checked on the second: it was this child's fastest).
    for m in outcomes:
        if m.verified:
            assert m.metrics["second_seed_rel_error"] == 0.0
    correct = backend.measure(MeasureRequest("faultinject", {"n": 1 << 16}, {"MODE": MODES["ok"]}, False, seed=3))
    assert correct.verified and correct.metrics["second_seed_element_error"] == 0.0
