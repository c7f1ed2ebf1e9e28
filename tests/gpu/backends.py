"""The cuda backend as the GPU tests that check correctness (and ptxas' report) start it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kernelfarm.kernels.spec import KernelSpec


def correctness_backend(tmp_path_factory: pytest.TempPathFactory, specs: Mapping[str, KernelSpec]) -> Iterator[Any]:
    """A cuda backend for ``specs`` with its own cubin cache, short timing and no roofline ceilings or Nsight
    Compute standby (these tests verify, they do not compare speed); closed when the generator resumes."""
    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    options = CudaBackendOptions(
        cache_dir=tmp_path_factory.mktemp("cuda-cache"),
        timeout_s=60.0,
        policy=TimingPolicy(max_time_s=0.2),
        roofline=False,
        profile_standby=False,
    )
    backend = CudaBackend(options, specs=dict(specs))
    yield backend
    backend.close()
