# ruff: noqa: E501  (verbatim ncu CSV lines)
"""CPU-testable parts of the cuda backend: ncu CSV parsing, ptxas parsing, roofline, error
classification, compile keys. None of these import CuPy."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kernelfarm.core.states import FailureKind
from kernelfarm.worker.cuda.bench import median_rel_error
from kernelfarm.worker.cuda.child import classify as classify_error
from kernelfarm.worker.cuda.compiler import CompileJob, CompilePool, parse_ptxas
from kernelfarm.worker.cuda.profile import ncu_command, parse_ncu_csv
from kernelfarm.worker.cuda.roofline import Ceilings, classify

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


def test_ncu_command_never_controls_clocks() -> None:
    cmd = ncu_command("ncu", "r.csv", "job.json", ["gpu__time_duration.sum"])
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert "regex:^kf_" in cmd


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
