"""GPU tests run on the device machine only, with the package installed (docs/benchmarks/GPU.md):

    python3 -P -m pytest -m gpu --ignore=tests/reliability/test_api_fuzz.py tests

(every gpu-marked test: this folder, the cuda case of tests/worker/test_backend_contract.py and the GPU
checks of tests/kernels/test_kernel_contract.py; the fuzz test needs schemathesis, which GPU nodes lack).
Where CuPy or a GPU is missing, as in CI, this hook skips every gpu-marked test with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gpu.availability import gpu_missing


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = gpu_missing()
    if reason is None:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from kernelfarm.kernels.faultinject import flash_zero_rows, memory_hog
    from kernelfarm.kernels.faultinject.kernel import REF, SPEC
    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    options = CudaBackendOptions(
        cache_dir=tmp_path_factory.mktemp("cuda-cache"),
        timeout_s=20.0,
        policy=TimingPolicy(max_time_s=0.3),
    )
    b = CudaBackend(
        options,
        specs={
            "faultinject": SPEC,
            flash_zero_rows.SPEC.name: flash_zero_rows.SPEC,
            memory_hog.SPEC.name: memory_hog.SPEC,
        },
        spec_refs={
            "faultinject": REF,
            flash_zero_rows.SPEC.name: flash_zero_rows.REF,
            memory_hog.SPEC.name: memory_hog.REF,
        },
    )
    yield b
    b.close()
