"""The real profiler (torch.profiler) on tiny GPT-2- and Llama-shaped models, on the CPU: the report's
invariants hold and the mapping picks the model's real problem sizes."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the model profiler's CPU tests need the `profile` extra (torch)")
pytest.importorskip("transformers", reason="the built-in models need the `profile` extra (transformers)")

from kernelfarm.model_profiler.analysis import ProfileReport, analyse
from kernelfarm.model_profiler.capture import capture, paired_overhead
from kernelfarm.model_profiler.classify import TENSOR_DTYPES, classify
from kernelfarm.model_profiler.estimate import MATMUL_OPS, estimate
from kernelfarm.model_profiler.mapping import family_problem
from kernelfarm.model_profiler.models import build
from kernelfarm.worker.measuring.roofline import Ceilings

# Given ceilings (not measured): the test checks the classes against these very numbers.
CEILINGS = Ceilings(dram_bytes_per_s=20e9, fp32_flops=100e9, tensor_flops=100e9, how="given by the test")
BATCH, SEQ = 2, 32


def profile(model: str, tmp_path: Path) -> ProfileReport:
    mut = build(model, dtype="float32", batch=BATCH, seq=SEQ, device="cpu")
    cap = capture(mut, warmup=1, iterations=2, trace_path=tmp_path / "trace.json")
    return analyse(cap, CEILINGS, model=model, dtype="float32", batch=BATCH, seq=SEQ)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProfileReport, Path]:
    directory = tmp_path_factory.mktemp("gpt2")
    return profile("gpt2-tiny", directory), directory


def test_shares_sum_to_one_and_classes_agree_with_the_ceilings(gpt2: tuple[ProfileReport, Path]) -> None:
    report, _ = gpt2
    assert report.operators and math.isclose(sum(op.share for op in report.operators), 1.0, rel_tol=1e-9)
    assert all(op.self_ms > 0 and op.calls >= 1 for op in report.operators)
    for op in report.operators:
        _, per_call_bytes = estimate(op.name, op.input_shapes, 0.0, 4)
        expected = classify(op.flops / op.calls, op.bytes / op.calls, op.self_ms * 1e-3 / op.calls, CEILINGS,
                            tensor_cores=report.dtype in TENSOR_DTYPES and op.name in MATMUL_OPS)  # fmt: skip
        assert op.bound == expected.bound, op
        assert op.bytes == pytest.approx(per_call_bytes * op.calls)
    assert report.operators == sorted(report.operators, key=lambda op: op.self_ms, reverse=True)


def test_the_lm_head_maps_to_its_real_problem(gpt2: tuple[ProfileReport, Path]) -> None:
    report, _ = gpt2
    problems = [m.problem for op in report.operators if (m := family_problem(op, "float32")) and m.family == "matmul"]
    # the tied LM head: (batch*seq) x 768-wide hidden (64 in the tiny model) -> vocabulary 1024
    assert {"M": BATCH * SEQ, "N": 1024, "K": 64, "dtype": "float32", "b_layout": "nk"} in problems, problems
    # the MLP's first projection (Conv1D -> addmm, its weight stored hidden x out): 64 -> 256
    assert {"M": BATCH * SEQ, "N": 256, "K": 64, "dtype": "float32", "b_layout": "kn"} in problems, problems


def test_the_trace_is_a_chrome_trace(gpt2: tuple[ProfileReport, Path]) -> None:
    _, directory = gpt2
    trace = json.loads((directory / "trace.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert "aten::addmm" in names


def test_llama_attention_maps_to_flash_attention(tmp_path: Path) -> None:
    report = profile("llama-tiny", tmp_path)
    families = {m.family: m.problem for op in report.operators if (m := family_problem(op, "float32"))}
    assert families.get("attention") == {"B": BATCH, "H": 4, "S": SEQ, "D": 16, "causal": 1}, families
    assert families["matmul"]["M"] == BATCH * SEQ


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "kernelfarm", "profile-model", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)  # fmt: skip


def test_the_command_writes_json_trace_and_html(tmp_path: Path) -> None:
    ceilings = tmp_path / "ceilings.json"
    ceilings.write_text(json.dumps({"dram_bytes_per_s": 20e9, "fp32_flops": 100e9, "tensor_flops": 100e9}))
    args = ["gpt2-tiny", "--device", "cpu", "--dtype", "float32", "--batch", "2", "--seq", "16", "--iterations", "2"]
    done = _cli(*args, "--out", "out", "--ceilings", str(ceilings), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["model"] == "gpt2-tiny" and report["device"] == "cpu" and report["operators"]
    assert report["ceilings"]["dram_bytes_per_s"] == 20e9
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"profile.json", "trace.json", "report.html", "report.md"}
    assert "aten::addmm" in (tmp_path / "out" / "report.html").read_text()
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "`aten::addmm`" in markdown and "overhead" in markdown and "per inference unprofiled" in markdown
    # the timing figures: the overhead the report states pairs each session with the blocks around it
    timing = report["timing"]
    assert report["profiled_ms"] > 0 and report["latency_ms"] > 0
    iterations = len(timing["profiled_runs_ms"]) // timing["rounds"]
    paired = paired_overhead(timing["unprofiled_runs_ms"], timing["profiled_runs_ms"], iterations)
    assert paired is not None and report["profiling_overhead"] == pytest.approx(paired)
    rounds = timing["rounds"]  # timed sessions, each between two unprofiled blocks of --iterations inferences
    assert rounds >= 1 and len(timing["profiled_runs_ms"]) == 2 * rounds
    assert len(timing["unprofiled_runs_ms"]) == 2 * (rounds + 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-model"], "unknown model 'no-such-model'"),
        (["gpt2-tiny", "--dtype", "int8"], "unknown dtype 'int8'"),
        (["gpt2-tiny", "--swap"], "--swap needs --tune"),
        (["gpt2-tiny", "--seq", "100000", "--device", "cpu"], "exceeds the model's 256 positions"),
    ],
)
def test_bad_input_gets_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    done = (
        _cli(*args, "--device", "cpu", "--out", "out", cwd=tmp_path)
        if "--device" not in args
        else _cli(*args, cwd=tmp_path)
    )
    assert done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
