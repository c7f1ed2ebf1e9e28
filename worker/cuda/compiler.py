"""NVRTC compilation to cubin, in a pool of processes (``worker/measuring/compile_pool.py``), with a
disk cache.

NVRTC of an unrolled kernel takes 0.1-7 s of one CPU core, hence the pool. The cubin lands in a
content-addressed cache directory; the measuring child loads it with ``cupy.RawModule(path=...)``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelfarm.worker.cuda.toolkit_headers import ToolkitHeaders
from kernelfarm.worker.measuring.compile_pool import ProcessCompilePool

if TYPE_CHECKING:  # the pool's processes need no kernel catalogue
    from kernelfarm.kernels.spec import KernelSpec

logger = logging.getLogger(__name__)

_REGS = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores")
_STACK = re.compile(r"(\d+) bytes stack frame")


@dataclass(frozen=True)
class CompileJob:
    """Everything the cubin depends on; its hash is the cache key.

    The kernel's own headers travel as text and reach NVRTC by include name: the cubin is compiled
    from exactly the bytes the key hashes, and a source given as text compiles the same way as one read
    from files. The CUDA Toolkit's headers (``<cuda_fp16.h>``, ...) are the host's, found through
    ``toolkit``'s folders; the key takes their fingerprint instead, so it and the recorded options
    (``recorded_options``) name no install location either.
    """

    source: str
    defines: tuple[tuple[str, str], ...]
    arch: str  # "sm_90", "sm_90a", ...
    extra_options: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()  # (include name, text) of every header the source includes
    # C++ entries: NVRTC name expressions, lowered at compile time; their mangled names are written
    # next to the cubin (``lowered_names``)
    name_expressions: tuple[str, ...] = ()
    toolkit: ToolkitHeaders | None = None  # None: no include folder (a `<name>` is then never found)

    @classmethod
    def for_config(
        cls, spec: KernelSpec, config: Mapping[str, Any], problem: Mapping[str, Any], arch: str,
        extra_options: tuple[str, ...] = (), toolkit: ToolkitHeaders | None = None,
    ) -> CompileJob:  # fmt: skip
        """The job that compiles ``spec``'s CUDA source for one config and problem (its compile defines).

        Raises:
            MissingImplementation: the kernel has no "cuda" implementation.
        """
        from kernelfarm.kernels.cuda_kernel import CudaKernel

        kernel = spec.impl("cuda", CudaKernel)
        defines = kernel.defines(config, problem)
        expression = kernel.name_expression(config, problem)
        return cls(
            kernel.source.text,
            tuple((k, str(v)) for k, v in defines.items()),
            arch,
            (*kernel.compile_options, *extra_options),
            kernel.source.headers,
            (expression,) if expression is not None else (),
            toolkit,
        )

    @property
    def options(self) -> tuple[str, ...]:
        """What NVRTC is given."""
        return (*self._own_options, *(self.toolkit.options if self.toolkit else ()))

    @property
    def recorded_options(self) -> tuple[str, ...]:
        """The options as provenance records them: the include folders by role (``ToolkitHeaders``)."""
        return (*self._own_options, *(self.toolkit.recorded_options if self.toolkit else ()))

    @property
    def _own_options(self) -> tuple[str, ...]:
        # A kernel's own -std= (c++20) stands instead of the default: NVRTC is given one standard.
        standard = () if any(o.startswith("-std=") for o in self.extra_options) else ("-std=c++17",)
        return (
            f"--gpu-architecture={self.arch}",
            *standard,
            "-default-device",
            "--ptxas-options=-v",
            *self.extra_options,
            *(f"-D{name}={value}" for name, value in self.defines),
        )

    @property
    def key(self) -> str:
        digest = hashlib.sha256(self.source.encode())
        digest.update("\0".join(self._own_options).encode())
        for name, text in self.headers:  # a job without headers keeps the key it had before headers existed
            digest.update(f"\0{name}\0{text}".encode())
        for expression in self.name_expressions:
            digest.update(f"\0name-expression\0{expression}".encode())
        if self.toolkit is not None:  # a job without them keeps the key it had before they were passed
            digest.update(f"\0cuda-headers\0{self.toolkit.fingerprint}".encode())
        return digest.hexdigest()[:32]


@dataclass(frozen=True)
class CompileResult:
    key: str
    cubin_path: str | None  # None: compilation failed
    log: str
    seconds: float  # NVRTC wall time (0 for a cache hit)
    cached: bool
    nvrtc_version: str
    resources: dict[str, int] = field(default_factory=dict)  # registers, spill bytes, stack bytes

    @property
    def ok(self) -> bool:
        return self.cubin_path is not None

    @property
    def artifact(self) -> str | None:
        """What the measuring child loads: the cubin's path."""
        return self.cubin_path


def lowered_names_path(cubin: Path | str) -> Path:
    """Where a cubin's lowered C++ names (name expression -> mangled name) are kept."""
    return Path(cubin).with_suffix(".names.json")


def lowered_name(cubin: Path | str, expression: str) -> str:
    """The mangled name NVRTC gave ``expression`` when it compiled ``cubin``.

    Raises:
        KeyError: the cubin was compiled without that name expression.
    """
    path = lowered_names_path(cubin)
    names: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
    return names[expression]


def parse_ptxas(log: str) -> dict[str, int]:
    """Registers, spill stores and stack frame from ptxas' verbose report."""
    out: dict[str, int] = {}
    for name, pattern in (("registers", _REGS), ("spill_bytes", _SPILL), ("stack_bytes", _STACK)):
        found = pattern.findall(log)
        if found:
            out[name] = max(int(v) for v in found)
    return out


def nvrtc_version() -> str:
    from cupy_backends.cuda.libs import nvrtc

    major, minor = nvrtc.getVersion()
    return f"{major}.{minor}"


def compile_job(job: CompileJob, cache_dir: str) -> CompileResult:
    """Compile one job to a cubin in ``cache_dir`` (or find it there). Never raises for a bad
    kernel: a compile error is a result with ``cubin_path=None`` and NVRTC's log."""
    version = nvrtc_version()
    path = Path(cache_dir) / f"{job.key}.cubin"
    # Several worker processes on one host (one per GPU) share the cache and compile ahead the same
    # queued trials: the first takes the key's lock and compiles, the others wait and find the cubin.
    with _key_lock(path.with_suffix(".lock")):
        return _compile_locked(job, path, version)


@contextlib.contextmanager
def _key_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile_locked(job: CompileJob, path: Path, version: str) -> CompileResult:
    from cupy_backends.cuda.libs import nvrtc

    log_path = path.with_suffix(".log")
    resources_path = path.with_suffix(".json")
    if path.is_file():
        log = log_path.read_text() if log_path.is_file() else ""
        return CompileResult(job.key, str(path), log, 0.0, True, version, _cached_resources(resources_path, log))
    start = time.perf_counter()
    # In-memory headers by include name; CuPy's wrapper takes them as bytes (its own jitify path
    # passes bytes too), while source and name are str.
    headers = [text.encode() for _, text in job.headers]
    include_names = [name.encode() for name, _ in job.headers]
    program = nvrtc.createProgram(job.source, f"kf_{job.key[:8]}.cu", headers, include_names)
    try:
        for expression in job.name_expressions:
            nvrtc.addNameExpression(program, expression)
        try:
            nvrtc.compileProgram(program, list(job.options))
        except nvrtc.NVRTCError as exc:
            log = _scrubbed(job, nvrtc.getProgramLog(program))
            return CompileResult(job.key, None, f"{exc}\n{log}", time.perf_counter() - start, False, version)
        log = _scrubbed(job, nvrtc.getProgramLog(program))
        cubin = nvrtc.getCUBIN(program)
        lowered = {expression: nvrtc.getLoweredName(program, expression) for expression in job.name_expressions}
    finally:
        nvrtc.destroyProgram(program)
    seconds = time.perf_counter() - start
    resources = parse_ptxas(log)
    # Write-then-rename: a concurrent reader never sees half a cubin. The log and the resources
    # land before the cubin, so a reader that finds the cubin finds them too.
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(cubin)
    log_path.write_text(log)
    _write_resources(resources_path, resources, seconds)
    if lowered:  # before the cubin appears: a reader that finds the cubin finds its names
        lowered_names_path(path).write_text(json.dumps(lowered))
    tmp.replace(path)
    return CompileResult(job.key, str(path), log, seconds, False, version, resources)


def _scrubbed(job: CompileJob, log: str) -> str:
    return job.toolkit.scrub(log) if job.toolkit is not None else log


def _write_resources(path: Path, resources: dict[str, int], seconds: float) -> None:
    """ptxas' registers, spills and stack (and the compile's own seconds) beside the cubin, so a
    cache hit reports the same resources as the compile that made it."""
    tmp = path.with_suffix(f".{os.getpid()}.jsontmp")
    tmp.write_text(json.dumps({"resources": resources, "compile_s": seconds}))
    tmp.replace(path)


def _cached_resources(path: Path, log: str) -> dict[str, int]:
    """The resources stored with a cached cubin; for a cubin cached before they were stored, what
    its log still says."""
    try:
        stored = json.loads(path.read_text())["resources"]
    except (OSError, ValueError, KeyError, TypeError):
        return parse_ptxas(log)
    return {str(k): int(v) for k, v in stored.items()}


_WARM_SOURCE = 'extern "C" __global__ void kf_warm(float* x) { x[threadIdx.x] *= 2.0f; }'
# Where the pool's processes run, inside the cubin cache, and where nothing is ever written. NVRTC looks
# for a quoted include in the folder of the program it compiles (its --no-source-include turns that off;
# a <name> it looks for only in the include folders, the CUDA Toolkit's: tests/gpu/test_nvrtc_includes.py,
# NVRTC 13.0), and a program
# named "kf_<key>.cu" is in the process's working directory: that was the worker's (its
# deployment folder, settings files and all), where an uploaded kernel's `#include "name"` of a file it
# did not upload (the upload check refuses that too; this is the second line) could find it, and NVRTC's
# error log, the trial's stored and shown failure, quote it. Sources and
# headers reach NVRTC as text, so no compile needs a file there.
NVRTC_WORKING_DIR = "nvrtc-cwd"


def _start_compiler(warm_arch: str | None, driver_cache: bool = False, working_dir: str | None = None) -> None:
    """Start-up of a pool process (after ``compile_pool._start`` has lowered its priority).

    Unless ``driver_cache``, the CUDA compute cache (``~/.nv/ComputeCache``, which NVRTC 13 also
    answers from, across processes) is switched off in this process before NVRTC loads: the farm's
    own cubin cache, keyed on everything a cubin depends on, is then the only cache, so a compile is
    either a real one (with ptxas' report) or a cubin-cache hit (with the report stored beside it),
    and a "cold" measurement cannot meet a cache it did not clear.

    A process's first NVRTC compile costs about a second more than the next ones (its builtins and
    ptxas set-up): on an H200 host, 16 matmul_fp32 configs on fresh processes took 1.1-1.7 s each,
    on processes that had compiled a tiny kernel 0.02-0.03 s (benchmarks/gpu/compile_warm.py).
    A pool has one process per core, so without this each of a job's first ~30 kernels paid it.

    With ``working_dir``, the process moves there first (see ``NVRTC_WORKING_DIR``).
    """
    if working_dir is not None:
        os.chdir(working_dir)
    if not driver_cache:
        os.environ["CUDA_CACHE_DISABLE"] = "1"  # read by the CUDA libraries as they load, below
    if warm_arch is not None:
        try:
            from cupy_backends.cuda.libs import nvrtc

            program = nvrtc.createProgram(_WARM_SOURCE, "kf_warm.cu", [], [])
            try:
                nvrtc.compileProgram(program, [f"--gpu-architecture={warm_arch}", "-std=c++17", "-default-device"])
            finally:
                nvrtc.destroyProgram(program)
        except Exception:  # CPU-only tests have no NVRTC; a real compile reports its own errors
            logger.debug("NVRTC warm-up compile failed", exc_info=True)


class CompilePool(ProcessCompilePool[CompileJob, CompileResult]):
    """NVRTC in a process pool, into a cubin cache on disk."""

    def __init__(
        self, cache_dir: Path, workers: int | None = None, warm_arch: str | None = None, driver_cache: bool = False
    ) -> None:
        """
        Args:
            cache_dir: where cubins, their ptxas logs and resources are kept, shared by a host's workers.
            workers: processes; default: all cores but one.
            warm_arch: compile a tiny kernel for this architecture in each process as it starts
                (None: start without compiling, as CPU-only tests do).
            driver_cache: let NVRTC use the CUDA compute cache (see :func:`_start_compiler`);
                off by default.
        """
        cache_dir = Path(cache_dir).resolve()  # absolute: the processes leave the worker's working directory
        working_dir = cache_dir / NVRTC_WORKING_DIR
        working_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(cache_dir, workers, compile_job, _start_compiler, (warm_arch, driver_cache, str(working_dir)))
