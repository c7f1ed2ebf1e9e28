"""An uploaded kernel's compiler options reach NVRTC: the same kernel and config compiled with and without
``--maxrregcount=32`` through the cuda backend as a worker runs it. ptxas says it took the limit ("Overriding
maximum register limit 256 for 'axpb' with 32 of maxrregcount option", NVRTC 13.0 on an H200); the registers
cannot show it here: axpb needs 24, and 24 is sm_90's lower bound (a limit of 16 is raised to it, ptxas warns).
Both configs still verify against the reference."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.bundle import check_bundle
from tests.gpu.backends import correctness_backend
from tests.kernels.manifests import user_manifest, user_uploads

pytestmark = pytest.mark.gpu

LIMIT = 32
PLAIN, LIMITED = "user-axpb", "user-axpb-regs"
# The largest tile: 32 elements a thread, unrolled.
CONFIG = {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 4, "tile_size_y": 8}


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cache = tmp_path_factory.mktemp("kernel-cache")
    specs = {}
    for name, options in ((PLAIN, []), (LIMITED, [f"--maxrregcount={LIMIT}"])):
        manifest = user_manifest()
        manifest = {**manifest, "name": name, "source": {**manifest["source"], "compiler_options": options}}
        bundle = check_bundle(manifest, user_uploads())
        specs[name] = build_spec(bundle, 1, cache / bundle.content_hash)
    yield from correctness_backend(tmp_path_factory, specs)


def test_a_manifests_maxrregcount_reaches_ptxas_and_its_configs_still_verify(backend: Any) -> None:
    from kernelfarm.worker.backends.base import MeasureRequest

    problem = {"M": 2048, "N": 4096}
    requests = [MeasureRequest(name, problem, CONFIG, profile=False, seed=7) for name in (PLAIN, LIMITED)]
    plain_log, limited_log = (backend.compile(request).result().log for request in requests)
    taken = re.compile(rf"Overriding maximum register limit \d+ for 'axpb' with\s+{LIMIT} of maxrregcount option")
    assert taken.search(limited_log), limited_log
    assert "maxrregcount" not in plain_log, plain_log
    plain, limited = backend.measure_many(requests)
    for m in (plain, limited):
        assert m.failure is None and m.verified, (m.failure, m.failure_message)
        assert m.metrics["ptxas_registers"] <= LIMIT
    assert f"--maxrregcount={LIMIT}" in limited.provenance["compile_options"]
    assert not any("maxrregcount" in o for o in plain.provenance["compile_options"])
    assert plain.provenance["cubin_key"] != limited.provenance["cubin_key"]
