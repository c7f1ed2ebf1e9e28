"""Triton ahead-of-time compilation in a pool of processes (``worker/measuring/compile_pool.py``), for the
GPU's architecture, without a GPU.

Why: Triton compiles a config in 0.3-3 s of one CPU core (MLIR passes, LLVM, ptxas). The pool's
processes compile the next candidates on the host's other cores while the GPU measures the current
one, with ``triton.compile(ASTSource(...), target=GPUTarget("cuda", arch, 32))``: no CUDA context,
so a pool process never touches the GPU. The compiled kernel lands in Triton's own on-disk cache (a
directory of the backend's, shared by the host's workers); the measuring child loads it from the
file paths of the result (:mod:`.loader`), so it never compiles a kernel itself. The C launcher
Triton builds for each signature is built here too, into the same cache.

Specialization follows Triton's JIT, which the kernels were written for: every pointer is declared
16-byte aligned (CuPy's allocations are 256-byte aligned), an integer argument of value 1 becomes a
constant, and one that is a multiple of 16 is declared divisible by 16 (vectorized loads, copies
the compiler can pipeline).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelfarm.core.tracebacks import portable_traceback
from kernelfarm.worker.measuring.compile_pool import ProcessCompilePool

if TYPE_CHECKING:
    from kernelfarm.kernels.triton_kernel import TritonKernel

logger = logging.getLogger(__name__)

_DIVISIBLE = [["tt.divisibility", 16]]
_WGMMA = re.compile(r"\bwgmma\.mma_async")


@dataclass(frozen=True)
class TritonCompileJob:
    """Everything the compiled kernel depends on; its hash is the job's key."""

    module: str  # the jit function's module
    function: str  # ... and name
    source: str  # the module's text (the key covers it; the pool imports the module by name)
    signature: tuple[tuple[str, str], ...]  # runtime arguments' compiler types
    constexprs: tuple[tuple[str, Any], ...]
    scalars: tuple[tuple[str, int], ...]  # integer arguments known ahead: specialized on
    options: tuple[tuple[str, int], ...]  # num_warps, num_stages, num_ctas, maxnreg
    arch: int  # compute capability as Triton writes it: 90 for 9.0
    triton_version: str

    @classmethod
    def for_config(
        cls, kernel: TritonKernel, config: Mapping[str, Any], problem: Mapping[str, Any], arch: int,
        triton_version: str,
    ) -> TritonCompileJob:  # fmt: skip
        return cls(
            module=kernel.module,
            function=kernel.entry(config),
            source=kernel.source_text(),
            signature=tuple(kernel.signature(config, problem).items()),
            constexprs=tuple(sorted(kernel.constexprs(config, problem).items())),
            scalars=tuple(sorted(kernel.scalars(config, problem).items())),
            options=tuple(sorted(kernel.options(config).items())),
            arch=arch,
            triton_version=triton_version,
        )

    @property
    def key(self) -> str:
        digest = hashlib.sha256(self.source.encode())
        fields = {k: v for k, v in self.__dict__.items() if k != "source"}
        digest.update(json.dumps(fields, sort_keys=True, default=str).encode())
        return digest.hexdigest()[:32]

    def specialize(self, arg_names: list[str]) -> tuple[dict[str, str], dict[str, Any], dict[tuple[int, ...], Any]]:
        """Triton's signature, constants and attributes for a jit function with these parameters.

        Raises:
            ValueError: a parameter neither the signature nor the constexprs give a value or type.
        """
        types, constants, scalars = dict(self.signature), dict(self.constexprs), dict(self.scalars)
        signature: dict[str, str] = {}
        attrs: dict[tuple[int, ...], Any] = {}
        for index, name in enumerate(arg_names):
            if name in constants:
                signature[name] = "constexpr"
            elif name not in types:
                raise ValueError(f"{self.function}: parameter {name!r} has no type and no constexpr value")
            elif name in scalars and scalars[name] == 1 and types[name].startswith("i"):
                signature[name], constants[name] = "constexpr", 1
            else:
                signature[name] = types[name]
                if types[name].startswith("*") or (name in scalars and scalars[name] % 16 == 0):
                    attrs[(index,)] = _DIVISIBLE
        return signature, constants, attrs


@dataclass(frozen=True)
class TritonCompileResult:
    key: str
    artifact: str | None  # JSON for the loader: the job, its cache files and hash; None: compilation failed
    log: str
    seconds: float  # compile wall time (a cache hit: reading the files)
    cached: bool
    resources: dict[str, int] = field(default_factory=dict)  # shared bytes, warps, wgmma instructions

    @property
    def ok(self) -> bool:
        return self.artifact is not None


def jit_function(module: str, function: str) -> Any:
    return getattr(importlib.import_module(module), function)


def use_cache_dir(cache_dir: str) -> None:
    """Point this process's Triton at ``cache_dir`` (kernels and launchers)."""
    from triton import knobs

    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    knobs.cache.dir = cache_dir


def ast_source(job: TritonCompileJob) -> Any:
    """The job's ``ASTSource``: the loader rebuilds it to launch what was compiled."""
    from triton.compiler import ASTSource

    fn = jit_function(job.module, job.function)
    signature, constants, attrs = job.specialize(list(fn.arg_names))
    return ASTSource(fn, signature, constants, attrs)


def compile_triton(job: TritonCompileJob, cache_dir: str) -> TritonCompileResult:
    """Compile one job into Triton's cache at ``cache_dir`` (or find it there). Never raises for a
    bad config: an error (out of shared memory, a compiler failure) is a result with its log."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget

    use_cache_dir(cache_dir)
    hits: list[bool] = []
    knobs.compilation.listener = lambda **kw: hits.append(bool(kw.get("cache_hit")))
    start = time.perf_counter()
    try:
        source = ast_source(job)
        compiled = triton.compile(source, target=GPUTarget("cuda", job.arch, 32), options=dict(job.options))
    except Exception as exc:
        log = f"{type(exc).__name__}: {exc}\n{portable_traceback(exc, frames=4)}"
        return TritonCompileResult(job.key, None, log[-4000:], time.perf_counter() - start, False)
    finally:
        knobs.compilation.listener = None
    _build_launcher(source, compiled)
    seconds = time.perf_counter() - start
    metadata = compiled.metadata
    resources = {
        "shared_bytes": int(metadata.shared),
        "num_warps": int(metadata.num_warps),
        "num_stages": int(metadata.num_stages),
        "wgmma_instructions": len(_WGMMA.findall(compiled.asm.get("ptx", ""))),
    }
    artifact = json.dumps({"job": job.__dict__, "metadata_group": dict(compiled.metadata_group), "hash": compiled.hash})
    return TritonCompileResult(job.key, artifact, "", seconds, bool(hits and hits[0]), resources)


def _build_launcher(source: Any, compiled: Any) -> None:
    """Build the C launcher of this signature into the cache now, so the measuring child's first
    launch of it does not pay a C compile (about a second). Best effort: the child builds it
    otherwise."""
    try:
        from triton.backends.nvidia.driver import CudaLauncher

        CudaLauncher(source, compiled.metadata)
    except Exception:
        logger.debug("launcher not built ahead", exc_info=True)


_WARM_SOURCE_FN = ("kernelfarm.worker.triton.warm_kernel", "kf_triton_warm")


def _start_compiler(arch: int | None, cache_dir: str) -> None:
    """Start-up of a pool process (after ``compile_pool._start`` has lowered its priority): one
    throw-away compile so the process's first real compile does not also pay for importing Triton
    and initializing MLIR/LLVM (about a second)."""
    if arch is None:
        return
    try:
        import triton
        from triton import knobs
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        use_cache_dir(cache_dir)
        fn = jit_function(*_WARM_SOURCE_FN)
        knobs.compilation.always_compile = True  # a cache hit would warm nothing
        try:
            triton.compile(ASTSource(fn, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 32}),
                           target=GPUTarget("cuda", arch, 32), options={"num_warps": 1})  # fmt: skip
        finally:
            knobs.compilation.always_compile = False
    except Exception:  # CPU-only hosts without Triton; a real compile reports its own errors
        logger.debug("Triton warm-up compile failed", exc_info=True)


class TritonCompilePool(ProcessCompilePool[TritonCompileJob, TritonCompileResult]):
    """``triton.compile`` in a process pool, into Triton's own cache directory."""

    def __init__(self, cache_dir: Path, workers: int | None = None, arch: int | None = None) -> None:
        """
        Args:
            cache_dir: Triton's cache directory for this backend (kernels and launchers).
            workers: processes; default: all cores but one.
            arch: warm each process up with a tiny compile for this architecture (None: start
                without compiling, as CPU-only tests do).
        """
        super().__init__(cache_dir, workers, compile_triton, _start_compiler, (arch, str(cache_dir)))
