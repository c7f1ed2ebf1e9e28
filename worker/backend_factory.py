"""Build the configured backend. The cuda and triton backends are imported lazily: CPU-only hosts have
no CuPy and no Triton. The replay backend too: ``kernelfarm worker`` checks the backend's name against
BACKEND_NAMES before it execs Celery, without loading what the worker itself loads next."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelfarm.core.settings import Settings
    from kernelfarm.worker.backends.base import Backend

# Every backend a worker can run; each one passes tests/worker/test_backend_contract.py.
BACKEND_NAMES = ("cuda", "triton", "replay", "fake")


def make_backend(settings: Settings) -> Backend:
    """The backend ``settings.worker_backend`` names, configured from ``settings``.

    Raises:
        ValueError: an unknown backend name.
    """
    if settings.worker_backend == "replay":
        from kernelfarm.worker.backends.replay import ReplayBackend

        paths = [Path(p) for p in settings.worker_landscapes.split(os.pathsep) if p]
        return ReplayBackend(paths, sleep_ms=settings.worker_sleep_ms, time_scale=settings.worker_time_scale)
    if settings.worker_backend in ("cuda", "triton"):
        return _gpu_backend(settings)
    if settings.worker_backend == "fake":
        from kernelfarm.kernels.spec import format_bytes
        from kernelfarm.worker.backends.fake import FAKE_GPU_NAME, FakeBackend

        memory = settings.worker_fake_memory_bytes
        if memory is None:
            return FakeBackend()
        return FakeBackend(gpu_name=f"{FAKE_GPU_NAME} {format_bytes(memory)}", memory_bytes=memory)
    raise ValueError(f"unknown worker backend {settings.worker_backend!r} (expected one of {', '.join(BACKEND_NAMES)})")


def _gpu_backend(settings: Settings) -> Backend:
    """The cuda or triton backend: the same options, each with its own compile cache."""
    from kernelfarm.worker.backends.gpu import GpuBackend, GpuBackendOptions

    backend: type[GpuBackend]
    if settings.worker_backend == "cuda":
        from kernelfarm.worker.backends.cuda import CudaBackend as backend

        cache = settings.cuda_cache
    else:
        from kernelfarm.worker.backends.triton import TritonBackend as backend

        cache = settings.triton_cache
    options = GpuBackendOptions(
        cache_dir=cache, profile_standby=settings.worker_profile_standby, child_log_level=settings.child_log,
        cuda_include_dirs=tuple(settings.cuda_include_dirs) if settings.cuda_include_dirs else None,
    )  # fmt: skip
    return backend(options, device_index=settings.worker_gpu)
