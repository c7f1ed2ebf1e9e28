# ruff: noqa: E501  (verbatim ncu CSV lines)
"""CPU-testable parts of the cuda backend and the measuring package: ncu CSV parsing, the ncu kernel
filter and standby choice, ptxas parsing, roofline, error classification, compile keys, the cuda
settings. None of these import CuPy."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kernelfarm.core.states import FailureKind
from kernelfarm.worker.cuda import ncu_profiler
from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool, parse_ptxas
from kernelfarm.worker.cuda.profile import ProfileBatchResult, ProfileTarget, kernel_filter, ncu_command, parse_ncu_csv
from kernelfarm.worker.measuring.faults import classify_error
from kernelfarm.worker.measuring.roofline import Ceilings, classify
from kernelfarm.worker.measuring.timing import median_rel_error

RAW = """==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","launch__registers_per_thread","lts__t_sector_hit_rate.pct","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","nsecond","register/thread","%","%"
"0","42","python3","h","kf_softmax","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0","12,345.5","32","10.5","88.1"
"1","42","python3","h","kf_softmax","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0","2.5","40","11","70"
"""

LONG = """"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","p","h","kf_x","1","7","(1,1,1)","(1,1,1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","3.5"
"0","1","p","h","kf_x","1","7","(1,1,1)","(1,1,1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Mbyte","2"
"1","1","p","h","kf_x","1","7","(1,1,1)","(1,1,1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","700"
"""


def test_parse_ncu_raw_page_with_units() -> None:
    rows = parse_ncu_csv(RAW)
    assert len(rows) == 2
    assert rows[0]["ncu_duration_ns"] == pytest.approx(12345.5)
    assert rows[0]["registers_per_thread"] == 32
    assert rows[1]["achieved_occupancy_pct"] == 70
    assert rows[0]["kernel_name"] == "kf_softmax"


def test_parse_ncu_long_page_scales_units() -> None:
    rows = parse_ncu_csv(LONG)
    assert rows[0]["ncu_duration_ns"] == pytest.approx(3500)
    assert rows[0]["dram_bytes_read"] == pytest.approx(2e6)
    assert rows[1]["ncu_duration_ns"] == pytest.approx(700)


def test_ncu_command_never_controls_clocks_and_filters_on_the_given_kernels() -> None:
    cmd = ncu_command("ncu", "r.csv", "job.json", ["gpu__time_duration.sum"], ["kf_softmax", "conv_tile"])
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--kernel-name") + 1] == kernel_filter(["kf_softmax", "conv_tile"])
    assert cmd[cmd.index("--kernel-name-base") + 1] == "function"


def test_kernel_filter_matches_exactly_the_named_kernels() -> None:
    value = kernel_filter(["kf_softmax", "conv_tile", "odd.name", "kf_softmax"])
    assert value.startswith("regex:")
    pattern = re.compile(value.removeprefix("regex:"))
    for name in ("kf_softmax", "conv_tile", "odd.name"):
        assert pattern.search(name), name
    # Input generators (cuRAND, CuPy elementwise kernels), prefixes and look-alikes stay out.
    for name in ("kf_softmax2", "my_conv_tile", "oddxname", "cupy_copy__float32", "generate_seed_pseudo", "kf_"):
        assert not pattern.search(name), name
    with pytest.raises(ValueError):
        kernel_filter([])


def target(entry: str) -> ProfileTarget:
    return ProfileTarget("k", {}, {}, "k.cubin", 1, entry)


class FakeStandby:
    """Stands in for profile.StandbyProfiler: records what it was started for and what it ran."""

    started: ClassVar[list[FakeStandby]] = []

    def __init__(self, ncu: str, entries: Iterable[str], refs: Any = None, device_ordinal: int = 0,
                 loader: Any = None, limits: Any = None) -> None:  # fmt: skip
        self.entries = frozenset(entries)
        self.ran: list[list[str]] = []
        self.closed = False
        FakeStandby.started.append(self)

    def covers(self, entries: Iterable[str]) -> bool:
        return self.entries.issuperset(entries)

    def ready(self) -> bool:
        return not self.closed

    def run(self, targets: Sequence[ProfileTarget], timeout_s: float) -> ProfileBatchResult:
        self.ran.append([t.entry for t in targets])
        self.closed = True  # a standby runs one batch, then exits
        return ProfileBatchResult([{"ncu_duration_ns": 1.0} for _ in targets], 0.5)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def profiler(monkeypatch: pytest.MonkeyPatch) -> ncu_profiler.NcuProfiler:
    FakeStandby.started = []
    fresh: list[list[str]] = []

    def profile_batch(targets: Sequence[ProfileTarget], *args: Any, **kwargs: Any) -> ProfileBatchResult:
        fresh.append([t.entry for t in targets])
        return ProfileBatchResult([{"ncu_duration_ns": 2.0} for _ in targets], 1.0)

    monkeypatch.setattr(ncu_profiler, "find_ncu", lambda: "ncu")
    monkeypatch.setattr(ncu_profiler, "StandbyProfiler", FakeStandby)
    monkeypatch.setattr(ncu_profiler, "profile_batch", profile_batch)
    p = ncu_profiler.NcuProfiler(lambda: frozenset({"kf_a", "kf_b"}))
    p.fresh = fresh  # type: ignore[attr-defined]
    return p


def test_the_standby_filters_on_the_catalogue_and_profiles_a_batch_within_it(
    profiler: ncu_profiler.NcuProfiler,
) -> None:
    profiler.start_standby()
    assert profiler.ready() and FakeStandby.started[0].entries == {"kf_a", "kf_b"}
    outcomes = profiler.profile([target("kf_a"), "compilation failed", target("kf_b")], 60.0)
    assert [o.error for o in outcomes] == [None, "compilation failed", None]
    assert outcomes[0].metrics is not None and outcomes[0].metrics["ncu_standby"] is True
    assert outcomes[0].metrics["ncu_batch_size"] == 2 and outcomes[0].metrics["ncu_wall_s"] == 0.25
    assert FakeStandby.started[0].ran == [["kf_a", "kf_b"]]
    assert len(FakeStandby.started) == 2 and profiler.ready()  # the next standby, started after the batch


def test_a_kernel_outside_the_standby_filter_is_profiled_by_a_fresh_ncu_and_joins_the_next_filter(
    profiler: ncu_profiler.NcuProfiler,
) -> None:
    profiler.start_standby()
    outcomes = profiler.profile([target("kf_a"), target("uploaded_gemm")], 60.0)
    assert all(o.metrics is not None and o.metrics["ncu_standby"] is False for o in outcomes)
    assert profiler.fresh == [["kf_a", "uploaded_gemm"]]  # type: ignore[attr-defined]
    first, second = FakeStandby.started
    assert first.closed and first.ran == []
    assert second.entries == {"kf_a", "kf_b", "uploaded_gemm"}
    profiler.profile([target("uploaded_gemm")], 60.0)
    assert second.ran == [["uploaded_gemm"]]


def test_no_standby_when_switched_off(profiler: ncu_profiler.NcuProfiler) -> None:
    profiler.standby = False
    profiler.start_standby()
    assert not profiler.ready() and FakeStandby.started == []
    outcomes = profiler.profile([target("kf_a")], 60.0)
    assert outcomes[0].metrics is not None and outcomes[0].metrics["ncu_standby"] is False


def test_cuda_settings_come_from_the_environment_through_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from kernelfarm.core.settings import Settings

    monkeypatch.delenv("KERNELFARM_CUDA_CACHE", raising=False)
    monkeypatch.delenv("KERNELFARM_CHILD_LOG", raising=False)
    assert Settings().cuda_cache is None and Settings().child_log == "WARNING"
    monkeypatch.setenv("KERNELFARM_CUDA_CACHE", "some/cache")
    monkeypatch.setenv("KERNELFARM_CHILD_LOG", "debug")
    settings = Settings()
    assert settings.cuda_cache == Path("some/cache") and settings.child_log == "DEBUG"
    monkeypatch.setenv("KERNELFARM_CHILD_LOG", "chatty")
    with pytest.raises(ValidationError):
        Settings()


def test_parse_ptxas() -> None:
    log = (
        "ptxas info    : Function properties for kf_x\n"
        "ptxas         .     16 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 96 registers, used 1 barriers"
    )
    assert parse_ptxas(log) == {"registers": 96, "spill_bytes": 12, "stack_bytes": 16}


def test_compile_key_depends_on_defines_and_arch() -> None:
    a = CompileJob("src", (("A", "1"),), "sm_90")
    assert a.key == CompileJob("src", (("A", "1"),), "sm_90").key
    assert a.key != CompileJob("src", (("A", "2"),), "sm_90").key
    assert a.key != CompileJob("src", (("A", "1"),), "sm_90a").key
    assert "--gpu-architecture=sm_90" in a.options


def test_roofline_memory_and_compute_bound() -> None:
    c = Ceilings(dram_bytes_per_s=3e12, fp32_flops=50e12, tensor_flops=700e12)
    mem = classify(flops=1e9, bytes_moved=1e9, seconds=1e9 / 2.7e12, ceilings=c, peak_kind="fp32")
    assert mem["bound"] == "memory"
    assert mem["roofline_fraction"] == pytest.approx(0.9)
    gemm = classify(
        flops=2 * 4096**3,
        bytes_moved=4 * 3 * 4096**2,
        seconds=2 * 4096**3 / 40e12,
        ceilings=c,
        peak_kind="fp32",
    )
    assert gemm["bound"] == "compute"
    assert gemm["flops_fraction_of_peak"] == pytest.approx(0.8)


def test_cuda_error_classification() -> None:
    assert classify_error("CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access") == (
        FailureKind.CRASH,
        True,
    )
    assert classify_error("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested") == (
        FailureKind.LAUNCH,
        False,
    )


def test_median_rel_error_shrinks_with_reps() -> None:
    assert math.isinf(median_rel_error([1.0]))
    few = median_rel_error([1.0, 1.1, 0.9, 1.0])
    many = median_rel_error([1.0, 1.1, 0.9, 1.0] * 25)
    assert many < few


def test_compile_pool_starts_every_process_before_any_job(tmp_path: Path) -> None:
    pool = CompilePool(tmp_path, workers=3)  # no warm_arch: no NVRTC here
    try:
        assert pool.wait_started(60.0)
        assert pool._warmed.value == 3
    finally:
        pool.close()


def test_a_manifest_kernels_compiler_options_reach_nvrtc_after_the_farms() -> None:
    from kernelfarm.kernels.manifest.build import build_spec
    from kernelfarm.kernels.manifest.bundle import check_bundle
    from tests.kernels.manifests import user_manifest, user_uploads

    def job(options: list[str]) -> CompileJob:
        manifest = user_manifest()
        manifest = manifest | {"source": manifest["source"] | {"compiler_options": options}}
        spec = build_spec(check_bundle(manifest, user_uploads()), 1)
        config = spec.space.valid_configs(spec.default_problem)[0]
        return CompileJob.for_config(spec, config, spec.default_problem, "sm_90")

    plain, tuned = job([]), job(["--maxrregcount=32", "-use_fast_math", "-std=c++20"])
    assert tuned.options[tuned.options.index("--ptxas-options=-v") + 1 :][:3] == (
        "--maxrregcount=32", "-use_fast_math", "-std=c++20"
    )  # fmt: skip
    assert [o for o in tuned.options if o.startswith("-std=")] == ["-std=c++20"]  # one standard: the kernel's
    assert [o for o in plain.options if o.startswith("-std=")] == ["-std=c++17"]
    assert plain.key != tuned.key
