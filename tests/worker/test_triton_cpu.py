"""The triton backend's CPU-side logic: specialization like Triton's JIT, compile keys, the launcher's
argument list, the kernel names ncu filters on, and (where Triton is installed) a real ahead-of-time
compile for an H100 without a GPU. The GPU side is in the backend and kernel contract suites."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from kernelfarm.kernels.registry import all_kernels, get_kernel
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.triton_kernel import TritonKernel
from kernelfarm.worker.backends.base import MeasureRequest
from kernelfarm.worker.cuda.device import NvmlDevice
from kernelfarm.worker.cuda.profile import kernel_filter
from kernelfarm.worker.cuda.provenance import CudaProvenance
from kernelfarm.worker.measuring.catalogue import KernelCatalogue
from kernelfarm.worker.triton.compiler import TritonCompileJob, TritonCompilePool
from kernelfarm.worker.triton.loader import DevicePointer, HostTensorDescriptor, entry_names, launch_arguments
from kernelfarm.worker.triton.staging import TritonStaging, triton_arch

MATMUL = get_kernel("matmul_triton")
TILED = {
    "BLOCK_M": 128,
    "BLOCK_N": 256,
    "BLOCK_K": 64,
    "GROUP_M": 8,
    "num_warps": 8,
    "num_stages": 3,
    "TMA": 0,
    "SUBTILE": 0,
}
TMA = TILED | {"TMA": 1}
MATMUL_ARGS = ["a_ptr", "b_ptr", "c_ptr", "bias_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk",
               "stride_bn", "stride_cm", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
               "EPILOGUE"]  # fmt: skip


def matmul_job(config: dict, problem: dict, arch: int = 90) -> TritonCompileJob:
    impl = MATMUL.impl("triton", TritonKernel)
    return TritonCompileJob.for_config(impl, config, MATMUL.normalize_problem(problem), arch, "3.6.0")


@dataclass
class FakeMemory:
    ptr: int


@dataclass
class FakeArray:
    """What the loader reads of a CuPy array: its device address."""

    data: FakeMemory


def test_specialization_follows_tritons_jit() -> None:
    job = matmul_job(TILED, {"M": 4096, "N": 777, "K": 1024, "b_layout": "kn"})
    signature, constants, attrs = job.specialize(MATMUL_ARGS)
    # stride 1 becomes a constant, multiples of 16 are declared divisible, odd values are not
    assert signature["stride_ak"] == "constexpr" and constants["stride_ak"] == 1
    assert signature["stride_bn"] == "constexpr" and signature["stride_cn"] == "constexpr"
    assert signature["M"] == "i32" and attrs[(MATMUL_ARGS.index("M"),)] == [["tt.divisibility", 16]]
    assert (MATMUL_ARGS.index("N"),) not in attrs and (MATMUL_ARGS.index("stride_bk"),) not in attrs
    for pointer in ("a_ptr", "b_ptr", "c_ptr", "bias_ptr"):
        assert signature[pointer] == "*bf16" and (MATMUL_ARGS.index(pointer),) in attrs
    assert constants["BLOCK_N"] == 256 and constants["EPILOGUE"] == 0 and signature["BLOCK_N"] == "constexpr"


def test_a_parameter_without_type_or_value_is_refused() -> None:
    with pytest.raises(ValueError, match="extra"):
        matmul_job(TILED, {}).specialize([*MATMUL_ARGS, "extra"])


def test_compile_key_covers_config_problem_architecture_and_source() -> None:
    base = matmul_job(TILED, {})
    assert base.key == matmul_job(dict(TILED), {}).key
    assert len({base.key, matmul_job(TILED | {"num_stages": 4}, {}).key, matmul_job(TILED, {"N": 4112}).key,
                matmul_job(TILED, {}, arch=100).key}) == 4  # fmt: skip
    edited = TritonCompileJob(**{**base.__dict__, "source": base.source + "\n# edit"})
    assert edited.key != base.key


def test_the_tma_schedule_is_another_function_with_descriptors() -> None:
    job = matmul_job(TMA, {"M": 4096, "N": 4096, "K": 4096})
    assert job.function == "kf_triton_matmul_tma"
    assert dict(job.signature)["a_desc"] == "tensordesc<bf16[128, 64]>"
    assert dict(job.signature)["b_desc"] == "tensordesc<bf16[64, 256]>"  # B as K x N: boxes of BK x BN
    halves = matmul_job(TMA | {"SUBTILE": 1, "num_stages": 4}, {})
    assert dict(halves.signature)["c_desc"] == "tensordesc<bf16[128, 128]>" and dict(halves.constexprs)["SUBTILE"] == 1
    nk = matmul_job(TMA, {"b_layout": "nk"})
    assert dict(nk.signature)["b_desc"] == "tensordesc<bf16[256, 64]>" and dict(nk.constexprs)["B_KN"] == 0


def test_launch_arguments_bind_buffers_constants_and_descriptors() -> None:
    impl = MATMUL.impl("triton", TritonKernel)
    problem = MATMUL.normalize_problem({"M": 1000, "N": 4096, "K": 512})
    buffers = {"A": FakeArray(FakeMemory(0x1000)), "B": FakeArray(FakeMemory(0x2000)),
               "C": FakeArray(FakeMemory(0x3000))}  # fmt: skip
    _, constants, _ = matmul_job(TILED, problem).specialize(MATMUL_ARGS)
    by_index = {(MATMUL_ARGS.index(k),): v for k, v in constants.items()}
    args = launch_arguments(impl, MATMUL_ARGS, by_index, buffers, TILED, problem, sm_count=132)
    assert len(args) == len(MATMUL_ARGS)
    assert args[:4] == [DevicePointer(0x1000), DevicePointer(0x2000), DevicePointer(0x3000), DevicePointer(0x3000)]
    assert args[4:7] == [1000, 4096, 512] and args[MATMUL_ARGS.index("stride_ak")] == 1
    assert args[MATMUL_ARGS.index("BLOCK_M")] == 128  # a constant's slot carries its value

    tma_names = ["a_desc", "b_desc", "c_desc", "bias_ptr", "M", "N", "K", "NUM_SMS", "BLOCK_M", "BLOCK_N",
                 "BLOCK_K", "GROUP_M", "EPILOGUE", "B_KN", "SUBTILE"]  # fmt: skip
    tma_constants = {(tma_names.index(k),): v for k, v in impl.constexprs(TMA, problem).items()}
    args = launch_arguments(impl, tma_names, tma_constants, buffers, TMA, problem, sm_count=132)
    assert args[0] == HostTensorDescriptor(DevicePointer(0x1000), (1000, 512), (512, 1), (128, 64))
    assert args[0].base.data_ptr() == 0x1000 and args[0].padding == "zero"
    assert args[tma_names.index("NUM_SMS")] == 128  # one program per tile: 8 x 16 tiles < 132 SMs
    assert impl.grid(TMA, problem, 132).dims == (128, 1, 1)
    assert impl.grid(TMA, MATMUL.normalize_problem({}), 132).dims == (132, 1, 1)  # persistent: one per SM
    assert impl.grid(TILED, problem, 132).dims == (8 * 16, 1, 1)


def test_ncu_filters_on_the_triton_kernel_names_only() -> None:
    names = entry_names(list(all_kernels().values()))
    assert {"kf_triton_matmul", "kf_triton_matmul_tma", "kf_triton_softmax", "kf_triton_layernorm"} <= names
    assert not any(name in names for name in ("kf_matmul_bf16", "kf_softmax"))  # the CUDA kernels' names
    pattern = kernel_filter(names)
    assert pattern.startswith("regex:^(") and "kf_triton_matmul_tma" in pattern


def test_arch_numbers() -> None:
    assert triton_arch("9.0") == 90 and triton_arch("10.0") == 100 and triton_arch("8.9") == 89


def test_a_real_ahead_of_time_compile_for_hopper_needs_no_gpu(tmp_path: Path) -> None:
    pytest.importorskip("triton", reason="Triton is not installed (pip install 'kernelfarm[triton]')")
    from kernelfarm.worker.triton.compiler import compile_triton

    spec = get_kernel("softmax_triton")
    problem = spec.normalize_problem({"M": 256, "N": 1000, "dtype": "bfloat16"})
    config = spec.space.valid_configs(problem)[0]
    job = TritonCompileJob.for_config(spec.impl("triton", TritonKernel), config, problem, 90, "3.6.0")
    first = compile_triton(job, str(tmp_path))
    assert first.ok and not first.cached, first.log
    artifact = json.loads(first.artifact or "")
    files = artifact["metadata_group"]
    assert any(name.endswith(".cubin") for name in files) and all(Path(p).is_file() for p in files.values())
    assert artifact["job"]["function"] == "kf_triton_softmax" and first.resources["num_warps"] == config["num_warps"]
    again = compile_triton(job, str(tmp_path))
    assert again.ok and again.cached and json.loads(again.artifact or "")["hash"] == artifact["hash"]


def test_a_compile_error_is_a_result_not_an_exception(tmp_path: Path) -> None:
    pytest.importorskip("triton", reason="Triton is not installed (pip install 'kernelfarm[triton]')")
    from kernelfarm.worker.triton.compiler import compile_triton

    job = matmul_job(TILED, {})
    broken = TritonCompileJob(**{**job.__dict__, "signature": (("a_ptr", "*bf16"),)})  # the other arguments untyped
    result = compile_triton(broken, str(tmp_path))
    assert not result.ok and result.artifact is None and "no type and no constexpr value" in result.log


def test_the_profile_target_launches_with_the_loader_a_batch_names(tmp_path: Path) -> None:
    from kernelfarm.worker.cuda import profile
    from kernelfarm.worker.cuda.loader import CubinLoader
    from kernelfarm.worker.cuda.profile_target import make_loader
    from kernelfarm.worker.triton.loader import TritonLoader

    ref = profile.LoaderRef("kernelfarm.worker.triton.loader:TritonLoader", {"cache_dir": str(tmp_path)})
    paths = profile._BatchPaths(tmp_path)
    target = profile.ProfileTarget("softmax_triton", {"M": 1}, {"ROWS": 1}, "{}", 1, "kf_triton_softmax")
    job = json.loads(profile._job_text([target], None, 0, paths, ref))
    loader = make_loader(job["loader"])
    assert isinstance(loader, TritonLoader) and loader.cache_dir == str(tmp_path)
    assert isinstance(make_loader(json.loads(profile._job_text([target], None, 0, paths)).get("loader")), CubinLoader)
    with pytest.raises(TypeError, match="not a KernelLoader"):
        make_loader({"ref": "kernelfarm.worker.triton.loader:DevicePointer", "kwargs": {"address": 1}})


class VersionedCatalogue(KernelCatalogue):
    """Two versions of one kernel, as the farm serves an uploaded kernel: the latest unless a version
    is named. The versions have different Triton implementations, so a compile job shows which one
    it was built from."""

    def __init__(self, versions: dict[int, KernelSpec]) -> None:
        super().__init__()
        self.versions = versions

    def spec(self, name: str, version: int | None = None, bundle: str | None = None) -> KernelSpec:
        return self.versions[version or max(self.versions)]


def test_staging_compiles_the_kernel_version_the_job_pinned(tmp_path: Path) -> None:
    old, new = get_kernel("softmax_triton"), get_kernel("layernorm_triton")
    catalogue = VersionedCatalogue({1: replace(old, name="user_rows", version=1),
                                    2: replace(new, name="user_rows", version=2)})  # fmt: skip
    device = NvmlDevice(0, "NVIDIA H100 80GB HBM3", "GPU-0", "9.0", "580.0", "13.0", 80 << 30, 1980, 2619)
    provenance = CudaProvenance("triton", device, "", catalogue)
    pool = TritonCompilePool(tmp_path, workers=1)  # never asked to compile here
    try:
        staging = TritonStaging(catalogue, pool, "9.0", provenance, "3.6.0")
        problem = old.normalize_problem(old.default_problem)
        config = old.space.valid_configs(problem)[0]
        request = MeasureRequest("user_rows", problem, config, profile=False, seed=1, kernel_version=1)
        assert staging.invalid(request) is None
        job = staging.compile_job(request)
        assert (
            job.key == TritonCompileJob.for_config(old.impl("triton", TritonKernel), config, problem, 90, "3.6.0").key
        )
    finally:
        pool.wait_started(60)  # a process still starting when the pool closes prints a traceback
        pool.close()
