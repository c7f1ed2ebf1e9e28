"""The "cuda" implementation of a manifest kernel: the manifest's launch, arguments and reference,
read as Kernel Tuner reads its ``tune_kernel`` arguments.

Pure parts (defines, launch, FLOPs) run anywhere; inputs, reference and the naive reference kernel
run in the measuring child (CuPy on the current device).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernelfarm.kernels.cuda_kernel import CudaKernel, Launch
from kernelfarm.kernels.cuda_source import CudaSource
from kernelfarm.kernels.manifest.bundle import Bundle, _scope_names
from kernelfarm.kernels.manifest.expressions import Expr
from kernelfarm.kernels.manifest.references import BUILTINS
from kernelfarm.kernels.reference_failure import ReferenceDoesNotCompile, scrubbed_compile_log
from kernelfarm.kernels.tolerance import Tolerance

# NVRTC ships no C library headers; sources written for nvcc (Kernel Tuner's examples) include some.
# Device printf is built into NVRTC, so an empty header is all these need.
STUB_HEADERS = {"stdio.h": "/* kernelfarm: NVRTC has no C library headers; device printf is built in */\n"}
_ANGLE_INCLUDE = re.compile(r"^\s*#\s*include\s*<([^>]+)>", re.MULTILINE)
_DEFAULT_BLOCK = (256, 1, 1)  # Kernel Tuner's block size for a dimension that is not tuned


def compiled_text(main: str, linkage: str) -> str:
    """The text NVRTC compiles. ``auto`` follows Kernel Tuner: wrap the source in ``extern "C"``
    unless it has templates or its own ``extern "C"`` (then C++ names are looked up).

    The wrap starts after the last ``#include <...>`` line: the CUDA Toolkit's headers are C++ and do not
    compile with C linkage (NVRTC 13.0 on an H200: ``<cuda_fp16.h>`` inside ``extern "C" {`` fails with
    "more than one instance of overloaded function __shfl_sync has C linkage", cooperative groups with
    "this declaration may not have extern C linkage"), so an entry defined after them is wrapped alone.
    """
    if linkage == "auto" and 'extern "C"' not in main and "template" not in main:
        ends = [m.end() for m in _ANGLE_INCLUDE.finditer(main)]
        split = (main.find("\n", ends[-1]) + 1 or len(main)) if ends else 0  # after the last one's line
        return main[:split] + 'extern "C" {\n' + main[split:] + "\n}\n"
    return main


def needs_name_lookup(main: str, linkage: str) -> bool:
    return linkage == "c++" or (linkage == "auto" and 'extern "C"' not in main and "template" in main)


# An element off by a quarter of its own size plus the output's rms: a wrong value, not a rounding.
GROSS_ELEMENT_ERROR = 0.25


class ManifestCudaKernel(CudaKernel):
    """A :class:`CudaKernel` read from a checked :class:`Bundle`."""

    def __init__(self, bundle: Bundle, directory: Path | None = None) -> None:
        """
        Args:
            bundle: the checked manifest and files.
            directory: where the bundle is materialized (the measuring child builds the kernel from
                there), if anywhere.
        """
        manifest = bundle.manifest
        self.directory = directory
        main_name = manifest.source.files[0]
        main = bundle.files[main_name]
        headers = {name: text for name, text in bundle.files.items() if name != main_name}
        for include in _ANGLE_INCLUDE.findall(main):
            if include in STUB_HEADERS:
                headers.setdefault(include, STUB_HEADERS[include])
        super().__init__(CudaSource(main_name, compiled_text(main, manifest.source.entry.linkage),
                                    tuple(sorted(headers.items()))))  # fmt: skip
        self.bundle = bundle
        self.manifest = manifest
        self.entry = manifest.source.entry.name
        self.arch_specific = manifest.source.arch_specific
        self.compile_options = tuple(manifest.source.compiler_options)
        self._lookup = manifest.source.entry.name_expression is not None or needs_name_lookup(
            main, manifest.source.entry.linkage
        )
        problem, tune = _scope_names(manifest)
        both = problem | tune
        launch = manifest.launch
        self._problem_size = [Expr.parse("launch.problem_size", t, both) for t in launch.problem_size]
        self._grid_div = [
            [Expr.parse(f"launch.grid_div_{axis}", t, both) for t in divs] if divs is not None else None
            for axis, divs in (("x", launch.grid_div_x), ("y", launch.grid_div_y), ("z", launch.grid_div_z))
        ]
        self._shared = Expr.parse("launch.shared_memory", launch.shared_memory, both)
        self._defines = {n: Expr.parse(f"source.defines.{n}", t, both) for n, t in manifest.source.defines.items()}
        self._flops = Expr.parse("flops", manifest.flops, problem)
        self._bytes = Expr.parse("bytes", manifest.bytes, problem)

    def fingerprint(self) -> bytes:
        """The bundle's content hash: the manifest, every source and header, the recording."""
        return self.bundle.content_hash.encode()

    # ------------------------------------------------------------------ compile and launch (pure)
    def name_expression(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> str | None:
        """The C++ name NVRTC lowers for this config (None: the entry is an extern "C" name)."""
        if not self._lookup:
            return None
        expression = self.manifest.source.entry.name_expression or self.entry
        return expression.format(**problem, **config)

    def defines(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, int | str]:
        values = {**problem, **config}
        out: dict[str, int | str] = {k: v if isinstance(v, int | str) else repr(v) for k, v in config.items()}
        for name, expr in self._defines.items():
            value = expr.value(values)
            out[name] = value if isinstance(value, int) else repr(value)
        return out

    def launch(self, config: Mapping[str, Any], problem: Mapping[str, Any]) -> Launch:
        values = {**problem, **config}
        names = self.manifest.launch.block_size_names
        block = [
            int(config[names[d]]) if d < len(names) and names[d] in config else _DEFAULT_BLOCK[d] for d in range(3)
        ]
        sizes = [expr.integer(values) for expr in self._problem_size] + [1] * (3 - len(self._problem_size))
        grid = []
        for d in range(3):
            divisors = self._grid_div[d]
            divisor = math.prod(e.integer(values) for e in divisors) if divisors is not None else block[d]
            grid.append(max(1, -(-sizes[d] // max(1, divisor))))
        return Launch(grid=(grid[0], grid[1], grid[2]), block=(block[0], block[1], block[2]),
                      shared_bytes=self._shared.integer(values))  # fmt: skip

    def constant_memory(self) -> Mapping[str, str]:
        """``__constant__`` symbol -> the buffer copied into it before the launches (KT's cmem_args)."""
        return self.manifest.constant_memory

    # ------------------------------------------------------------------ in the measuring child
    def make_inputs(self, problem: Mapping[str, Any], seed: int) -> dict[str, Any]:
        import cupy as cp

        rng = cp.random.default_rng(seed)
        out: dict[str, Any] = {}
        for arg in self.manifest.arguments:
            if arg.kind != "buffer" or arg.shape is None:
                continue
            shape = tuple(Expr.parse(f"arguments.{arg.name}.shape", t, frozenset(problem)).integer(problem)
                          for t in arg.shape)  # fmt: skip
            dtype = cp.dtype(arg.dtype)
            if arg.name in self.manifest.outputs or arg.init == "zeros":
                out[arg.name] = cp.zeros(shape, dtype=dtype)
            elif arg.init == "ones":
                out[arg.name] = cp.ones(shape, dtype=dtype)
            elif arg.init == "arange":
                out[arg.name] = cp.arange(math.prod(shape)).reshape(shape).astype(dtype)
            elif arg.init == "randn":
                out[arg.name] = rng.standard_normal(shape, dtype=cp.float64).astype(dtype)
            elif dtype.kind == "f":
                out[arg.name] = (rng.random(shape, dtype=cp.float64) * 2 - 1).astype(dtype)
            else:
                out[arg.name] = rng.integers(1, 100, size=shape).astype(dtype)
        return out

    def arguments(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> Sequence[Any]:
        import numpy as np

        values = []
        for arg in self.manifest.arguments:
            if arg.kind == "buffer":
                values.append(buffers[arg.name])
            else:
                assert arg.value is not None
                number = Expr.parse(f"arguments.{arg.name}.value", arg.value, frozenset(problem)).value(problem)
                values.append(np.dtype(arg.dtype).type(number))
        return values

    def outputs(self) -> Sequence[str]:
        return tuple(self.manifest.outputs)

    def reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        reference = self.manifest.reference
        if reference.builtin is not None:
            operands = {operand: buffers[name] for operand, name in reference.inputs.items()}
            name = self.manifest.outputs[0]
            result = BUILTINS[reference.builtin](operands, reference.options)
            return {name: result.reshape(buffers[name].shape).astype(buffers[name].dtype)}
        if reference.python is not None:
            return self._python_reference(buffers, problem)
        return self._cuda_reference(buffers, problem)

    def _python_reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        """Run the uploaded Python reference: host code, so this kernel requires workers that opted in
        (``uploaded-python``), and it runs in the measuring child, which holds no secret."""
        assert self.manifest.reference.python is not None
        name = self.manifest.reference.python
        namespace: dict[str, Any] = {"__name__": f"kernelfarm_uploaded_{self.bundle.content_hash[:12]}"}
        exec(compile(self.bundle.files[name], name, "exec"), namespace)  # opted-in host code (see docstring)
        function = namespace.get("reference")
        if not callable(function):
            raise TypeError(f"{name} defines no reference(buffers, problem)")
        result = function(dict(buffers), dict(problem))
        return {output: result[output] for output in self.manifest.outputs}

    def _cuda_reference(self, buffers: Mapping[str, Any], problem: Mapping[str, Any]) -> dict[str, Any]:
        """Run the manifest's naive kernel on copies of the outputs."""
        import cupy as cp

        reference = self.manifest.reference
        assert reference.source and reference.entry and reference.grid and reference.block
        names = frozenset(problem)
        module = self._compiled_reference(problem)
        copies = {name: cp.zeros_like(buffers[name]) for name in self.manifest.outputs}
        for symbol, name in self.manifest.constant_memory.items():
            _copy_to_constant(module, symbol, buffers[name])
        args = []
        kernel_args = {arg.name: value for arg, value in zip(self.manifest.arguments, self.arguments(buffers, problem),
                                                             strict=True)}  # fmt: skip
        for name in reference.arguments or [arg.name for arg in self.manifest.arguments]:
            args.append(copies.get(name, kernel_args[name]))
        grid = tuple(Expr.parse("reference.grid", t, names).integer(problem) for t in reference.grid)
        block = tuple(Expr.parse("reference.block", t, names).integer(problem) for t in reference.block)
        module.get_function(reference.entry)(grid, block, tuple(args))
        cp.cuda.Stream.null.synchronize()
        return copies

    def _compiled_reference(self, problem: Mapping[str, Any]) -> Any:
        """The naive reference's module, compiled now (CuPy would compile it at its first use, inside
        the launch): a source that does not compile raises :class:`ReferenceDoesNotCompile` with the
        compiler's log, its host paths scrubbed."""
        import cupy as cp

        reference = self.manifest.reference
        assert reference.source
        text = compiled_text(self.bundle.files[reference.source], "auto")
        module = cp.RawModule(code=text, options=self.reference_options(problem))
        try:
            module.compile()
        except cp.cuda.compiler.CompileException as exc:
            log = scrubbed_compile_log(
                str(exc), source_name=reference.source, compiled_as=getattr(exc, "name", None),
                options=tuple(getattr(exc, "options", ()) or ()),
                bundle_dir=str(self.directory) if self.directory is not None else None,
            )  # fmt: skip
            raise ReferenceDoesNotCompile(f"the naive reference {reference.source} does not compile:\n{log}") from None
        return module

    def reference_options(self, problem: Mapping[str, Any]) -> tuple[str, ...]:
        """NVRTC's options for the naive reference (through CuPy, which adds the CUDA Toolkit's headers):
        its defines, and the bundle's folder for an ``#include "name"`` of an uploaded header (the upload
        check allows only those names; the folder is named for, and checked against, its content)."""
        reference = self.manifest.reference
        names = frozenset(problem)
        defines = {
            n: Expr.parse(f"reference.defines.{n}", t, names).value(problem) for n, t in reference.defines.items()
        }
        folder = (f"--include-path={self.directory}",) if self.directory is not None else ()
        return ("-std=c++17", *folder, *(f"-D{k}={v}" for k, v in defines.items()))

    def tolerance(self, problem: Mapping[str, Any]) -> Tolerance:
        # The manifest's tolerance is the norm bound. The element bound cannot be derived as for the
        # catalogue (it follows from the reduction length, kernels/tolerance.py, which the farm cannot
        # know of a user's kernel): a fixed one still catches a zeroed or skipped element (an error of
        # about 0.5 or more) and never a rounding difference.
        return Tolerance(norm=self.manifest.tolerance, element=GROSS_ELEMENT_ERROR)

    def flops(self, problem: Mapping[str, Any]) -> float:
        return float(self._flops.value(problem))

    def bytes_moved(self, problem: Mapping[str, Any]) -> float:
        return float(self._bytes.value(problem))

    def peak_kind(self, problem: Mapping[str, Any]) -> str:
        return self.manifest.peak

    def input_set_bytes(self, problem: Mapping[str, Any]) -> int:
        """From the manifest's buffers (each declares its shape and dtype): every buffer, and once more
        each output, for its reference (a builtin, Python or naive-kernel reference returns arrays of
        the outputs' shapes and dtypes)."""
        total = 0
        for arg in self.manifest.arguments:
            if arg.kind != "buffer" or arg.shape is None:
                continue
            shape = (Expr.parse(f"arguments.{arg.name}.shape", t, frozenset(problem)).integer(problem)
                     for t in arg.shape)  # fmt: skip
            size = math.prod(shape) * np.dtype(arg.dtype).itemsize  # every DType is a numpy dtype name
            total += 2 * size if arg.name in self.manifest.outputs else size
        return total


def _copy_to_constant(module: Any, symbol: str, array: Any) -> None:
    import cupy as cp

    module.get_global(symbol).copy_from_device(cp.ascontiguousarray(array).data, array.nbytes)
