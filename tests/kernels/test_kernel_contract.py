"""The kernel contract: every kernel of the catalogue passes the same suite.

Parametrized over ``all_kernels()``, so a new kernel is checked by adding it, with no list to
update here. Each kernel gets the checks that apply to its implementations:

- every kernel: a valid space for its problems, a problem signature that fills defaults and
  rejects bad values, a stable source hash;
- a "cuda" implementation: launch shapes within CUDA's limits, sane defines, roofline figures, an
  entry point in its source, a source hash and a cubin cache key that change with any file the
  source includes; on a GPU (``-m gpu``), a sample of configs measured through the worker's cuda
  backend verifies against the kernel's reference;
- a "replay" implementation: recordings that exist and cover the problems they claim; a
  replay-only kernel accepts only those problems.

The GPU part runs on the device machine with the other GPU tests (the command is in
tests/gpu/conftest.py); without CuPy or a GPU it skips with the reason.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.cuda_source import INCLUDE_DIR, CudaSource
from kernelfarm.kernels.gpu_kernel import GpuKernel
from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.cuda import ManifestCudaKernel
from kernelfarm.kernels.recordings import Recordings
from kernelfarm.kernels.registry import all_kernels
from kernelfarm.kernels.spec import INPUT_SETS, KernelSpec, MissingImplementation, ProblemParam
from kernelfarm.kernels.tolerance import Tolerance
from kernelfarm.kernels.triton_kernel import BufferArg, TensorDescriptorArg, TritonKernel
from kernelfarm.worker.cuda.compiler import CompileJob
from kernelfarm.worker.triton.compiler import TritonCompileJob
from tests.gpu.availability import gpu_missing
from tests.gpu.backends import correctness_backend
from tests.kernels.manifests import half_bundle, user_bundle

# The catalogue, and kernels that come as a manifest (tests/data/user_kernel/; the float16 one includes a
# CUDA Toolkit header): kernels as data pass the same suite.
MANIFEST_BUNDLES = (user_bundle(), half_bundle())
MANIFEST_SPECS = {spec.name: spec for spec in (build_spec(bundle, 1) for bundle in MANIFEST_BUNDLES)}
SPECS = {**all_kernels(), **MANIFEST_SPECS}
KERNELS = sorted(SPECS)
CUDA_KERNELS = [name for name in KERNELS if "cuda" in SPECS[name].backends]
REPLAY_KERNELS = [name for name in KERNELS if "replay" in SPECS[name].backends]
FILE_KERNELS = [name for name in CUDA_KERNELS if not isinstance(SPECS[name].impls["cuda"], ManifestCudaKernel)]
TRITON_KERNELS = [name for name in KERNELS if "triton" in SPECS[name].backends]
GPU_KERNELS = sorted(set(CUDA_KERNELS) | set(TRITON_KERNELS))
TRITON_OPTIONS = {
    "num_warps": (1, 2, 4, 8, 16, 32),
    "num_stages": range(1, 8),
    "num_ctas": (1, 2, 4),
    "maxnreg": range(24, 256),
}

# CUDA's limits (compute capability 7.0 and later) and the H100/H200's opt-in shared memory per block.
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = ((1 << 31) - 1, 65535, 65535)
MAX_DYNAMIC_SHARED_BYTES = 227 * 1024
# Valid configs per problem a CUDA kernel declares: enough to be worth tuning, few enough to
# enumerate. Flash attention's space is bounded by registers and shared memory.
MIN_SPACE = {"flash_attention": 100, "user-axpb": 200, "user-haxpb": 200}
DEFAULT_MIN_SPACE = 300
MAX_SPACE = 20_000
CONFIGS_CHECKED_PER_PROBLEM = 50
CONFIGS_MEASURED_PER_PROBLEM = 4


def spec_of(name: str) -> KernelSpec:
    # the registry first: a test may add a kernel to it (tests/test_extending_examples.py)
    return all_kernels().get(name) or MANIFEST_SPECS[name]


def cuda_of(name: str) -> CudaKernel:
    return spec_of(name).impl("cuda", CudaKernel)


def declared_problems(spec: KernelSpec) -> list[dict[str, Any]]:
    """The default problem, the recorded ones and the test problems, normalized, each once."""
    recorded = spec.recordings.problems if spec.recordings else ()
    out: list[dict[str, Any]] = []
    for problem in (spec.default_problem, *recorded, *spec.test_problems):
        normalized = spec.normalize_problem(problem)
        if normalized not in out:
            out.append(normalized)
    return out


def gpu_problems(spec: KernelSpec) -> list[dict[str, Any]]:
    return [spec.normalize_problem(p) for p in spec.test_problems or (spec.default_problem,)]


def spread(items: Sequence[Any], count: int) -> list[Any]:
    """Up to ``count`` items evenly spread over ``items`` (first and last parts of a space differ most)."""
    if len(items) <= count:
        return list(items)
    step = (len(items) - 1) / (count - 1) if count > 1 else 0
    return [items[round(i * step)] for i in range(count)]


def bad_values(param: ProblemParam) -> list[Any]:
    """Values ``param`` must reject: the wrong type, out of its range, not one of its choices."""
    if param.kind == "int":
        out: list[Any] = [str(param.minimum), float(param.minimum), True, None, param.minimum - 1, param.maximum + 1]
        if param.choices is not None:  # in range, yet not a choice
            out.append(next(v for v in range(param.minimum, param.maximum + 1) if v not in param.choices))
        return out
    out = [1, None, b"bytes"]
    if param.choices is not None:
        out.append("not-one-of-the-choices")
    return out


# ---------------------------------------------------------------- every kernel


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_has_implementations_and_a_description(name: str) -> None:
    spec = spec_of(name)
    assert spec.impls and spec.backends == frozenset(spec.impls)
    assert spec.description.strip() and spec.version >= 1
    with pytest.raises(MissingImplementation, match=name):
        spec.impl("no-such-backend", object)


@pytest.mark.parametrize("name", KERNELS)
def test_space_is_non_empty_and_valid_for_the_default_problem(name: str) -> None:
    spec = spec_of(name)
    problem = spec.normalize_problem(spec.default_problem)
    assert spec.space.parameters
    configs = spec.space.valid_configs(problem)
    assert configs, f"no valid config for the default problem {problem}"
    for config in spread(configs, CONFIGS_CHECKED_PER_PROBLEM):
        assert set(config) == {p.name for p in spec.space.parameters}
        assert spec.space.contains(config, problem)
        assert spec.space.config_from_key(spec.space.key(config)) == config


@pytest.mark.parametrize("name", KERNELS)
def test_every_declared_problem_normalizes_to_itself_and_has_valid_configs(name: str) -> None:
    spec = spec_of(name)
    for problem in declared_problems(spec):
        assert spec.normalize_problem(problem) == problem
        assert len(spec.space.valid_indices(problem)) > 0, problem


@pytest.mark.parametrize("name", KERNELS)
def test_problem_signature_fills_defaults(name: str) -> None:
    spec = spec_of(name)
    full = spec.normalize_problem(spec.default_problem)
    assert list(full) == [p.name for p in spec.problem_params]
    assert spec.normalize_problem({}) == full
    assert spec.normalize_problem(None) == full
    for param in spec.problem_params:
        assert spec.normalize_problem({k: v for k, v in full.items() if k != param.name}) == full


@pytest.mark.parametrize("name", KERNELS)
def test_problem_signature_rejects_bad_values(name: str) -> None:
    spec = spec_of(name)
    full = spec.normalize_problem(spec.default_problem)
    with pytest.raises(InvalidInput, match="no_such_dimension"):
        spec.normalize_problem({**full, "no_such_dimension": 1})
    for param in spec.problem_params:
        for bad in bad_values(param):
            with pytest.raises(InvalidInput, match=f"problem.{param.name}"):
                spec.normalize_problem({**full, param.name: bad})


@pytest.mark.parametrize("name", KERNELS)
def test_source_hash_is_stable(name: str) -> None:
    spec = spec_of(name)
    assert re.fullmatch(r"[0-9a-f]{16}", spec.source_hash)
    if name in FILE_KERNELS:  # read again from the files: the same hash
        kernel = cuda_of(name)
        assert kernel.source.path is not None
        reread = type(kernel)(CudaSource.from_file(kernel.source.path))
        assert replace(spec, impls={**spec.impls, "cuda": reread}).source_hash == spec.source_hash


def test_source_hashes_differ_between_kernels() -> None:
    hashes = [spec_of(name).source_hash for name in KERNELS]
    assert len(set(hashes)) == len(hashes)


# ---------------------------------------------------------------- CUDA implementations


@pytest.mark.parametrize("name", FILE_KERNELS)  # manifest kernels: tests/kernels/test_manifest.py
def test_entry_point_is_in_the_source(name: str) -> None:
    kernel = cuda_of(name)
    # declared in the template as extern "C" __global__ (a C name: the backend looks it up by name)
    declaration = re.compile(rf'extern "C" __global__\b[^;{{}}]*?\b{kernel.entry}\s*\(')
    assert declaration.search(kernel.source.text), kernel.entry
    assert kernel.outputs()


@pytest.mark.parametrize("name", CUDA_KERNELS)
def test_declared_problems_leave_a_rich_space(name: str) -> None:
    spec = spec_of(name)
    for problem in declared_problems(spec):
        valid = len(spec.space.valid_indices(problem))
        assert MIN_SPACE.get(name, DEFAULT_MIN_SPACE) <= valid <= MAX_SPACE, (problem, valid)


@pytest.mark.parametrize("name", CUDA_KERNELS)
def test_launch_shapes_are_within_cuda_limits(name: str) -> None:
    spec, kernel = spec_of(name), cuda_of(name)
    for problem in declared_problems(spec):
        for config in spread(spec.space.valid_configs(problem), CONFIGS_CHECKED_PER_PROBLEM):
            launch = kernel.launch(config, problem)
            where = f"{name} {problem} {config}: {launch}"
            assert 32 <= launch.threads <= MAX_THREADS_PER_BLOCK, where  # at least one whole warp
            assert all(1 <= b <= limit for b, limit in zip(launch.block, MAX_BLOCK_DIMS, strict=True)), where
            assert all(1 <= g <= limit for g, limit in zip(launch.grid, MAX_GRID_DIMS, strict=True)), where
            assert 0 <= launch.shared_bytes <= MAX_DYNAMIC_SHARED_BYTES, where


@pytest.mark.parametrize("name", CUDA_KERNELS)
def test_defines_are_macros_with_int_or_string_values(name: str) -> None:
    spec, kernel = spec_of(name), cuda_of(name)
    for problem in declared_problems(spec):
        for config in spread(spec.space.valid_configs(problem), CONFIGS_CHECKED_PER_PROBLEM):
            defines = kernel.defines(config, problem)
            assert defines
            for macro, value in defines.items():
                assert re.fullmatch(r"[A-Za-z_]\w*", macro), macro
                assert isinstance(value, int | str) and not isinstance(value, bool), (macro, value)


@pytest.mark.parametrize("name", CUDA_KERNELS)
def test_roofline_figures_and_tolerance_are_positive(name: str) -> None:
    spec, kernel = spec_of(name), cuda_of(name)
    for problem in declared_problems(spec):
        assert kernel.flops(problem) > 0 and kernel.bytes_moved(problem) > 0, problem
        tolerance = kernel.tolerance(problem)
        assert isinstance(tolerance, Tolerance), problem
        assert 0 < tolerance.norm < 1 and 0 < tolerance.element < 1, (problem, tolerance)
        assert kernel.peak_kind(problem) in {"fp32", "tensor"}


def copy_of_sources(kernel: CudaKernel, root: Path) -> Path:
    """The kernel's template and the shared headers copied under ``root``; returns the template."""
    assert kernel.source.path is not None
    template = root / "kernel" / kernel.source.path.name
    template.parent.mkdir(parents=True)
    shutil.copy(kernel.source.path, template)
    shutil.copytree(INCLUDE_DIR, root / "include")
    return template


@pytest.mark.parametrize("name", FILE_KERNELS)  # manifest kernels: tests/kernels/test_manifest.py
def test_source_hash_and_cubin_key_cover_every_included_header(name: str, tmp_path: Path) -> None:
    spec, kernel = spec_of(name), cuda_of(name)
    problem = spec.normalize_problem(spec.default_problem)
    config = spec.space.valid_configs(problem)[0]

    def with_source(source: CudaSource) -> KernelSpec:
        return replace(spec, impls={**spec.impls, "cuda": type(kernel)(source)})

    def cubin_key(source: CudaSource) -> str:
        return CompileJob.for_config(with_source(source), config, problem, "sm_90").key

    template = copy_of_sources(kernel, tmp_path)
    include_dirs = (tmp_path / "include",)
    copied = CudaSource.from_file(template, include_dirs)
    assert copied == kernel.source  # same text, same headers: the copy stands for the kernel
    assert with_source(copied).source_hash == spec.source_hash
    edited_files = [template, *(include_dirs[0] / header for header, _ in copied.headers)]
    seen_hashes, seen_keys = {spec.source_hash}, {cubin_key(copied)}
    for path in edited_files:
        path.write_text(path.read_text() + "\n// an edit\n")
        edited = CudaSource.from_file(template, include_dirs)
        seen_hashes.add(with_source(edited).source_hash)
        seen_keys.add(cubin_key(edited))
    # each edit (the template, then each header in turn) gave a new hash and a new cubin key
    assert len(seen_hashes) == len(seen_keys) == 1 + len(edited_files)


# ---------------------------------------------------------------- Triton implementations


def triton_of(name: str) -> TritonKernel:
    return spec_of(name).impl("triton", TritonKernel)


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_triton_entries_are_jit_functions_in_the_module_named_like_farm_kernels(name: str) -> None:
    kernel = triton_of(name)
    text = kernel.source_text()  # found without importing the module (no Triton needed)
    assert kernel.entries() and kernel.outputs()
    for entry in kernel.entries():
        assert entry.startswith("kf_"), entry  # Triton names the GPU kernel after the function: ncu sees kf_*
        assert re.search(rf"@triton\.jit\s*\ndef {entry}\(", text), entry


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_triton_configs_give_valid_options_grids_and_a_value_for_every_argument(name: str) -> None:
    spec, kernel = spec_of(name), triton_of(name)
    for problem in declared_problems(spec):
        for config in spread(spec.space.valid_configs(problem), CONFIGS_CHECKED_PER_PROBLEM):
            where = f"{name} {problem} {config}"
            assert kernel.entry(config) in kernel.entries(), where
            for option, value in kernel.options(config).items():
                assert value in TRITON_OPTIONS[option], (where, option, value)
            grid = kernel.grid(config, problem, sm_count=132)
            assert all(1 <= g <= limit for g, limit in zip(grid.dims, MAX_GRID_DIMS, strict=True)), where
            # every runtime argument has a compiler type and a value, and no constexpr is also one
            signature, arguments = kernel.signature(config, problem), kernel.arguments(config, problem, 132)
            assert set(signature) == set(arguments), where
            assert not set(signature) & set(kernel.constexprs(config, problem)), where
            assert set(kernel.scalars(config, problem)) <= set(signature), where
            buffers = {a.buffer for a in arguments.values() if isinstance(a, BufferArg | TensorDescriptorArg)}
            assert set(kernel.outputs()) <= buffers, where


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_triton_roofline_figures_and_tolerance_are_positive(name: str) -> None:
    spec, kernel = spec_of(name), triton_of(name)
    for problem in declared_problems(spec):
        assert kernel.flops(problem) > 0 and kernel.bytes_moved(problem) > 0, problem
        tolerance = kernel.tolerance(problem)
        assert isinstance(tolerance, Tolerance), (problem, tolerance)  # norm and element bounds, as for CUDA
        assert 0 < tolerance.norm < 1 and 0 < tolerance.element < 1, (problem, tolerance)
        assert kernel.peak_kind(problem) in {"fp32", "tensor"}


def grown(param: ProblemParam, value: Any) -> Any:
    """A larger value than ``value`` that ``param`` accepts (the next choice, or twice as large, kept a
    multiple of its ``multiple_of``), or ``value`` itself when there is none."""
    if param.kind != "int":
        return value
    if param.choices is not None:
        return min((c for c in param.choices if c > value), default=value)
    larger = max(2 * value, value + param.multiple_of)
    return larger if larger <= param.maximum else value


@pytest.mark.parametrize("name", CUDA_KERNELS)
def test_device_footprint_is_positive_and_grows_with_the_problem(name: str) -> None:
    """What the API refuses a job's problem by (api/jobs_service.py) and a worker checks before
    allocating: every GPU kernel declares it, it is positive, it never shrinks when one dimension
    grows, and it grows when all of them do."""
    check_device_footprint(spec_of(name))


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_triton_device_footprint_is_positive_and_grows_with_the_problem(name: str) -> None:
    check_device_footprint(spec_of(name))


def check_device_footprint(spec: KernelSpec) -> None:
    for problem in declared_problems(spec):
        footprint = spec.device_bytes(problem)
        assert isinstance(footprint, int) and footprint > 0, (problem, footprint)
        for impl in (spec.impls[b] for b in ("cuda", "triton") if b in spec.impls):
            assert isinstance(impl, GpuKernel)
            assert footprint == INPUT_SETS * (impl.input_set_bytes(problem) or 0), problem
        everything = dict(problem)
        for param in spec.problem_params:
            one = spec.normalize_problem({**problem, param.name: grown(param, problem[param.name])})
            assert spec.device_bytes(one) >= footprint, (param.name, one)  # type: ignore[operator]
            everything[param.name] = grown(param, problem[param.name])
        larger = spec.normalize_problem(everything)
        assert larger != problem
        assert spec.device_bytes(larger) > footprint, (problem, larger)  # type: ignore[operator]


def test_a_kernel_that_declares_no_footprint_has_none() -> None:
    """Recordings replay what was measured, so a replay-only kernel declares no footprint (the API
    then accepts its recorded problems whatever their size)."""
    replay_only = [spec_of(name) for name in REPLAY_KERNELS if spec_of(name).replay_only]
    assert replay_only
    for spec in replay_only:
        assert spec.device_bytes(declared_problems(spec)[0]) is None


def test_grown_respects_choices_multiples_and_maxima() -> None:
    assert grown(ProblemParam("R", choices=(1, 3, 5)), 3) == 5
    assert grown(ProblemParam("R", choices=(1, 3, 5)), 5) == 5
    assert grown(ProblemParam("M", multiple_of=32, maximum=1024), 96) == 192
    assert grown(ProblemParam("M", maximum=100), 60) == 60
    assert grown(ProblemParam("causal", minimum=0, maximum=1), 0) == 1


@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_triton_source_hash_and_compile_key_follow_the_jit_module(name: str, tmp_path: Path) -> None:
    spec, kernel = spec_of(name), triton_of(name)
    problem = spec.normalize_problem(spec.default_problem)
    config = spec.space.valid_configs(problem)[0]
    copy = tmp_path / "kf_copied_jit.py"
    copy.write_text(kernel.source_text())
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        moved = type(kernel).__new__(type(kernel))
        moved.__dict__ |= kernel.__dict__ | {"module": "kf_copied_jit"}

        def hashes() -> tuple[str, str]:
            with_copy = replace(spec, impls={**spec.impls, "triton": moved})
            return with_copy.source_hash, TritonCompileJob.for_config(moved, config, problem, 90, "3.6.0").key

        before = hashes()
        copy.write_text(copy.read_text() + "\n# an edit\n")
        after = hashes()
    finally:
        sys.path.remove(str(tmp_path))
    assert before[0] != after[0] and before[1] != after[1]


# ---------------------------------------------------------------- replay implementations


@pytest.mark.parametrize("name", REPLAY_KERNELS)
def test_recordings_exist_and_cover_their_problems(name: str) -> None:
    spec = spec_of(name)
    recordings = spec.impl("replay", Recordings)
    assert recordings.paths and all(path.is_file() for path in recordings.paths)
    assert recordings.gpu_models and recordings.problems
    for problem in recordings.problems:
        assert recordings.covers(spec.normalize_problem(problem))


@pytest.mark.parametrize("name", [n for n in REPLAY_KERNELS if spec_of(n).replay_only])
def test_replay_only_kernel_accepts_only_recorded_problems(name: str) -> None:
    spec = spec_of(name)
    recorded = spec.normalize_problem(spec.default_problem)
    unrecorded = {k: v + 1 if isinstance(v, int) else v for k, v in recorded.items()}
    with pytest.raises(InvalidInput, match="replay-only"):
        spec.normalize_problem(unrecorded)


# ---------------------------------------------------------------- on the GPU


@pytest.fixture(scope="module")
def cuda_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = gpu_missing()
    if reason is not None:
        pytest.skip(reason)
    # the manifest kernels are materialized where the measuring child (no database) reads them, in folders
    # named for their content as the farm's kernel cache names them (the child checks the files against the name)
    cache = tmp_path_factory.mktemp("kernel-cache")
    manifest_kernels = {b.manifest.name: build_spec(b, 1, cache / b.content_hash) for b in MANIFEST_BUNDLES}
    yield from correctness_backend(tmp_path_factory, {**all_kernels(), **manifest_kernels})


@pytest.fixture(scope="module")
def triton_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = gpu_missing()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("triton", reason="Triton is not installed")
    from kernelfarm.worker.backends.triton import TritonBackend, TritonBackendOptions
    from kernelfarm.worker.measuring.timing import TimingPolicy

    options = TritonBackendOptions(
        cache_dir=tmp_path_factory.mktemp("triton-cache"),
        timeout_s=120.0,
        policy=TimingPolicy(max_time_s=0.2),
        roofline=False,
        profile_standby=False,
    )
    backend = TritonBackend(options)
    yield backend
    backend.close()


@pytest.mark.gpu
@pytest.mark.parametrize("name", TRITON_KERNELS)
def test_sampled_triton_configs_verify_against_the_reference_on_the_gpu(name: str, triton_backend: Any) -> None:
    from kernelfarm.worker.backends.base import MeasureRequest

    spec = spec_of(name)
    requests = [
        MeasureRequest(name, problem, config, profile=False, seed=7)
        for problem in gpu_problems(spec)
        for config in spread(spec.space.valid_configs(problem), CONFIGS_MEASURED_PER_PROBLEM)
    ]
    measurements = triton_backend.measure_many(requests)
    failures = [
        (dict(r.problem), dict(r.config), m.failure, m.failure_message)
        for r, m in zip(requests, measurements, strict=True)
        if m.failure is not None or not m.verified
    ]
    assert not failures, failures
    assert all(m.provenance.get("source_hash") == spec.source_hash for m in measurements)


@pytest.mark.gpu
@pytest.mark.parametrize("name", CUDA_KERNELS)
def test_sampled_configs_verify_against_the_reference_on_the_gpu(name: str, cuda_backend: Any) -> None:
    from kernelfarm.worker.backends.base import MeasureRequest

    spec = spec_of(name)
    requests = [
        MeasureRequest(name, problem, config, profile=False, seed=7)
        for problem in gpu_problems(spec)
        for config in spread(spec.space.valid_configs(problem), CONFIGS_MEASURED_PER_PROBLEM)
    ]
    measurements = cuda_backend.measure_many(requests)
    assert len(measurements) == len(requests)
    failures = [
        (dict(r.problem), dict(r.config), m.failure, m.failure_message)
        for r, m in zip(requests, measurements, strict=True)
        if m.failure is not None or not m.verified
    ]
    assert not failures, failures
    assert all(m.timing is not None and m.provenance.get("source_hash") == spec.source_hash for m in measurements)


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_KERNELS)
def test_declared_input_set_is_what_make_inputs_and_reference_allocate(name: str) -> None:
    """The footprint the API and the workers refuse problems by is the real one: the bytes of every
    buffer make_inputs returns and every array reference returns, on the GPU."""
    reason = gpu_missing()
    if reason is not None:
        pytest.skip(reason)
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    spec = spec_of(name)
    for backend in ("cuda", "triton"):
        impl = spec.impls.get(backend)
        if not isinstance(impl, GpuKernel):
            continue
        for problem in gpu_problems(spec):
            buffers = impl.make_inputs(problem, 7)
            reference = impl.reference(buffers, problem)
            cupy.cuda.Stream.null.synchronize()
            allocated = sum(int(a.nbytes) for a in (*buffers.values(), *reference.values()))
            assert impl.input_set_bytes(problem) == allocated, (backend, problem)
            del buffers, reference
            cupy.get_default_memory_pool().free_all_blocks()


def test_gpu_problems_default_to_the_default_problem() -> None:
    spec = replace(spec_of(CUDA_KERNELS[0]), test_problems=())
    assert gpu_problems(spec) == [spec.normalize_problem(spec.default_problem)]


def test_spread_keeps_both_ends() -> None:
    assert spread(list(range(10)), 4) == [0, 3, 6, 9]
    assert spread([1, 2], 4) == [1, 2]


def test_bad_values_cover_type_range_and_choices() -> None:
    values = bad_values(ProblemParam("R", choices=(1, 3), minimum=1, maximum=4))
    assert values == ["1", 1.0, True, None, 0, 5, 2]
    assert bad_values(ProblemParam("dtype", kind="str", choices=("a",))) == [
        1,
        None,
        b"bytes",
        "not-one-of-the-choices",
    ]
