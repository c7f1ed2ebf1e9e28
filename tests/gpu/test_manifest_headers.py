"""A manifest's naive CUDA reference on the GPU: one that includes one of the upload's headers compiles and verifies
the kernel (before, CuPy compiled it with no folder for an `#include "name"`, and every trial failed); one that does
not compile fails each trial as COMPILE with NVRTC's log, its host paths replaced (before: a CRASH naming the
measuring child's temporary folder). A Python reference that raises is a CRASH whose traceback names each file by
its module path, not by the host's folders."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.bundle import check_bundle
from tests.gpu.backends import correctness_backend
from tests.kernels.manifests import user_manifest, user_uploads

pytestmark = pytest.mark.gpu

NAME = "user-axpb-shared-header"
BROKEN = "user-axpb-broken-reference"
RAISING = "user-axpb-raising-python-reference"
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
# The same reference calling a function no header defines: NVRTC reports it at the reference's line.
BROKEN_REFERENCE = REFERENCE.replace("axpb_value(", "axpb_value_missing(")
RAISING_REFERENCE = """def reference(buffers, problem):
    raise ValueError("this reference refuses every input")
"""


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cache = tmp_path_factory.mktemp("kernel-cache")
    specs = {}
    for name, reference in ((NAME, REFERENCE), (BROKEN, BROKEN_REFERENCE)):
        bundle = check_bundle(user_manifest() | {"name": name}, user_uploads() | {"axpb_naive.cu": reference.encode()})
        specs[name] = build_spec(bundle, 1, cache / bundle.content_hash)
    python = user_manifest() | {"name": RAISING, "reference": {"python": "reference.py"}}
    uploads = {name: data for name, data in user_uploads().items() if name != "axpb_naive.cu"}  # no CUDA reference
    bundle = check_bundle(python, uploads | {"reference.py": RAISING_REFERENCE.encode()})
    specs[RAISING] = build_spec(bundle, 1, cache / bundle.content_hash)
    yield from correctness_backend(tmp_path_factory, specs)


def test_a_reference_including_an_uploaded_header_verifies_the_kernel(backend: Any) -> None:
    from kernelfarm.worker.backends.base import MeasureRequest

    configs = [{"block_size_x": 32, "block_size_y": 4, "tile_size_x": t, "tile_size_y": 2} for t in (1, 4)]
    measured = backend.measure_many([MeasureRequest(NAME, {"M": 2048, "N": 4096}, c, profile=False, seed=7)
                                     for c in configs])  # fmt: skip
    assert all(m.failure is None and m.verified for m in measured), [(m.failure, m.failure_message) for m in measured]


def test_a_reference_that_does_not_compile_fails_each_trial_as_compile_with_a_scrubbed_log(backend: Any) -> None:
    from kernelfarm.core.states import FailureKind
    from kernelfarm.worker.backends.base import MeasureRequest

    configs = [{"block_size_x": 32, "block_size_y": 4, "tile_size_x": t, "tile_size_y": 2} for t in (1, 4)]
    measured = backend.measure_many([MeasureRequest(BROKEN, {"M": 256, "N": 256}, c, profile=False, seed=7)
                                     for c in configs])  # fmt: skip
    for m in measured:
        assert m.failure == FailureKind.COMPILE, (m.failure, m.failure_message)
        message = m.failure_message or ""
        assert "the naive reference axpb_naive.cu does not compile" in message
        assert "axpb_naive.cu(" in message and "axpb_value_missing" in message, message  # NVRTC's line, by file
        assert "/tmp" not in message and backend_folders_absent(message), message
    # the child was not poisoned by it: the working kernel measures on the same backend afterwards
    ok = backend.measure_many([MeasureRequest(NAME, {"M": 256, "N": 256}, configs[0], profile=False, seed=7)])
    assert ok[0].failure is None and ok[0].verified, (ok[0].failure, ok[0].failure_message)


def test_a_python_reference_that_raises_is_a_crash_whose_traceback_names_no_host_folder(backend: Any) -> None:
    from kernelfarm.core.states import FailureKind
    from kernelfarm.worker.backends.base import MeasureRequest

    config = {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 1, "tile_size_y": 2}
    measured = backend.measure_many([MeasureRequest(RAISING, {"M": 256, "N": 256}, config, profile=False, seed=7)])
    message = measured[0].failure_message or ""
    assert measured[0].failure == FailureKind.CRASH, (measured[0].failure, message)
    assert "ValueError: this reference refuses every input" in message, message
    assert 'File "reference.py", line 2, in reference' in message, message  # the upload's file, by its own name
    assert "kernelfarm/kernels/manifest/cuda.py" in message, message  # ours, by module path
    assert backend_folders_absent(message), message


def backend_folders_absent(message: str) -> bool:
    """No absolute path of this host in the message (a stored failure is shown to every reader of the job)."""
    return not any(word.startswith("/") and "/" in word[1:] for word in message.split())
