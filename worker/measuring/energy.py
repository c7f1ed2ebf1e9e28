"""Energy per launch from NVML's total-energy counter, for the ``energy`` objective.

``nvmlDeviceGetTotalEnergyConsumption`` counts millijoules since the driver loaded, but it
advances in steps (every ~10-100 ms depending on the GPU), far coarser than one launch of most
kernels. So energy is measured over a window of back-to-back launches of at least
``min_window_s`` right after the timed repetitions (same launch, same data, clocks already up),
without the L2 flushes of the timed loop (their memsets would be billed to the kernel), and
divided by the launches in it. Power (energy / window) and the SM and memory clocks at the end of
the window are reported with it: an energy number means little without the clocks it ran at.

``nvml`` is the pynvml module (nvidia-ml-py) in production; CPU tests hand in a fake with the
same functions (tests/worker/test_energy.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENERGY_METRICS = (
    "energy_mj",
    "power_w",
    "energy_launches",
    "energy_window_s",
    "energy_sm_clock_mhz",
    "energy_mem_clock_mhz",
)


@dataclass(frozen=True)
class EnergyReading:
    energy_mj_per_launch: float
    power_w: float
    launches: int
    window_s: float
    sm_clock_mhz: int
    mem_clock_mhz: int

    def metrics(self) -> dict[str, Any]:
        return {
            "energy_mj": self.energy_mj_per_launch,
            "power_w": round(self.power_w, 2),
            "energy_launches": self.launches,
            "energy_window_s": round(self.window_s, 4),
            "energy_sm_clock_mhz": self.sm_clock_mhz,
            "energy_mem_clock_mhz": self.mem_clock_mhz,
        }


class EnergyMeter:
    """Reads one GPU's energy counter and clocks through NVML."""

    def __init__(self, nvml: Any, index: int, min_window_s: float = 0.25, max_launches: int = 100_000) -> None:
        nvml.nvmlInit()
        self.nvml = nvml
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        self.min_window_s = min_window_s
        self.max_launches = max_launches
        nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)  # raises NVMLError_NotSupported early

    def _counter(self) -> int:
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def measure(self, launch: Callable[[], Any], synchronize: Callable[[], Any], batch: int = 16) -> EnergyReading:
        """Launch back to back (``batch`` per host wait) until the window is long enough and the
        counter has advanced; energy per launch over the whole window."""
        synchronize()
        first = self._counter()
        start = time.perf_counter()
        launches = 0
        while True:
            for _ in range(batch):
                launch()
            launches += batch
            synchronize()
            elapsed = time.perf_counter() - start
            now = self._counter()
            if (elapsed >= self.min_window_s and now > first) or launches >= self.max_launches:
                break
        nv = self.nvml
        sm = int(nv.nvmlDeviceGetClockInfo(self.handle, nv.NVML_CLOCK_SM))
        mem = int(nv.nvmlDeviceGetClockInfo(self.handle, nv.NVML_CLOCK_MEM))
        joules = (now - first) / 1000.0
        return EnergyReading((now - first) / launches, joules / elapsed, launches, elapsed, sm, mem)


def open_meter(index: int) -> EnergyMeter | None:
    """The meter of NVML device ``index``, or None where NVML or its energy counter is missing
    (pre-Volta GPUs, some virtualized ones): energy is then not reported, time still is."""
    try:
        import pynvml

        return EnergyMeter(pynvml, index)
    except Exception:  # NVMLError_NotSupported, no driver, no library: time-only trials
        return None
