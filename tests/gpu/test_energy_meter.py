"""The energy objective's meter on a real GPU, through the cuda backend's measuring child: a trial that
asks for energy gets NVML's energy per launch beside its time, one that does not is not metered."""

from __future__ import annotations

from typing import Any

import pytest

from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.measuring.energy import ENERGY_METRICS

pytestmark = pytest.mark.gpu

PROBLEMS: dict[str, dict[str, Any]] = {
    "layernorm": {"M": 4096, "N": 4096, "dtype": "float32"},
    "matmul_fp32": {"M": 2048, "N": 2048, "K": 2048},
}


@pytest.mark.parametrize("kernel", sorted(PROBLEMS))
def test_energy_is_metered_only_when_asked(backend: Any, kernel: str) -> None:
    from kernelfarm.kernels.registry import get_kernel

    problem = PROBLEMS[kernel]
    config = get_kernel(kernel).space.valid_configs(problem)[0]
    requests = [MeasureRequest(kernel, problem, config, profile=False, seed=5, energy=e) for e in (True, False)]
    metered, plain = backend.measure_many(requests)
    for m in (metered, plain):
        assert m.failure is None, m.failure_message
        assert m.verified and m.timing is not None
    assert not any(key in plain.metrics for key in ENERGY_METRICS)
    energy_mj, power_w = metered.metrics["energy_mj"], metered.metrics["power_w"]
    # Energy per launch = power x time per launch, within what a real H100/H200 draws under load.
    assert 50.0 < power_w < 1000.0, power_w
    launch_s = metered.metrics["energy_launch_ms"] / 1000.0
    assert energy_mj == pytest.approx(power_w * launch_s * 1000.0, rel=0.5)
    # The meter's launches run at the timed repetitions' pace (back to back, no L2 flush between them).
    assert 0.2 < metered.metrics["energy_launch_ms"] / metered.timing.median_ms < 2.0
    assert metered.metrics["energy_windows"] >= 2
