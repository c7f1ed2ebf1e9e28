"""The cubin cache keeps ptxas' resources with each cubin, and the compile pool's processes run with
the CUDA compute cache off (so a compile is real or a cubin-cache hit, nothing in between).

NVRTC is the faked part (no CUDA toolkit on CPU hosts): a stand-in module with NVRTC's calls that
answers with a fixed cubin and ptxas log, and counts how often it compiled."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool, compile_job

PTXAS_LOG = (
    "ptxas info    : Function properties for kf_x\n"
    "ptxas         .     16 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads\n"
    "ptxas info    : Used 96 registers, used 1 barriers\n"
)


class FakeNvrtc(types.ModuleType):
    class NVRTCError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__("nvrtc")
        self.compiles = 0
        self.log = PTXAS_LOG

    def getVersion(self) -> tuple[int, int]:
        return (13, 0)

    def createProgram(self, source: str, name: str, headers: list[bytes], names: list[bytes]) -> object:
        return object()

    def compileProgram(self, program: object, options: list[str]) -> None:
        self.compiles += 1

    def getProgramLog(self, program: object) -> str:
        return self.log

    def getCUBIN(self, program: object) -> bytes:
        return b"\x7fELF fake cubin"

    def destroyProgram(self, program: object) -> None:
        pass


@pytest.fixture
def nvrtc(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNvrtc]:
    fake = FakeNvrtc()
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.nvrtc = fake  # type: ignore[attr-defined]
    for name, module in (
        ("cupy_backends", types.ModuleType("cupy_backends")),
        ("cupy_backends.cuda", types.ModuleType("cupy_backends.cuda")),
        ("cupy_backends.cuda.libs", libs),
        ("cupy_backends.cuda.libs.nvrtc", fake),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    yield fake


JOB = CompileJob('extern "C" __global__ void kf_x() {}', (("A", "1"),), "sm_90")
RESOURCES = {"registers": 96, "spill_bytes": 12, "stack_bytes": 16}


def test_a_cache_hit_reports_the_resources_of_the_compile_that_made_it(nvrtc: FakeNvrtc, tmp_path: Path) -> None:
    first = compile_job(JOB, str(tmp_path))
    assert (first.cached, first.resources, nvrtc.compiles) == (False, RESOURCES, 1)

    again = compile_job(JOB, str(tmp_path))
    assert (again.cached, again.resources, nvrtc.compiles) == (True, RESOURCES, 1)

    # The resources live beside the cubin, not only in the log.
    (tmp_path / f"{JOB.key}.log").unlink()
    assert compile_job(JOB, str(tmp_path)).resources == RESOURCES


def test_a_compile_without_a_ptxas_report_has_no_resources_and_a_hit_says_the_same(
    nvrtc: FakeNvrtc, tmp_path: Path
) -> None:
    nvrtc.log = ""  # what a compile answered from a compute cache would give
    assert compile_job(JOB, str(tmp_path)).resources == {}
    assert compile_job(JOB, str(tmp_path)).resources == {}


@pytest.mark.parametrize("driver_cache,expected", [(False, "1"), (True, None)])
def test_pool_processes_run_with_the_compute_cache_off_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver_cache: bool, expected: str | None
) -> None:
    monkeypatch.delenv("CUDA_CACHE_DISABLE", raising=False)
    pool = CompilePool(tmp_path, workers=1, driver_cache=driver_cache)
    try:
        assert pool.wait_started(60.0)
        assert pool._executor.submit(os.getenv, "CUDA_CACHE_DISABLE").result(60) == expected
    finally:
        pool.close()


def test_pool_processes_compile_in_an_empty_folder_not_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVRTC searches the folder of the program it compiles (a name without one: the working directory)
    for an include: a pool process in the worker's working directory let an uploaded kernel's
    `#include <settings.env>` find the worker's files (and NVRTC's log, the trial's failure, quote
    them). A relative cache folder still names the same cache."""
    worker_home = tmp_path / "deployment"
    worker_home.mkdir()
    (worker_home / "settings.env").write_text("DATABASE_URL=postgresql://farm:secret@db/farm\n")
    monkeypatch.chdir(worker_home)
    pool = CompilePool(Path("cubins"), workers=1)
    try:
        assert pool.wait_started(60.0)
        cwd = Path(pool._executor.submit(os.getcwd).result(60))
        assert cwd != worker_home and cwd.parent == worker_home / "cubins"
        assert pool._executor.submit(os.listdir, ".").result(60) == []
        assert pool.cache_dir == worker_home / "cubins"
    finally:
        pool.close()


def test_pool_processes_start_without_the_workers_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool process's /proc/self/environ (what an include of it would put in NVRTC's log) holds no
    database URL or token; the worker keeps its own environment."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://farm:db-secret@db/farm")
    monkeypatch.setenv("KERNELFARM_API_TOKEN", "kf-token-secret")
    pool = CompilePool(tmp_path, workers=2)
    try:
        assert pool.wait_started(60.0)
        environ = Path("/proc/self/environ").read_bytes  # run in a pool process
        seen = [pool._executor.submit(environ).result(60) for _ in range(4)]
    finally:
        pool.close()
    assert all(b"db-secret" not in env and b"kf-token-secret" not in env for env in seen)
    assert all(b"PATH=" in env for env in seen)  # the environment the child needs is still there
    assert os.environ["DATABASE_URL"].endswith("db-secret@db/farm")
