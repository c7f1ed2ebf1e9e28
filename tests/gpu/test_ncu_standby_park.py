"""A ready standby ncu process is parked: ncu's own process, which spins a CPU core for as long as its
target runs, is stopped while the target waits, continued for the batch, and never outlives its worker."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil
import pytest

from kernelfarm.worker.backends.base import MeasureRequest

pytestmark = pytest.mark.gpu


def parked(standby: object, timeout_s: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if getattr(standby, "parked", False):
            return True
        time.sleep(0.1)
    return False


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def test_the_parked_standby_uses_no_cpu_and_profiles_its_batch(tmp_path: Path) -> None:
    from kernelfarm.kernels.registry import get_kernel
    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
    from kernelfarm.worker.cuda.profile import find_ncu
    from kernelfarm.worker.measuring.timing import TimingPolicy

    if find_ncu() is None:
        pytest.skip("ncu not found")
    backend = CudaBackend(CudaBackendOptions(cache_dir=tmp_path / "cache", timeout_s=20.0,
                                             policy=TimingPolicy(max_time_s=0.3)))  # fmt: skip
    try:
        backend.warm_up()
        standby = backend._profiler._standby
        assert standby is not None and parked(standby), "the standby was not parked once ready"
        ncu = psutil.Process(standby._proc.pid)
        processes = [ncu, *ncu.children(recursive=True)]
        assert [p.status() for p in processes].count(psutil.STATUS_STOPPED) == len(processes) - 1  # not the target
        before = sum(cpu_seconds(p.pid) for p in processes)
        time.sleep(2.0)
        assert sum(cpu_seconds(p.pid) for p in processes) - before < 0.1  # unparked, ncu used a full core
        problem = {"M": 2048, "N": 4096, "dtype": "float32"}
        config = get_kernel("softmax").space.valid_configs(problem)[0]
        (m,) = backend.measure_many([MeasureRequest("softmax", problem, config, profile=True, seed=1)])
        assert m.verified, m.failure_message
        assert "profile_error" not in m.metrics, m.metrics.get("profile_error")
        assert m.metrics["ncu_standby"] is True and m.metrics["ncu_duration_ns"] > 0
        assert backend._profiler._standby is not standby  # the next one, parked in its turn
        assert parked(backend._profiler._standby)
    finally:
        backend.close()


def test_a_parked_standby_ends_with_its_worker() -> None:
    from kernelfarm.kernels.registry import get_kernel
    from kernelfarm.worker.cuda.implementation import entry_names
    from kernelfarm.worker.cuda.profile import StandbyProfiler, find_ncu

    ncu_path = find_ncu()
    if ncu_path is None:
        pytest.skip("ncu not found")
    entries = entry_names([get_kernel("softmax")])
    worker = subprocess.Popen(["sleep", "600"])  # stands for the worker that started the standby
    standby = StandbyProfiler(ncu_path, entries, parent_pid=worker.pid)
    try:
        assert parked(standby)
        worker.kill()
        worker.wait()
        deadline = time.monotonic() + 30
        while standby.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not standby.alive(), "a parked ncu outlived its worker"
        root = str(standby.paths.root)
        targets = [p for p in psutil.process_iter(["cmdline"]) if root in " ".join(p.info["cmdline"] or ())]
        assert not [p for p in targets if p.status() != psutil.STATUS_ZOMBIE], "its target outlived the worker"
    finally:
        standby.close()
