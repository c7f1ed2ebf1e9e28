"""The energy meter's arithmetic and window rule, with a fake NVML (CPU-only: no GPU here).

The fake has pynvml's functions and a counter that advances in 50 ms steps, as the real one
does, so the test checks what matters on hardware: the window outlasts the counter's step, and
energy per launch is the counter's difference over the launches in the window. The real counter
is read on the GPU machine (tests/worker/test_energy_gpu.py, marked gpu)."""

from __future__ import annotations

import time

import pytest

from kernelfarm.worker.measuring.energy import ENERGY_METRICS, EnergyMeter


class FakeNvml:
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, watts: float, step_s: float = 0.05, supported: bool = True) -> None:
        self.watts, self.step_s, self.supported = watts, step_s, supported
        self.t0 = time.perf_counter()

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if not self.supported:
            raise RuntimeError("NVMLError_NotSupported")
        steps = int((time.perf_counter() - self.t0) / self.step_s)  # the counter moves in steps
        return int(steps * self.step_s * self.watts * 1000)  # millijoules

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        return 1980 if kind == self.NVML_CLOCK_SM else 2619


def test_energy_per_launch_is_the_counter_difference_over_the_window() -> None:
    nvml = FakeNvml(watts=300.0)
    meter = EnergyMeter(nvml, 0, min_window_s=0.2)
    launches = 0

    def launch() -> None:
        nonlocal launches
        launches += 1
        time.sleep(0.0005)

    reading = meter.measure(launch, lambda: None, batch=16)
    assert reading.launches == launches and reading.window_s >= 0.2
    # 300 W over the window, within one counter step
    assert reading.power_w == pytest.approx(300.0, rel=0.35)
    assert reading.energy_mj_per_launch == pytest.approx(reading.power_w * reading.window_s * 1000 / launches)
    assert reading.sm_clock_mhz == 1980 and reading.mem_clock_mhz == 2619
    assert set(reading.metrics()) == set(ENERGY_METRICS)


def test_a_gpu_without_the_counter_raises_at_once() -> None:
    with pytest.raises(RuntimeError):
        EnergyMeter(FakeNvml(1.0, supported=False), 0)
