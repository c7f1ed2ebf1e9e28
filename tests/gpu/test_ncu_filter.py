"""ncu's kernel filter comes from the kernels being profiled: a kernel whose entry is not named
``kf_*`` is profiled, by the standby ncu process and by a fresh one, and the kernels that make its
inputs are not (a profile with more or fewer kernels than launches reports a profile_error)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from kernelfarm.worker.backends.base import MeasureRequest

pytestmark = pytest.mark.gpu

ENTRY = "copy_not_prefixed"
# The fault kernel under another name, importable by the processes the backend spawns (they get the
# module's name: the measuring child through sys.path, ncu's target through PYTHONPATH).
MODULE = f'''
from dataclasses import replace
from pathlib import Path

from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.faultinject.kernel import SPEC as FAULT, FaultKernel


class RenamedKernel(FaultKernel):
    entry = "{ENTRY}"


SOURCE = CudaSource.from_file(Path(__file__).with_name("renamed.cu"))
SPEC = replace(FAULT, name="renamed_copy", impls={{"cuda": RenamedKernel(SOURCE)}})
'''


def test_a_kernel_not_named_kf_is_profiled_by_the_standby_and_by_a_fresh_ncu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelfarm.kernels.cuda_kernel import CudaKernel
    from kernelfarm.kernels.faultinject.kernel import SPEC as FAULT
    from kernelfarm.worker.backends.cuda import CudaBackend, CudaBackendOptions
    from kernelfarm.worker.cuda.profile import find_ncu
    from kernelfarm.worker.measuring.timing import TimingPolicy

    if find_ncu() is None:
        pytest.skip("ncu not found")
    source = FAULT.impl("cuda", CudaKernel).source.text
    (tmp_path / "renamed.cu").write_text(source.replace("kf_fault", ENTRY))
    (tmp_path / "ncu_filter_kernel.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p))
    from ncu_filter_kernel import SPEC

    options = CudaBackendOptions(cache_dir=tmp_path / "cache", timeout_s=20.0, policy=TimingPolicy(max_time_s=0.3))
    requests = [MeasureRequest("renamed_copy", {"n": 1 << 20}, {"MODE": 0}, profile=True, seed=s) for s in (1, 2)]
    for standby in (True, False):
        backend = CudaBackend(replace(options, profile_standby=standby), specs={"renamed_copy": SPEC},
                              spec_refs={"renamed_copy": "ncu_filter_kernel:SPEC"})  # fmt: skip
        try:
            backend.warm_up()  # starts the standby, filtering on the catalogue: the registry and this kernel
            for m in backend.measure_many(requests):
                assert m.verified, m.failure_message
                assert "profile_error" not in m.metrics, m.metrics.get("profile_error")
                assert m.metrics["kernel_name"] == ENTRY and m.metrics["ncu_duration_ns"] > 0
                assert m.metrics["ncu_standby"] is standby
        finally:
            backend.close()
