"""Energy per launch from NVML's total-energy counter, for the ``energy`` objective.

``nvmlDeviceGetTotalEnergyConsumption`` counts millijoules since the driver loaded, but it
advances in steps (its update period, measured on every reading and reported), far coarser than
one launch of most kernels. How a reading is taken, and why:

- **The GPU never idles inside the window.** Launches are enqueued back to back with no host wait
  between them; the host keeps ``lead_s`` of work in flight (topped up before every poll; a
  stream marker every ``chunk_s`` of work tells it how far the GPU got), and polls the counter
  while the GPU works. The first version waited for the GPU after every 16 launches: for a 0.1 ms
  kernel the GPU then idled half the window or more, and that idle power was billed to the kernel.
  An NVML call itself is slow (3.45 ms on the H100 of the device machine), so the work in flight
  must cover several calls.
- **Windows run from one counter step to another.** A window opens at a step of the counter and
  closes at the first step at least ``window_s`` (and two steps) later, so it holds exactly the
  energy the counter credited between two known host times; reading the counter at arbitrary
  times instead left up to one update period of unaccounted time at each end.
- **Several windows, the median.** ``windows`` consecutive windows; the reading is their median
  power, and their spread ((max - min) / median) says how far one reading can be trusted.
- **Energy per launch = median power x seconds per launch** of the whole back-to-back stretch
  (first launch to the final wait, over the launches): both measured in the same stretch; nothing
  (no idle baseline) is subtracted.

The stretch follows the timed repetitions (same launch, same data, clocks already up) without
their L2 flushes (whose memsets would be billed to the kernel). The SM and memory clocks are read
at each window's end (the lowest is reported): an energy number means little without them.

``nvml`` is the pynvml module (nvidia-ml-py) in production; CPU tests hand in a fake with the
same functions (tests/worker/test_energy.py).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Records a marker on the launch stream; the returned callable says whether the GPU has passed it.
Marker = Callable[[], Callable[[], bool]]

ENERGY_METRICS = (
    "energy_mj",
    "energy_spread",
    "power_w",
    "energy_windows",
    "energy_window_s",
    "energy_launches",
    "energy_launch_ms",
    "energy_counter_period_ms",
    "energy_sm_clock_mhz",
    "energy_mem_clock_mhz",
)


class EnergyUnavailable(RuntimeError):
    """No reading: no complete window within the time cap (the counter did not move), or NVML failed
    in the middle of one. No energy is reported rather than a guess."""


@dataclass(frozen=True)
class EnergyReading:
    energy_mj_per_launch: float
    power_w: float  # median over the windows
    spread: float  # (max - min) / median of the windows' power
    windows: int
    window_s: float  # median window length
    launches: int  # in the whole back-to-back stretch
    launch_s: float  # stretch seconds / launches
    counter_period_s: float  # median interval between the counter's steps seen in the stretch
    sm_clock_mhz: int  # lowest at the windows' ends
    mem_clock_mhz: int

    def metrics(self) -> dict[str, Any]:
        return {
            "energy_mj": self.energy_mj_per_launch,
            "energy_spread": round(self.spread, 4),
            "power_w": round(self.power_w, 2),
            "energy_windows": self.windows,
            "energy_window_s": round(self.window_s, 4),
            "energy_launches": self.launches,
            "energy_launch_ms": self.launch_s * 1000.0,
            "energy_counter_period_ms": round(self.counter_period_s * 1000.0, 3),
            "energy_sm_clock_mhz": self.sm_clock_mhz,
            "energy_mem_clock_mhz": self.mem_clock_mhz,
        }


class EnergyMeter:
    """Reads one GPU's energy counter and clocks through NVML."""

    def __init__(
        self, nvml: Any, index: int, window_s: float = 0.3, windows: int = 3, chunk_s: float = 0.001,
        lead_s: float = 0.05, max_s: float = 4.0, clock: Callable[[], float] = time.perf_counter,
    ) -> None:  # fmt: skip
        nvml.nvmlInit()
        self.nvml = nvml
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        self.window_s, self.windows, self.chunk_s, self.lead_s, self.max_s = window_s, windows, chunk_s, lead_s, max_s
        self.clock = clock
        nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)  # raises NVMLError_NotSupported early

    def _counter(self) -> int:
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception as exc:  # an NVMLError mid-reading ends the reading, not the trial's timing
            raise EnergyUnavailable(f"NVML's energy counter failed: {exc!r}") from exc

    def _clocks(self) -> tuple[int, int]:
        nv = self.nvml
        try:
            return int(nv.nvmlDeviceGetClockInfo(self.handle, nv.NVML_CLOCK_SM)), int(
                nv.nvmlDeviceGetClockInfo(self.handle, nv.NVML_CLOCK_MEM)
            )
        except Exception as exc:
            raise EnergyUnavailable(f"NVML's clock query failed: {exc!r}") from exc

    def measure(
        self, launch: Callable[[], Any], synchronize: Callable[[], Any], mark: Marker, launch_s_hint: float
    ) -> EnergyReading:
        """One reading over a back-to-back stretch of ``launch``.

        Args:
            launch: enqueues one launch; must not wait for the GPU.
            synchronize: waits for the stream.
            mark: records a stream marker (see :data:`Marker`); paces the host, never waits.
            launch_s_hint: about how long one launch runs (the timed median); sizes the chunks
                between markers and the work kept in flight, nothing else.

        Raises:
            EnergyUnavailable: no complete window within ``max_s``, or an NVML call failed (the
                stream is synchronized first: no launch of the reading is left in flight).
        """
        hint = max(launch_s_hint, 1e-7)
        chunk = max(1, min(256, round(self.chunk_s / hint)))
        # In flight: enough that the host's polling never starves the GPU (one NVML call took
        # 3.45 ms on an H100; a window's end makes three), bounded below the driver's launch queue
        # (a full queue would block the host inside launch()). At least two chunks: a kernel longer than
        # lead_s would otherwise have one launch in flight and the GPU would idle through every poll.
        lead = max(2 * chunk, min(512, round(self.lead_s / hint)))
        clock, counter = self.clock, self._counter
        pending: deque[tuple[int, Callable[[], bool]]] = deque()
        done = launches = 0
        steps: list[float] = []  # host times of the counter's steps
        powers: list[float] = []
        lengths: list[float] = []
        sm_clocks: list[int] = []
        mem_clocks: list[int] = []
        anchor: tuple[float, int, int] | None = None  # (time, value, step index) of the open window

        synchronize()
        start = clock()
        try:
            last = counter()
            while len(powers) < self.windows:
                while pending and pending[0][1]():
                    done = pending.popleft()[0]
                while launches - done < lead:  # top up: one poll of NVML can outlast many launches
                    for _ in range(chunk):
                        launch()
                    launches += chunk
                    pending.append((launches, mark()))
                value, now = counter(), clock()
                if value != last:
                    last = value
                    steps.append(now)
                    if anchor is None:
                        anchor = (now, value, len(steps))
                    elif now - anchor[0] >= self.window_s and len(steps) - anchor[2] >= 2:
                        powers.append((value - anchor[1]) / 1000.0 / (now - anchor[0]))
                        lengths.append(now - anchor[0])
                        sm, mem = self._clocks()
                        sm_clocks.append(sm)
                        mem_clocks.append(mem)
                        anchor = (now, value, len(steps))
                if now - start > self.max_s:
                    break
        except EnergyUnavailable:
            synchronize()  # NVML failed mid-reading: leave no launch of it in flight
            raise
        synchronize()
        elapsed = clock() - start
        if not powers or launches == 0:
            raise EnergyUnavailable(
                f"the meter gave up: no complete energy window in {elapsed:.2f} s (the counter stepped "
                f"{len(steps)} time(s))"
            )
        power = statistics.median(powers)
        launch_s = elapsed / launches
        period = statistics.median(b - a for a, b in itertools.pairwise(steps))
        return EnergyReading(
            energy_mj_per_launch=power * launch_s * 1000.0,
            power_w=power,
            spread=(max(powers) - min(powers)) / power if power > 0 else 0.0,
            windows=len(powers),
            window_s=statistics.median(lengths),
            launches=launches,
            launch_s=launch_s,
            counter_period_s=period,
            sm_clock_mhz=min(sm_clocks),
            mem_clock_mhz=min(mem_clocks),
        )


def open_meter(index: int) -> EnergyMeter | None:
    """The meter of NVML device ``index``, or None where NVML or its energy counter is missing
    (pre-Volta GPUs, some virtualized ones): energy is then not reported, time still is."""
    try:
        import pynvml

        return EnergyMeter(pynvml, index)
    except Exception:  # NVMLError_NotSupported, no driver, no library: time-only trials
        return None
