"""GPU tests run on the device machine only:

    python3 -m pytest --confcutdir=tests/gpu -m gpu tests/gpu tests/worker

(``--confcutdir`` keeps the suite's top-level conftest, which starts Postgres and Redis, out of it;
tests/worker holds the backend contract suite, whose cuda case is gpu-marked.) They skip with a
reason where CuPy or a GPU is missing, as in CI.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest


def gpu_missing() -> str | None:
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (GPU tests run on the device machine)"
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return "no NVIDIA GPU"
    except Exception as exc:
        return f"no NVIDIA GPU visible through NVML ({exc})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = gpu_missing()
    if reason is None:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from kernelfarm.kernels.faultinject.kernel import REF, SPEC
    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    options = CudaBackendOptions(
        cache_dir=tmp_path_factory.mktemp("cuda-cache"),
        timeout_s=20.0,
        policy=TimingPolicy(max_time_s=0.3),
    )
    b = CudaBackend(options, specs={"faultinject": SPEC}, spec_refs={"faultinject": REF})
    yield b
    b.close()
