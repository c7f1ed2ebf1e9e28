"""Build the configured backend. The cuda backend is imported lazily: CPU-only hosts have no CuPy."""

from __future__ import annotations

import os
from pathlib import Path

from kernelfarm.core.settings import Settings
from kernelfarm.worker.backends.base import Backend
from kernelfarm.worker.backends.replay import ReplayBackend


def make_backend(settings: Settings) -> Backend:
    if settings.worker_backend == "replay":
        paths = [Path(p) for p in settings.worker_landscapes.split(os.pathsep) if p]
        return ReplayBackend(paths, sleep_ms=settings.worker_sleep_ms, time_scale=settings.worker_time_scale)
    if settings.worker_backend == "cuda":
        from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions

        options = CudaBackendOptions(profile_standby=settings.worker_profile_standby)
        return CudaBackend(options, device_index=settings.worker_gpu)
    raise ValueError(f"unknown worker backend {settings.worker_backend!r} (expected 'cuda' or 'replay')")
