"""Profile → tune over the farm's REST API: a tiny model's hot GEMMs become real tuning jobs on a real
farm (API, coordinator, Celery workers, PostgreSQL, Redis); the fake backend stands in for the GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

pytest.importorskip("torch", reason="the model profiler's CPU tests need the `profile` extra (torch)")
pytest.importorskip("transformers", reason="the built-in models need the `profile` extra (transformers)")

from kernelfarm import launcher
from kernelfarm.client import ApiError, Client
from kernelfarm.core.gpu import model_slug
from kernelfarm.model_profiler.analysis import OperatorReport, analyse
from kernelfarm.model_profiler.capture import capture
from kernelfarm.model_profiler.fusion import fused_mlp_candidates
from kernelfarm.model_profiler.mapping import family_problem
from kernelfarm.model_profiler.models import build
from kernelfarm.model_profiler.tuning import FUSED_AWAY, TuningPlan, estimated_end_to_end, tune_hot_operators
from kernelfarm.worker.backends.fake import FAKE_GPU_NAME
from kernelfarm.worker.measuring.roofline import Ceilings
from tests.conftest import Farm, live_worker_count, make_token, wait_for

FAKE_MODEL = model_slug(FAKE_GPU_NAME)


def test_hot_gemms_become_jobs_and_their_best_comes_back(farm: Farm) -> None:
    farm.start("fake-gpu-worker", launcher.worker_argv("fake-gpu-worker", backend="fake"))
    wait_for(lambda: live_worker_count(farm.database_url, FAKE_MODEL) >= 1, 60, "the fake-GPU worker")
    client = Client(farm.api_url, make_token(farm.database_url, "submit", name="profiler"))

    mut = build("gpt2-tiny", dtype="float32", batch=2, seq=32, device="cpu")
    ceilings = Ceilings(dram_bytes_per_s=20e9, fp32_flops=100e9, tensor_flops=100e9, how="given by the test")
    report = analyse(capture(mut, warmup=1, iterations=2, trace_path=None), ceilings,
                     model="gpt2-tiny", dtype="float32", batch=2, seq=32)  # fmt: skip
    # The GEMMs, and the operators no farm kernel takes: which of a tiny model's operators is hottest on a
    # CPU depends on the machine's load (a layernorm outranked a GEMM on a busy one), and this test is
    # about the GEMMs' path (the mapping per family is checked in test_analysis.py).
    gemms = [op for op in report.operators if (m := family_problem(op, "float32")) is None or m.family == "matmul"]
    plan = TuningPlan(budget_trials=6, top=2, parallelism=3, timeout_s=120)
    # the MLPs' fused candidate too: no fused kernel takes float32, so it is listed and the c_fc's GEMM is
    # tuned alone, as without it
    fused = fused_mlp_candidates(mut)
    assert [c["problem"]["dtype"] for c in fused] == ["float32"]
    entries = tune_hot_operators(client, gemms, dtype="float32", gpu_model=FAKE_MODEL, plan=plan, fused=fused)
    assert all(e["status"] != FUSED_AWAY for e in entries), entries

    tuned = [e for e in entries if e["status"] == "tuned"]
    assert len(tuned) == 2, entries
    # a hot operator no farm kernel takes (fp32 attention) is listed, not counted in the top 2
    assert all(e["status"] == "no farm kernel" for e in entries if e not in tuned), entries
    for entry in tuned:
        assert entry["kernel"] == "matmul_fp32" and entry["family"] == "matmul"
        assert entry["kernel_problem"] == {k: entry["problem"][k] for k in "MNK"}
        best = client.best("matmul_fp32", FAKE_MODEL, entry["kernel_problem"])
        assert best["match"] == "exact" and entry["tuned_ms"] == best["time_ms"] and entry["config"] == best["config"]
        job = client.job(entry["job_id"])
        assert job["state"] == "complete" and job["progress"]["complete"] >= 1
        assert entry["speedup"] == pytest.approx(entry["baseline_ms"] / entry["tuned_ms"])
    assert estimated_end_to_end(report.latency_ms, entries) <= report.latency_ms

    # Asked again, the farm already knows both problems: nothing is submitted a second time.
    again = tune_hot_operators(client, gemms, dtype="float32", gpu_model=FAKE_MODEL, plan=plan)
    assert [e["status"] for e in again if e["kernel"]] == ["known", "known"], again


def test_a_fused_mlp_is_ranked_with_the_operators_and_tuned_as_one_kernel(farm: Farm) -> None:
    if live_worker_count(farm.database_url, FAKE_MODEL) < 1:  # the module's first test may have started it
        farm.start("fake-gpu-worker", launcher.worker_argv("fake-gpu-worker", backend="fake"))
        wait_for(lambda: live_worker_count(farm.database_url, FAKE_MODEL) >= 1, 60, "the fake-GPU worker")
    client = Client(farm.api_url, make_token(farm.database_url, "submit", name="profiler-fused"))
    mut = build("gpt2-tiny", dtype="bfloat16", batch=2, seq=32, device="cpu")
    ceilings = Ceilings(dram_bytes_per_s=20e9, fp32_flops=100e9, tensor_flops=100e9, how="given by the test")
    report = analyse(capture(mut, warmup=1, iterations=2, trace_path=None), ceilings,
                     model="gpt2-tiny", dtype="bfloat16", batch=2, seq=32)  # fmt: skip
    (candidate,) = fused_mlp_candidates(mut)
    gemms = [op for op in report.operators if (m := family_problem(op, "bfloat16")) and m.family == "matmul"]
    # The ranking is by time per inference; the times are given here (on a loaded CPU they decide nothing
    # stable): the real candidate hottest of all, and one ranked last (after every GEMM).
    hot = candidate | {"baseline_ms": 1e3}
    cold = candidate | {"problem": candidate["problem"] | {"M": 7}, "baseline_ms": 0.0, "modules": ["other"]}
    # --top as many as the GEMMs: the fused candidate and the GEMMs but its own fill it, and the cold
    # candidate is left out only because the fused one counts toward --top
    plan = TuningPlan(budget_trials=4, top=len(gemms), parallelism=2, timeout_s=120)
    entries = tune_hot_operators(client, gemms, dtype="bfloat16", gpu_model=FAKE_MODEL, plan=plan, fused=[cold, hot])

    with_kernel = [e for e in entries if e["kernel"]]
    assert len(with_kernel) == len(gemms), entries
    fused = entries[0]
    assert fused["operator"] == "c_fc + act" and fused["family"] == "matmul_bias_gelu", entries
    # the exact problem: tokens, N, K, dtype, the Conv1D's K x N layout and GPT-2's tanh GELU
    assert fused["kernel"] == "matmul_bias_gelu_triton"
    assert fused["kernel_problem"] == {"M": 64, "N": 256, "K": 64, "dtype": "bfloat16", "b_layout": "kn",
                                       "gelu": "tanh"}  # fmt: skip
    assert fused["modules"] == candidate["modules"] and fused["calls"] == 2 and fused["share"] is None
    assert fused["baseline_how"] == candidate["baseline_how"] and fused["baseline_ms"] == 1e3
    # The farm took the problem (a bad one is refused for itself) and refused the job for the only reason
    # left: a fake worker measures CUDA kernels only (api/jobs_service.py); on a triton worker it is tuned.
    assert fused["status"] == (
        f"refused by the farm: no worker of GPU model {FAKE_MODEL!r} can run kernel 'matmul_bias_gelu_triton': "
        "its workers run ['fake'], the kernel has implementations for ['triton']"
    ), fused
    # the c_fc's own GEMM is not tuned on its own and not counted; the other kernels are the other GEMMs'
    gemm = {k: v for k, v in candidate["problem"].items() if k != "gelu"}
    (away,) = [e for e in entries if e["problem"] == gemm]
    assert away["status"] == FUSED_AWAY and away["kernel"] is None
    assert all(e["family"] == "matmul" and e["problem"] != gemm for e in with_kernel[1:])
    assert all(e["problem"].get("M") != 7 for e in entries)  # ranked last: beyond --top
    # a bad gelu form would be refused for itself, with the reason (the farm checks the problem first)
    with pytest.raises(ApiError, match="gelu='sigmoid' is not one of") as refused:
        client.submit({"kernel": "matmul_bias_gelu_triton", "problem": fused["kernel_problem"] | {"gelu": "sigmoid"},
                       "gpu_model": FAKE_MODEL, "budget_trials": 1})  # fmt: skip
    assert refused.value.status == 422


def test_a_profile_is_stored_by_the_command_and_read_back_over_http(farm: Farm, tmp_path: Path) -> None:
    token = make_token(farm.database_url, "submit", name="profiler-store")
    env = {**os.environ, "KERNELFARM_API_URL": farm.api_url, "KERNELFARM_API_TOKEN": token,
           "KERNELFARM_STATE_DIR": str(tmp_path / "no-stack")}  # fmt: skip
    args = ["gpt2-tiny", "--device", "cpu", "--dtype", "float32", "--batch", "1", "--seq", "8", "--iterations", "1"]
    done = subprocess.run([sys.executable, "-P", "-m", "kernelfarm", "profile-model", *args, "--out", "out", "--store"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    profile_id = done.stderr.split("stored as profile ")[1].split()[0]

    http = httpx.Client(base_url=farm.api_url, headers={"Authorization": f"Bearer {token}"})
    listed = http.get("/v1/profiles", params={"gpu_model": "cpu"}).json()
    assert profile_id in [p["id"] for p in listed]
    stored = http.get(f"/v1/profiles/{profile_id}").json()
    local = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert stored["report"] == local and stored["owner"] == "profiler-store" and stored["gpu_model"] == "cpu"

    good = {"model": "m", "device_name": "cpu", "dtype": "float32", "batch": 1, "seq": 8, "latency_ms": 1.0,
            "report": {"operators": []}}  # fmt: skip
    bad_bodies = [
        {**good, "model": "a\x00b"},
        {**good, "report": {"operators": [{"name": "x\x00"}]}},
        {**good, "latency_ms": -1},
    ]
    for body in bad_bodies:
        answer = http.post("/v1/profiles", json=body)
        assert answer.status_code == 422, (body, answer.text)
    nan_body = json.dumps(good).replace('"operators": []', '"operators": [NaN]')
    answer = http.post("/v1/profiles", content=nan_body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert http.get(f"/v1/profiles/{uuid.uuid4()}").status_code == 404
    reader = httpx.Client(
        base_url=farm.api_url, headers={"Authorization": f"Bearer {make_token(farm.database_url, 'read')}"}
    )
    assert reader.post("/v1/profiles", json=good).status_code == 403
    assert len(http.get("/v1/profiles", params={"gpu_model": "cpu"}).json()) == len(listed)  # nothing bad was stored


def test_a_job_still_unfinished_at_the_timeout_is_cancelled_and_said(farm: Farm) -> None:
    # No worker of this GPU model: the farm accepts the job (one may be on its way) and it stays queued.
    client = Client(farm.api_url, make_token(farm.database_url, "submit", name="profiler-timeout"))
    gemm = OperatorReport(name="aten::mm", input_shapes=[[128, 64], [64, 96]], calls=1, self_ms=1.0, share=1.0,
                          flops=2 * 128 * 64 * 96, bytes=0.0, tflops_per_s=0.0, gb_per_s=0.0, bound="compute",
                          fraction_of_peak=0.0, kernels=[])  # fmt: skip
    said: list[str] = []
    plan = TuningPlan(budget_trials=2, top=1, parallelism=1, timeout_s=1.0)
    (entry,) = tune_hot_operators(client, [gemm], dtype="float32", gpu_model="nvidia-kernelfarm-test-no-worker",
                                  plan=plan, progress=said.append)  # fmt: skip
    assert entry["status"] == "timed out after 1 s: cancelled", entry
    assert client.job(entry["job_id"])["state"] == "cancelled"  # nothing left queued on the farm
    assert said[0].startswith("waiting up to 1 s for 1 tuning job(s) on the farm: " + entry["job_id"]), said
    assert said[-1] == f"tuning job {entry['job_id']} ({entry['kernel']}) timed out after 1 s: cancelled", said
