"""Profile → tune over the farm's REST API: a tiny model's hot GEMMs become real tuning jobs on a real
farm (API, coordinator, Celery workers, PostgreSQL, Redis); the fake backend stands in for the GPU."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the model profiler's CPU tests need the `profile` extra (torch)")
pytest.importorskip("transformers", reason="the built-in models need the `profile` extra (transformers)")

from kernelfarm import launcher
from kernelfarm.client import Client
from kernelfarm.core.gpu import model_slug
from kernelfarm.model_profiler.analysis import analyse
from kernelfarm.model_profiler.capture import capture
from kernelfarm.model_profiler.models import build
from kernelfarm.model_profiler.tuning import TuningPlan, estimated_end_to_end, tune_hot_operators
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
    plan = TuningPlan(budget_trials=6, top=2, parallelism=3, timeout_s=120)
    entries = tune_hot_operators(client, report.operators, dtype="float32", gpu_model=FAKE_MODEL, plan=plan)

    tuned = [e for e in entries if e["status"] == "tuned"]
    assert len(tuned) == 2, entries
    for entry in tuned:
        assert entry["kernel"] == "matmul_fp32" and entry["family"] == "matmul"
        best = client.best("matmul_fp32", FAKE_MODEL, entry["problem"])
        assert best["match"] == "exact" and entry["tuned_ms"] == best["time_ms"] and entry["config"] == best["config"]
        job = client.job(entry["job_id"])
        assert job["state"] == "complete" and job["progress"]["complete"] >= 1
        assert entry["speedup"] == pytest.approx(entry["baseline_ms"] / entry["tuned_ms"])
    assert estimated_end_to_end(report.latency_ms, entries) <= report.latency_ms

    # Asked again, the farm already knows both problems: nothing is submitted a second time.
    again = tune_hot_operators(client, report.operators, dtype="float32", gpu_model=FAKE_MODEL, plan=plan)
    assert [e["status"] for e in again if e["kernel"]] == ["known", "known"], again
