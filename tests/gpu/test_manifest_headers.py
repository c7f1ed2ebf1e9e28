"""A manifest's naive CUDA reference that includes one of the upload's headers compiles and verifies the kernel
on the GPU (before, CuPy compiled it with no folder for an `#include "name"`, and every trial failed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.bundle import check_bundle
from tests.kernels.manifests import user_manifest, user_uploads

pytestmark = pytest.mark.gpu

NAME = "user-axpb-shared-header"
# The reference computes each element with the kernel's own header's function, as a user sharing it would.
REFERENCE = """#include "axpb_common.h"
extern "C" __global__ void axpb_naive(float *out, const float *x, const float *bias, float alpha, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (r < rows && c < cols) {
        out[r * cols + c] = axpb_value(alpha, x[r * cols + c], bias[c]);
    }
}
"""


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    bundle = check_bundle(user_manifest() | {"name": NAME}, user_uploads() | {"axpb_naive.cu": REFERENCE.encode()})
    spec = build_spec(bundle, 1, tmp_path_factory.mktemp("kernel-cache") / bundle.content_hash)
    options = CudaBackendOptions(
        cache_dir=tmp_path_factory.mktemp("cuda-cache"),
        timeout_s=60.0,
        policy=TimingPolicy(max_time_s=0.2),
        roofline=False,
        profile_standby=False,
    )
    made = CudaBackend(options, specs={NAME: spec})
    yield made
    made.close()


def test_a_reference_including_an_uploaded_header_verifies_the_kernel(backend: Any) -> None:
    from kernelfarm.worker.backends.base import MeasureRequest

    configs = [{"block_size_x": 32, "block_size_y": 4, "tile_size_x": t, "tile_size_y": 2} for t in (1, 4)]
    measured = backend.measure_many([MeasureRequest(NAME, {"M": 2048, "N": 4096}, c, profile=False, seed=7)
                                     for c in configs])  # fmt: skip
    assert all(m.failure is None and m.verified for m in measured), [(m.failure, m.failure_message) for m in measured]
