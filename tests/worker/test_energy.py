"""The energy meter's window rule and arithmetic, on a simulated GPU (CPU-only: no GPU here).

``FakeGpu`` stands in for the hardware behind the real interfaces: pynvml's functions (an energy
counter that integrates the GPU's power exactly but is only updated every ``step_s``, as the real
one is), and the launch / synchronize / stream-marker callables the measuring child hands the
meter. Time is virtual: every host action (a launch, an NVML call) costs host time, the GPU runs
the launches it was given one after another, and draws ``busy_w`` while it runs and ``idle_w``
while it waits for the host. So the tests check what matters on hardware: the GPU never idles in
the stretch, windows run from counter step to counter step, and energy per launch is the
stretch's real energy over its launches. The real counter is read on the GPU machine
(benchmarks/gpu/energy_repeat.py)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from kernelfarm.core.objectives import ENERGY_MISSING
from kernelfarm.worker.measuring.energy import ENERGY_METRICS, EnergyMeter, EnergyReading, EnergyUnavailable
from kernelfarm.worker.measuring.session import Session


class FakeGpu:
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(
        self, kernel_s: float, busy_w: float = 300.0, idle_w: float = 60.0, step_s: float = 0.05,
        launch_cost_s: float = 5e-6, nvml_cost_s: float = 20e-6, counter_moves: bool = True,
    ) -> None:  # fmt: skip
        self.kernel_s, self.busy_w, self.idle_w, self.step_s = kernel_s, busy_w, idle_w, step_s
        self.launch_cost_s, self.nvml_cost_s, self.counter_moves = launch_cost_s, nvml_cost_s, counter_moves
        self.now = 1.234  # host time; the counter's steps fall at multiples of step_s
        self.busy: list[list[float]] = []  # [start, end] of each stretch the GPU ran without a gap
        self.launches = 0
        self.max_backlog_s = 0.0
        self._prefix: list[float] = [0.0]  # busy seconds before interval i
        self._start_list: list[float] = []

    # -- the GPU's side of the stream -----------------------------------------------------------
    def busy_until(self) -> float:
        return self.busy[-1][1] if self.busy else 0.0

    def launch(self) -> None:
        self.now += self.launch_cost_s
        start = max(self.now, self.busy_until())
        if self.busy and start <= self.busy[-1][1]:
            self.busy[-1][1] += self.kernel_s
        else:
            self.busy.append([start, start + self.kernel_s])
        self.launches += 1
        self.max_backlog_s = max(self.max_backlog_s, self.busy_until() - self.now)

    def synchronize(self) -> None:
        self.now = max(self.now, self.busy_until())

    def mark(self) -> Callable[[], bool]:
        at = self.busy_until()
        return lambda: self.now >= at

    def clock(self) -> float:
        return self.now

    def busy_s(self, until: float) -> float:
        # intervals are disjoint and ordered; all but the last are closed: prefix sums of their lengths
        while len(self._prefix) < len(self.busy):
            start, end = self.busy[len(self._prefix) - 1]
            self._prefix.append(self._prefix[-1] + end - start)
        i = bisect.bisect_right(self._starts(), until)  # intervals that started by ``until``
        if i == 0:
            return 0.0
        start, end = self.busy[i - 1]
        return self._prefix[i - 1] + min(end, until) - start

    def _starts(self) -> list[float]:
        while len(self._start_list) < len(self.busy):
            self._start_list.append(self.busy[len(self._start_list)][0])
        return self._start_list

    def joules(self, at: float) -> float:
        busy = self.busy_s(at)
        return self.busy_w * busy + self.idle_w * (at - busy)

    # -- pynvml ---------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        self.now += self.nvml_cost_s
        if not self.counter_moves:
            return 1000
        last_update = math.floor(self.now / self.step_s) * self.step_s
        return int(self.joules(last_update) * 1000)  # millijoules, as of the last update

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        self.now += self.nvml_cost_s
        return 1980 if kind == self.NVML_CLOCK_SM else 2619


def meter_for(gpu: FakeGpu, **kwargs: float) -> EnergyMeter:
    return EnergyMeter(gpu, 0, clock=gpu.clock, **kwargs)  # type: ignore[arg-type]


def read(gpu: FakeGpu, meter: EnergyMeter, hint_s: float | None = None) -> EnergyReading:
    return meter.measure(gpu.launch, gpu.synchronize, gpu.mark, gpu.kernel_s if hint_s is None else hint_s)


# One NVML call took 3.45 ms on the H100 of the device machine (benchmarks/gpu/energy_repeat.py's
# idle poll): the host must keep enough work queued to cover its own polling.
@pytest.mark.parametrize("nvml_cost_s", [20e-6, 3.45e-3])
def test_a_short_kernel_runs_back_to_back_and_is_billed_only_its_own_power(nvml_cost_s: float) -> None:
    # layernorm-like: 0.1 ms a launch. The first meter waited for the GPU every 16 launches; here the
    # GPU must never wait for the host, so the reading is the busy power, not a mix with idle power.
    gpu = FakeGpu(kernel_s=1e-4, nvml_cost_s=nvml_cost_s)
    reading = read(gpu, meter_for(gpu, window_s=0.3, windows=3))
    assert len(gpu.busy) == 1  # one stretch without a gap: the GPU never waited for the host
    assert reading.launches == gpu.launches
    assert reading.launch_s == pytest.approx(1e-4, rel=0.01)
    assert reading.power_w == pytest.approx(300.0, rel=0.01)
    assert reading.energy_mj_per_launch == pytest.approx(300.0 * 1e-4 * 1000, rel=0.01)
    assert reading.windows == 3 and reading.spread < 0.02
    assert reading.window_s >= 0.3 and reading.counter_period_s == pytest.approx(0.05, rel=0.02)
    assert reading.sm_clock_mhz == 1980 and reading.mem_clock_mhz == 2619
    assert set(reading.metrics()) == set(ENERGY_METRICS)


def test_a_long_kernel_keeps_one_launch_queued_behind_the_running_one() -> None:
    # 50 ms a launch, longer than the work the host keeps in flight: with a single launch queued the
    # GPU idled through every 3.45 ms NVML poll (a review's simulation: 3 % idle, +2 % energy).
    gpu = FakeGpu(kernel_s=50e-3, nvml_cost_s=3.45e-3)
    reading = read(gpu, meter_for(gpu, window_s=0.3, windows=3))
    assert len(gpu.busy) == 1  # one stretch without a gap
    assert reading.energy_mj_per_launch == pytest.approx(300.0 * 50e-3 * 1000, rel=0.01)


def test_the_host_keeps_little_work_in_flight_even_when_the_hint_is_wrong() -> None:
    # A 3 ms kernel hinted as 1 ms (or 10 ms), NVML calls cheap or as slow as on the H100: the host
    # still never lets the GPU run dry, and never queues seconds of work that the final wait would
    # have to drain.
    for hint, nvml_cost_s in ((1e-3, 20e-6), (1e-2, 20e-6), (3e-3, 3.45e-3), (1e-2, 3.45e-3)):
        gpu = FakeGpu(kernel_s=3e-3, nvml_cost_s=nvml_cost_s)
        reading = read(gpu, meter_for(gpu, window_s=0.3, windows=3), hint_s=hint)
        assert len(gpu.busy) == 1
        assert gpu.max_backlog_s < 0.2  # lead_s (50 ms) times how far the hint is off (3x at most here)
        assert reading.energy_mj_per_launch == pytest.approx(300.0 * 3e-3 * 1000, rel=0.02)


def test_windows_outlast_a_coarse_counter_and_run_step_to_step() -> None:
    # A counter updated every 0.2 s: a 0.3 s window must span two steps (0.4 s), and the power is
    # still exact because each window starts and ends on a step.
    gpu = FakeGpu(kernel_s=5e-4, step_s=0.2)
    reading = read(gpu, meter_for(gpu, window_s=0.3, windows=3))
    assert reading.window_s == pytest.approx(0.4, rel=0.01)
    assert reading.counter_period_s == pytest.approx(0.2, rel=0.01)
    assert reading.power_w == pytest.approx(300.0, rel=0.005)


def test_a_host_bound_kernel_is_billed_what_the_stretch_really_cost() -> None:
    # 2 us kernels launched at 5 us each: the GPU idles between launches whatever the meter does.
    # Nothing is subtracted: energy per launch is the stretch's real energy over its launches.
    gpu = FakeGpu(kernel_s=2e-6)
    start = gpu.now
    reading = read(gpu, meter_for(gpu, window_s=0.3, windows=3))
    truth_mj = (gpu.joules(gpu.now) - gpu.joules(start)) * 1000 / gpu.launches
    assert reading.energy_mj_per_launch == pytest.approx(truth_mj, rel=0.03)
    assert reading.power_w < 200.0  # mostly idle power: the busy fraction is 2/5 at best


def test_a_counter_that_never_moves_gives_no_reading_rather_than_a_guess() -> None:
    gpu = FakeGpu(kernel_s=1e-3, counter_moves=False)
    with pytest.raises(EnergyUnavailable):
        read(gpu, meter_for(gpu, max_s=0.5))
    assert gpu.busy_until() - gpu.busy[0][0] < 0.6  # stopped at the cap


def test_a_gpu_without_the_counter_raises_at_once() -> None:
    class Unsupported(FakeGpu):
        def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
            raise RuntimeError("NVMLError_NotSupported")

    with pytest.raises(RuntimeError):
        EnergyMeter(Unsupported(1e-3), 0)


class _Event:
    """CuPy's event on the simulated GPU's stream."""

    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.passed = gpu, lambda: True

    def record(self, stream: Any) -> None:
        self.passed = self.gpu.mark()

    @property
    def done(self) -> bool:
        return self.passed()


def simulated_session(gpu: FakeGpu) -> Session:
    """The measuring child's session with its meter on the simulated GPU (no CuPy here)."""
    session = Session.__new__(Session)
    session.energy = meter_for(gpu)
    stream = SimpleNamespace(synchronize=gpu.synchronize)
    session.cp = SimpleNamespace(cuda=SimpleNamespace(get_current_stream=lambda: stream, Event=lambda **_: _Event(gpu)))
    return session


def test_the_session_meters_only_the_requests_of_jobs_that_rank_by_energy() -> None:
    """A ``time`` job's request (energy False, or a message without the field) costs no launch and no
    NVML call and records no energy metric; an ``energy`` job's request is metered."""
    gpu = FakeGpu(kernel_s=1e-4)
    session = simulated_session(gpu)
    before = gpu.now
    for message in ({"energy": False}, {}):
        assert session.energy_metrics(message, gpu.launch, gpu.kernel_s) == {}
    assert gpu.launches == 0 and gpu.now == before
    metrics = session.energy_metrics({"energy": True}, gpu.launch, gpu.kernel_s)
    assert set(metrics) == {*ENERGY_METRICS, "energy_s"}
    assert gpu.launches > 0 and metrics["energy_mj"] > 0 and metrics["energy_s"] >= 0


def test_a_request_the_meter_cannot_serve_keeps_its_time_and_says_why() -> None:
    """An ``energy`` job's request with no reading (a GPU without the counter, a counter that did not
    move within the cap, NVML failing mid-reading) records why, never nothing and never a guess; the
    stream is left with no launch of the reading in flight."""
    gpu = FakeGpu(kernel_s=1e-3, counter_moves=False)
    session = simulated_session(gpu)
    session.energy = meter_for(gpu, max_s=0.5)
    stuck = session.energy_metrics({"energy": True}, gpu.launch, gpu.kernel_s)
    assert set(stuck) == {ENERGY_MISSING, "energy_s"}
    assert stuck[ENERGY_MISSING].startswith("the meter gave up: no complete energy window")
    assert gpu.now >= gpu.busy_until()

    class Failing(FakeGpu):
        def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
            if self.launches > 100:
                raise OSError("NVML_ERROR_GPU_IS_LOST")
            return super().nvmlDeviceGetTotalEnergyConsumption(handle)

    lost = Failing(kernel_s=1e-4)
    session = simulated_session(lost)
    failed = session.energy_metrics({"energy": True}, lost.launch, lost.kernel_s)
    assert "NVML_ERROR_GPU_IS_LOST" in failed[ENERGY_MISSING] and "energy_mj" not in failed
    assert lost.launches > 100 and lost.now >= lost.busy_until()  # synchronized before giving up

    session.energy = None  # a GPU without the counter: asked, but nothing to read
    assert session.energy_metrics({"energy": True}, gpu.launch, gpu.kernel_s) == {
        ENERGY_MISSING: "no energy meter on this GPU (NVML or its total-energy counter is missing)"
    }
    assert session.energy_metrics({"energy": False}, gpu.launch, gpu.kernel_s) == {}
