"""What NVRTC on a worker can read through an `#include`, with the real NVRTC (tests/worker/test_compile_cache.py
checks the pool's working directory on CPU only).

A header that NVRTC finds and cannot compile ends up in its error log, and that log is a trial's stored
failure, shown to whoever reads the job: a file of the worker's that an uploaded kernel can include is a file
its uploader can read. Each header here is an `#error` line carrying a marker, so "was it read?" is "is the
marker in the log?".
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool
from kernelfarm.worker.cuda.toolkit_headers import ToolkitHeaders, find_toolkit_headers

pytestmark = pytest.mark.gpu

MARKER = "KF_WORKER_FILE_WAS_READ"
HEADER = "worker_settings.h"
ARCH = "sm_90"  # the device machine's GPUs are Hopper; NVRTC compiles for it without a GPU in this process


def _worker_folder(tmp_path: Path) -> Path:
    """A worker's deployment folder holding a file an uploaded kernel must not read."""
    home = tmp_path / "deployment"
    home.mkdir()
    (home / HEADER).write_text(f"#error {MARKER}\n")
    return home


def _source(include: str) -> str:
    return f'{include}\nextern "C" __global__ void k(float* x) {{ x[0] = 1.0f; }}\n'


_BARE_NVRTC = """
import sys
from cupy_backends.cuda.libs import nvrtc
program = nvrtc.createProgram(sys.argv[1], "kf_probe.cu", [], [])
try:
    nvrtc.compileProgram(program, ["--gpu-architecture=sm_90", "-std=c++17"])
except nvrtc.NVRTCError:
    pass
print(nvrtc.getProgramLog(program))
"""


def test_bare_nvrtc_reads_a_header_from_its_working_directory(tmp_path: Path) -> None:
    """The reason the pool moves: a program named without a folder, compiled from a process in the worker's
    folder, finds the worker's files by a quoted include. If this stops failing with the marker, NVRTC changed
    and the comment at ``NVRTC_WORKING_DIR`` is out of date."""
    home = _worker_folder(tmp_path)
    log = subprocess.run(
        [sys.executable, "-c", _BARE_NVRTC, _source(f'#include "{HEADER}"')],
        cwd=home, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert MARKER in log


@pytest.mark.parametrize("include", [f'#include "{HEADER}"', f"#include <{HEADER}>"])
def test_the_compile_pool_cannot_read_the_workers_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, include: str
) -> None:
    home = _worker_folder(tmp_path)
    monkeypatch.chdir(home)  # the pool is started from the worker's folder, as `kernelfarm worker` is
    pool = CompilePool(Path("cubins"), workers=1, warm_arch=ARCH)
    try:
        result = pool.result(CompileJob(_source(include), (), ARCH))
    finally:
        pool.close()
    assert not result.ok
    assert MARKER not in result.log
    assert HEADER in result.log  # it failed for want of the header, not for some other reason


def test_the_compile_pool_still_compiles_a_kernel_with_its_uploaded_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The empty folder takes nothing a kernel may use: its headers reach NVRTC as text, by include name."""
    monkeypatch.chdir(_worker_folder(tmp_path))
    source = '#include "kf/tile.h"\n' + _source("").replace("1.0f", "TILE")
    job = CompileJob(source, (), ARCH, headers=(("kf/tile.h", "#define TILE 2.0f\n"),))
    pool = CompilePool(Path("cubins"), workers=1, warm_arch=ARCH)
    try:
        result = pool.result(job)
    finally:
        pool.close()
    assert result.ok, result.log
    assert Path(result.cubin_path or "").stat().st_size > 0


# ---------------------------------------------------------------- the CUDA Toolkit's headers

# One kernel per header family a tuned kernel reaches for, each as NVRTC 13.0 compiled it on an H200 with the
# runtime's, the compiler's and CCCL's folders (worker/cuda/toolkit_headers.py); with none, every one fails.
TOOLKIT_SOURCES = {
    "cuda_fp16.h": "__global__ void k(__half* x) { x[threadIdx.x] = __hfma(x[0], x[1], x[2]); }",
    "cuda_bf16.h": "__global__ void k(__nv_bfloat16* x) { x[threadIdx.x] = __hadd(x[0], x[1]); }",
    "cuda_fp8.h": "__global__ void k(__nv_fp8_e4m3* x) { x[threadIdx.x] = __nv_fp8_e4m3(1.0f); }",
    "mma.h": "__global__ void k(float* x) { nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;"
    " nvcuda::wmma::fill_fragment(f, 0.0f); nvcuda::wmma::store_matrix_sync(x, f, 16, nvcuda::wmma::mem_row_major); }",
    "cooperative_groups.h": "__global__ void k(float* x) { auto block = cooperative_groups::this_thread_block();"
    " block.sync(); x[block.thread_rank()] = 1.0f; }",
    "cuda_pipeline.h": "__global__ void k(float* x) { __pipeline_commit(); __pipeline_wait_prior(0); x[0] = 1.0f; }",
    "cuda/std/cstdint": "__global__ void k(cuda::std::uint32_t* x) { x[0] = 1u; }",
}


@pytest.fixture(scope="module")
def toolkit_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CompilePool]:
    pool = CompilePool(tmp_path_factory.mktemp("cubins"), workers=2, warm_arch=ARCH)
    yield pool
    pool.close()


@pytest.mark.parametrize("header", sorted(TOOLKIT_SOURCES))
def test_the_compile_pool_compiles_kernels_that_include_the_toolkits_headers(
    header: str, toolkit_pool: CompilePool
) -> None:
    toolkit = find_toolkit_headers()
    assert toolkit is not None, "no CUDA headers found on the GPU machine"
    source = f'#include <{header}>\nextern "C" {{\n{TOOLKIT_SOURCES[header]}\n}}\n'
    result = toolkit_pool.result(CompileJob(source, (), ARCH, toolkit=toolkit))
    assert result.ok, result.log
    without = toolkit_pool.result(CompileJob(source, (), ARCH))
    assert not without.ok and "open source file" in without.log  # "could not" or "cannot"


def test_an_error_in_an_included_header_names_its_folder_by_role(tmp_path: Path, toolkit_pool: CompilePool) -> None:
    """The log is the trial's failure, shown to every reader: it names no folder of the worker's host."""
    folder = tmp_path / "toolkit-include"
    folder.mkdir()
    (folder / "kf_broken.h").write_text(f"#error {MARKER}\n")
    toolkit = ToolkitHeaders.from_dirs([folder])
    result = toolkit_pool.result(CompileJob(_source("#include <kf_broken.h>"), (), ARCH, toolkit=toolkit))
    assert not result.ok and MARKER in result.log
    assert "<cuda-include-0>/kf_broken.h" in result.log and str(tmp_path) not in result.log
