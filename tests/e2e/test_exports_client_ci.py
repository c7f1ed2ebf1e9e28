"""Exports, the Python client, the runtime lookup and the CI gate against a real farm: API over HTTP,
coordinator, Celery replay workers (RTX 3090 recordings, and an H100 worker replaying matmul_fp32 on
two problems), PostgreSQL and Redis."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest

from kernelfarm import launcher
from kernelfarm.client import ApiError
from kernelfarm.core.db import session_scope
from kernelfarm.core.exports import header, json_format, triton
from kernelfarm.core.exports.model import BestExport
from kernelfarm.core.states import JobState
from kernelfarm.core.store import jobs as job_store
from kernelfarm.kernels.recorded import RECORDED_DIR
from kernelfarm.sdk import BestConfigLookup, Client, WaitTimeout
from kernelfarm.sdk.results import Job
from kernelfarm.services import free_port
from tests.api.test_best_cache import KERNEL, add_job, new_model
from tests.api.test_best_energy import record
from tests.conftest import RTX3090, Farm, live_worker_count, make_token, wait_for

H100 = "nvidia-h100-80gb-hbm3"
CONV = "convolution_kernel"
CONV_PROBLEM = {"size_x": 4096, "size_y": 4096}
MATMUL_LANDSCAPES = sorted((RECORDED_DIR.parent / "matmul_fp32" / "landscapes").glob("*.json.gz"))


class Tuning(TypedDict):
    """Client.submit's budget, parallelism and seed keywords."""

    budget_trials: int
    parallelism: int
    seed: int


# The baseline's tuning job, as main's pipeline ran it; sequential, so the same seed replays the same search.
TUNING: Tuning = {"budget_trials": 24, "parallelism": 1, "seed": 11}


@pytest.fixture(scope="module")
def client(farm: Farm, admin_token: str) -> Iterator[Client]:
    with Client(farm.api_url, admin_token, timeout=30, retries=2, backoff=0.2) as c:
        yield c


@pytest.fixture(scope="module")
def h100_worker(farm: Farm, database_url: str) -> None:
    farm.start_worker("replay-h100", *MATMUL_LANDSCAPES)
    wait_for(lambda: farm.check_running() and live_worker_count(database_url, H100) >= 1, 60, "the H100 replay worker")


@pytest.fixture(scope="module")
def conv_job(client: Client) -> Job:
    job = client.submit(CONV, RTX3090, CONV_PROBLEM, **TUNING, profile="none")
    done = client.wait(job.id, timeout=180, poll=0.2)
    assert done.state == "complete" and done.best is not None, done.status_message
    return done


def cli(farm: Farm, token: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"KERNELFARM_API_URL": farm.api_url, "KERNELFARM_API_TOKEN": token, "COLUMNS": "250",
            "KERNELFARM_STATE_DIR": str(tmp_path / "no-stack"), "OMP_NUM_THREADS": "1"}  # fmt: skip
    return subprocess.run([sys.executable, "-P", "-m", "kernelfarm", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


# ---------------------------------------------------------------------------------------------- idempotency
def post(farm: Farm, token: str, body: dict[str, Any], key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} | ({"Idempotency-Key": key} if key else {})
    return httpx.post(f"{farm.api_url}/v1/jobs", json=body, headers=headers, timeout=30)


def job_count(client: Client) -> int:
    return int(client.http.get("/v1/jobs", params={"limit": 1}).json()["total"])


def test_idempotency_key_returns_the_same_job_never_a_second(farm: Farm, admin_token: str, client: Client,
                                                             database_url: str) -> None:  # fmt: skip
    body = {"kernel": "cn_pnpoly", "gpu_model": RTX3090, "budget_trials": 2, "profile": "none"}
    before = job_count(client)
    first = post(farm, admin_token, body, "idem-1")
    again = post(farm, admin_token, body, "idem-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert job_count(client) == before + 1

    other_body = post(farm, admin_token, {**body, "budget_trials": 3}, "idem-1")
    assert other_body.status_code == 409 and "different request" in other_body.json()["detail"]
    # The key belongs to its owner: another token's owner with the same key gets its own job.
    other_owner = post(farm, make_token(database_url, "submit", name="another-pipeline"), body, "idem-1")
    assert other_owner.status_code == 201 and other_owner.json()["id"] != first.json()["id"]
    assert post(farm, admin_token, body, "bad key with spaces").status_code == 422


def test_idempotency_key_under_concurrent_requests(farm: Farm, admin_token: str, client: Client) -> None:
    body = {"kernel": "cn_pnpoly", "gpu_model": RTX3090, "budget_trials": 2, "profile": "none"}
    before = job_count(client)
    start = threading.Barrier(8)
    responses: list[httpx.Response] = []

    def submit() -> None:
        start.wait()
        responses.append(post(farm, admin_token, body, "idem-race"))

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in responses) == [200] * 7 + [201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert job_count(client) == before + 1


# ---------------------------------------------------------------------------------------------- client
def test_client_wait_follow_timeout_and_cancel(client: Client) -> None:
    seen: list[int] = []
    job = client.submit(CONV, RTX3090, CONV_PROBLEM, budget_trials=12, parallelism=2, seed=5, profile="none")
    done = client.wait(
        job.id, timeout=120, poll=0.1, progress=lambda j: seen.append(j.progress.complete + j.progress.failed)
    )
    assert done.state == "complete" and seen == sorted(seen) and seen[-1] == 12
    # the farm's default, warm start (issue 17); a prior is other GPU models' trials, never the job's own
    assert done.warm_start and done.warm_start_prior is not None and RTX3090 not in done.warm_start_prior.sources
    assert [j.state for j in client.follow(job.id)][-1] == "complete"
    assert len(client.trials(job.id)) == 12

    slow = client.submit(CONV, RTX3090, CONV_PROBLEM, budget_trials=400, parallelism=1, seed=6, profile="none",
                         warm_start=False)  # fmt: skip
    assert not slow.warm_start and slow.warm_start_prior is None
    with pytest.raises(WaitTimeout) as waited:
        client.wait(slow.id, timeout=0.3, poll=0.1)
    assert not waited.value.job.finished
    assert client.cancel(slow.id).state == "cancelled"
    with pytest.raises(ApiError) as missing:
        client.best(CONV, "nvidia-b200")
    assert missing.value.status == 404
    assert CONV in {k.name for k in client.kernels()}


def test_client_retries_until_the_api_answers_and_submits_once(farm: Farm, admin_token: str) -> None:
    """The API is down when the client submits (a restart, a deploy): connection refused, retried
    with back-off, answered once a real API process is up on that address; one job, not several."""
    port = free_port()
    client = Client(f"http://127.0.0.1:{port}", admin_token, timeout=10, retries=7, backoff=0.25)
    late = threading.Timer(1.0, lambda: farm.start("api-late", launcher.api_argv(port)))
    late.start()
    try:
        job = client.submit("cn_pnpoly", RTX3090, budget_trials=2, profile="none", idempotency_key="late-api")
        assert client.job(job.id).id == job.id
        assert (
            client.submit("cn_pnpoly", RTX3090, budget_trials=2, profile="none", idempotency_key="late-api").id
            == job.id
        )
    finally:
        late.join()
        farm.stop(next(p for p in farm.processes if p.name == "api-late"))
    with pytest.raises(ApiError) as error:  # down for good: a clear error once the retries are spent
        Client(f"http://127.0.0.1:{port}", admin_token, retries=1, backoff=0.05).kernels()
    assert error.value.status == 0 and "cannot reach the farm" in str(error.value)


def test_client_timeout_is_a_clear_error(farm: Farm, admin_token: str) -> None:
    hasty = Client(farm.api_url, admin_token, timeout=0.0001, retries=1, backoff=0.01)
    with pytest.raises(ApiError) as error:
        hasty.kernels()
    assert error.value.status == 0 and "timed out" in str(error.value).lower()


def test_client_docs_example_runs(farm: Farm, admin_token: str, tmp_path: Path) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "CLIENT.md").read_text()
    example = re.search(r"## Worked example.*?```python\n(.*?)```", docs, re.S).group(1)  # type: ignore[union-attr]
    (tmp_path / "example.py").write_text(example)
    env = os.environ | {"KERNELFARM_API_URL": farm.api_url, "KERNELFARM_API_TOKEN": admin_token}
    ran = subprocess.run([sys.executable, "-P", "example.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "offline: exact" in ran.stdout and "best: exact" in ran.stdout


# ---------------------------------------------------------------------------------------------- lookup
def test_lookup_asks_the_farm_caches_the_answer_and_works_offline(
    client: Client, conv_job: Job, tmp_path: Path
) -> None:
    best = client.best(CONV, RTX3090, CONV_PROBLEM)
    cache = tmp_path / "best-configs.json"
    online = BestConfigLookup(CONV, client=client, gpu=RTX3090, cache_file=cache)
    first, second = online.config(CONV_PROBLEM), online.config(CONV_PROBLEM)
    assert (first.source, second.source) == ("farm", "cache")
    assert first.config == second.config == best.config and first.match == "exact"

    export_file = tmp_path / "conv.json"
    export_file.write_text(json_format.write(client.export(CONV)))
    dead = Client("http://127.0.0.1:9", "t", retries=0, timeout=2)  # nothing listens on the discard port
    unreachable = BestConfigLookup(
        CONV, client=dead, export=export_file, gpu="NVIDIA GeForce RTX 3090", cache_file=None
    )
    found = unreachable.config(CONV_PROBLEM)
    assert (found.source, found.config, found.time_ms) == ("export", best.config, best.time_ms)


# ---------------------------------------------------------------------------------------------- exports
def test_json_export_is_what_best_answers(client: Client, conv_job: Job) -> None:
    export = client.export(CONV, gpu=[RTX3090])
    assert isinstance(export, BestExport) and json_format.read(json_format.write(export)) == export
    [entry] = export.entries
    best = client.best(CONV, RTX3090, CONV_PROBLEM)
    assert (entry.config, entry.time_ms, entry.trial_id, entry.problem) == (
        best.config,
        best.time_ms,
        best.trial_id,
        CONV_PROBLEM,
    )
    # The farm-wide best may be another module's trial (the database is the session's): the export's
    # toolchain must be that trial's own provenance, whoever measured it.
    [trial] = [t for t in client.trials(entry.job_id) if t.id == entry.trial_id]
    assert entry.provenance == trial.provenance and entry.toolchain.backend == trial.provenance.get("backend")
    assert entry.gpu_name == "NVIDIA GeForce RTX 3090"
    if entry.job_id == str(conv_job.id):
        assert entry.toolchain.backend == "replay"
    assert export.source_hash and export.parameters[0] == "block_size_x"
    with pytest.raises(ApiError) as error:
        client.export(CONV, gpu=[H100 + "-nothing"])
    assert error.value.status == 404
    with pytest.raises(ApiError) as error:
        client.export(CONV, problem={"M": 4})
    assert error.value.status == 422 and "no problem dimension" in str(error.value.detail)


def test_header_and_triton_exports_of_two_problems(client: Client, h100_worker: None, tmp_path: Path) -> None:
    for problem in ({"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096}):
        job = client.submit("matmul_fp32", H100, problem, budget_trials=16, parallelism=4, seed=2, profile="none")
        assert client.wait(job.id, timeout=180, poll=0.2).state == "complete"
    export = client.export("matmul_fp32", gpu=[H100])
    by_problem = {e.problem_key: e.config for e in export.entries}
    assert set(by_problem) == {"M=2048,N=2048,K=2048", "M=4096,N=4096,K=4096"}

    (tmp_path / "matmul_fp32.h").write_text(client.export("matmul_fp32", "header", gpu=[H100]))
    names = ["M2048_N2048_K2048_BM", "M4096_N4096_K4096_BM", "BM", "GROUP_M"]
    (tmp_path / "main.c").write_text('#include <stdio.h>\n#include "matmul_fp32.h"\nint main(void) { printf("'
                                     + " ".join(["%d"] * len(names)) + '\\n", '
                                     + ", ".join(f"MATMUL_FP32_{n}" for n in names) + "); return 0; }\n")  # fmt: skip
    for compiler, source in (("gcc", "main.c"), ("g++", "main.cpp")):
        if source == "main.cpp":
            (tmp_path / source).write_text((tmp_path / "main.c").read_text())
        binary = tmp_path / f"main-{compiler}"
        subprocess.run([compiler, f"-D{header.target_macro(H100)}", "-Wall", "-Werror", "-o", str(binary),
                        str(tmp_path / source)], check=True)  # fmt: skip
        values = [
            int(v) for v in subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout.split()
        ]
        big = by_problem["M=4096,N=4096,K=4096"]
        assert values == [by_problem["M=2048,N=2048,K=2048"]["BM"], big["BM"], big["BM"], big["GROUP_M"]]

    files = client.export("matmul_fp32", "triton", gpu=[H100])
    [(name, text)] = files.items()
    assert name == "matmul_fp32,device_name=NVIDIA_H100_80GB_HBM3.json"
    assert triton.read(text) == {key: triton.triton_config(config) for key, config in by_problem.items()}


def finished(trials: list[Any]) -> list[Any]:
    return [t for t in trials if t.state in ("complete", "failed")]


def test_kernel_tuner_loads_the_cache_export(client: Client, conv_job: Job, tmp_path: Path) -> None:
    kernel_tuner = pytest.importorskip("kernel_tuner", reason="the bench extra (Kernel Tuner 1.5.0) is not installed")
    from constraint import FunctionConstraint

    cache = tmp_path / "conv.kt.json"
    cache.write_text(client.export_trials(conv_job.id, "kernel_tuner"))
    ours = {t.config_key: t for t in client.trials(conv_job.id)}
    data = json.loads(cache.read_text())
    keys = data["tune_params_keys"]
    recorded = {tuple(e[k] for k in keys) for e in data["cache"].values()}

    def in_file(*values: Any) -> bool:
        return values in recorded

    results, _ = kernel_tuner.tune_kernel(
        CONV, "", tuple(data["problem_size"]), [], data["tune_params"], restrictions=[FunctionConstraint(in_file)],
        cache=str(cache), simulation_mode=True, strategy="brute_force", quiet=True,
    )  # fmt: skip
    assert len(results) == len(finished(list(ours.values()))) > 0
    for result in results:
        trial = ours[",".join(str(result[k]) for k in keys)]
        if trial.state == "complete":
            assert result["time"] == trial.time_ms
        else:
            assert "__error__" in result
    fastest = min((r for r in results if "__error__" not in r), key=lambda r: r["time"])
    assert fastest["time"] == conv_job.best.time_ms  # type: ignore[union-attr]


def test_t4_export_validates_against_the_schema(client: Client, conv_job: Job) -> None:
    pytest.importorskip("kernel_tuner", reason="the T4 schema file ships with Kernel Tuner 1.5.0 (bench extra)")
    from kernel_tuner.file_utils import output_file_schema

    document = json.loads(client.export_trials(conv_job.id, "t4"))
    version, schema = output_file_schema("results")
    assert document["schema_version"] == version
    # Imported here: the GPU node's test command collects this module without the dev tools installed.
    jsonschema = pytest.importorskip("jsonschema", reason="the T4 schema check needs jsonschema (dev extra)")
    jsonschema.validate(document, schema)
    ours = {t.config_key: t for t in client.trials(conv_job.id)}
    assert len(document["results"]) == len(finished(list(ours.values())))
    for result in document["results"]:
        trial = ours[",".join(str(v) for v in result["configuration"].values())]
        assert result["invalidity"] == ("correct" if trial.state == "complete" else result["invalidity"])
        if trial.state == "complete":
            assert result["measurements"] == [{"name": "time", "value": trial.time_ms, "unit": "ms"}]


def test_csv_export_round_trips(client: Client, conv_job: Job) -> None:
    rows = list(csv.DictReader(io.StringIO(client.export_trials(conv_job.id, "csv"))))
    trials = client.trials(conv_job.id)
    assert len(rows) == len(trials) == TUNING["budget_trials"]
    for row, trial in zip(rows, trials, strict=True):
        assert (int(row["seq"]), row["config_key"], row["state"]) == (trial.seq, trial.config_key, trial.state)
        assert (float(row["time_ms"]) if row["time_ms"] else None) == trial.time_ms
        assert int(row["block_size_x"]) == trial.config["block_size_x"]


def test_export_from_the_cli(farm: Farm, admin_token: str, conv_job: Job, tmp_path: Path) -> None:
    made = cli(farm, admin_token, tmp_path, "export", CONV, "--format", "header", "--gpu", "NVIDIA GeForce RTX 3090")
    assert made.returncode == 0, made.stderr
    assert header.target_macro(RTX3090) in made.stdout and "CONVOLUTION_KERNEL_BLOCK_SIZE_X" in made.stdout
    made = cli(farm, admin_token, tmp_path, "export", CONV, "--format", "triton", "--out", "triton")
    assert (
        made.returncode == 0
        and (tmp_path / "triton" / "convolution_kernel,device_name=NVIDIA_GeForce_RTX_3090.json").exists()
    )
    made = cli(farm, admin_token, tmp_path, "export", CONV, "--format", "csv", "--job", str(conv_job.id), "-o", "t.csv")
    assert made.returncode == 0 and (tmp_path / "t.csv").read_text().startswith("seq,config_key")
    refused = cli(farm, admin_token, tmp_path, "export", CONV, "--format", "kernel_tuner")
    assert refused.returncode == 2 and "give --job" in refused.stderr
    unknown = cli(farm, admin_token, tmp_path, "export", "no_such_kernel")
    assert unknown.returncode == 1 and "unknown kernel" in unknown.stderr and "Traceback" not in unknown.stderr


# ---------------------------------------------------------------------------------------------- CI gate
def write_baseline(client: Client, conv_job: Job, path: Path, **changes: Any) -> None:
    """The pinned baseline as main's pipeline exported it: the RTX 3090 entry is its tuning job's
    best (same seed and budget as the candidate's), with ``changes`` applied."""
    export = client.export(CONV, gpu=[RTX3090])
    assert conv_job.best is not None
    entry = export.entries[0].model_copy(update={"config": conv_job.best.config, "config_key": conv_job.best.config_key,
                                                 "time_ms": conv_job.best.time_ms, **changes})  # fmt: skip
    path.write_text(json_format.write(export.model_copy(update={"entries": [entry]})))


def gate_config(path: Path, space: dict[str, Any] | None = None, budget: int = TUNING["budget_trials"]) -> Path:
    config = {"baseline": "baseline.json", "threshold": 0.05, "timeout": 240,
              "entry": [{"kernel": CONV, "gpu": RTX3090, "problem": CONV_PROBLEM, "mode": "tune",
                         "budget_trials": budget,
                         "parallelism": 1, "seed": TUNING["seed"], **({"space": space} if space else {})}]}  # fmt: skip
    path.write_text(json.dumps(config))
    return path


def junit_counts(path: Path) -> tuple[int, int, int]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return int(suite.get("tests", 0)), int(suite.get("failures", 0)), int(suite.get("errors", 0))


def job_lines(path: Path) -> list[str]:
    """The ``baseline=<job id>`` and ``candidate=<job id>`` lines of the JUnit report's test case."""
    text = ET.parse(path).getroot().findtext(".//system-out") or ""
    return [line for line in text.splitlines() if line.startswith(("baseline=", "candidate="))]


def test_ci_gate_passes_fails_on_a_regression_and_reuses_its_jobs(
    farm: Farm, admin_token: str, client: Client, conv_job: Job, tmp_path: Path
) -> None:
    # The pinned time is 10x better than any replay measures: the gate compares with the baseline
    # config re-measured in this run, so an old or foreign number cannot fail it.
    write_baseline(client, conv_job, tmp_path / "baseline.json", time_ms=conv_job.best.time_ms / 10)  # type: ignore[union-attr]
    config = gate_config(tmp_path / "gate.json")
    args = [
        "ci",
        "gate",
        "gate.json",
        "--run-id",
        "run-1",
        "--summary",
        "summary.md",
        "--junit",
        "junit.xml",
        "--poll",
        "0.2",
    ]
    passed = cli(farm, admin_token, tmp_path, *args)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert junit_counts(tmp_path / "junit.xml") == (1, 0, 0)
    assert "passed" in (tmp_path / "summary.md").read_text()

    first_jobs = job_lines(tmp_path / "junit.xml")
    before = job_count(client)  # a retried step (same run id) gets the same jobs back
    again = cli(farm, admin_token, tmp_path, *args)
    assert again.returncode == 0 and job_count(client) == before
    assert job_lines(tmp_path / "junit.xml") == first_jobs and len(first_jobs) == 2

    # The same run with a baseline pinning another config: a new re-measurement (the same key for
    # another body was the farm's 409, an error row); the candidate's tuning job is the same one.
    slowest = max((t for t in client.trials(conv_job.id) if t.state == "complete"), key=lambda t: t.time_ms or 0)
    write_baseline(client, conv_job, tmp_path / "baseline.json", config=slowest.config, config_key=slowest.config_key)
    repinned = cli(farm, admin_token, tmp_path, *args)
    assert repinned.returncode == 0, repinned.stdout + repinned.stderr
    jobs = job_lines(tmp_path / "junit.xml")
    assert jobs[0] != first_jobs[0] and jobs[1] == first_jobs[1], (jobs, first_jobs)
    write_baseline(client, conv_job, tmp_path / "baseline.json", time_ms=conv_job.best.time_ms / 10)  # type: ignore[union-attr]

    # Simulated regression: the candidate's tuning space lost the fast configs (a change that only
    # compiles the slowest config the baseline's search measured).
    gate_config(config, space={"parameters": {k: [v] for k, v in slowest.config.items()}}, budget=1)
    failed = cli(farm, admin_token, tmp_path, "ci", "gate", "gate.json", "--run-id", "run-2",
                 "--summary", "summary.md", "--junit", "junit.xml", "--poll", "0.2")  # fmt: skip
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert junit_counts(tmp_path / "junit.xml") == (1, 1, 0)
    summary = (tmp_path / "summary.md").read_text()
    assert "regression" in summary and slowest.config_key in summary


def test_ci_gate_cancels_its_jobs_at_the_timeout_and_a_rerun_measures_again(
    farm: Farm, admin_token: str, client: Client, conv_job: Job, tmp_path: Path
) -> None:
    """A re-run of a workflow keeps its run id: the jobs its first attempt left cancelled (or failed)
    are submitted again rather than handed back, so the re-run can pass; a retried step still gets
    the jobs that ran."""
    write_baseline(client, conv_job, tmp_path / "baseline.json")
    config = gate_config(tmp_path / "gate.json")
    config.write_text(json.dumps({**json.loads(config.read_text()), "timeout": 0.05}))  # nothing finishes in it
    args = ["ci", "gate", "gate.json", "--run-id", "rerun-1", "--junit", "junit.xml", "--poll", "0.2"]
    timed_out = cli(farm, admin_token, tmp_path, *args)
    assert timed_out.returncode == 2, timed_out.stdout + timed_out.stderr
    assert "the gate cancelled it" in timed_out.stdout, timed_out.stdout
    first = [line.split("=", 1)[1] for line in job_lines(tmp_path / "junit.xml")]  # baseline, candidate
    # The one-trial re-measurement may finish before the gate's first look; the 24-trial tuning cannot.
    assert len(first) == 2 and client.job(first[1]).state == "cancelled"
    baseline_ran = client.job(first[0]).state == "complete"
    assert baseline_ran or client.job(first[0]).state == "cancelled"

    config.write_text(json.dumps({**json.loads(config.read_text()), "timeout": 240}))  # the entry is unchanged
    rerun = cli(farm, admin_token, tmp_path, *args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    second = [line.split("=", 1)[1] for line in job_lines(tmp_path / "junit.xml")]
    assert len(second) == 2 and second[1] != first[1]  # a new job in place of the cancelled one
    assert (second[0] == first[0]) == baseline_ran  # and the baseline's that ran is reused
    before = job_count(client)
    retried = cli(farm, admin_token, tmp_path, *args)
    assert retried.returncode == 0 and job_count(client) == before  # the jobs that ran are reused
    assert [line.split("=", 1)[1] for line in job_lines(tmp_path / "junit.xml")] == second


def test_ci_gate_errors_are_reported_not_tracebacks(farm: Farm, admin_token: str, tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("baseline = 'missing.json'\n[[entry]]\nkernel = 'x'\ngpu = 'y'\n")
    bad = cli(farm, admin_token, tmp_path, "ci", "gate", "bad.toml")
    assert bad.returncode == 2 and "needs budget_trials" in bad.stderr and "Traceback" not in bad.stdout + bad.stderr
    (tmp_path / "nobase.toml").write_text(
        "baseline = 'missing.json'\n[[entry]]\nkernel = 'x'\ngpu = 'y'\nbudget_trials = 2\n"
    )
    missing = cli(farm, admin_token, tmp_path, "ci", "gate", "nobase.toml")
    assert missing.returncode == 2 and "cannot read the export" in missing.stderr


def test_ci_recheck_flags_a_changed_best_when_the_toolchain_changed(
    farm: Farm, admin_token: str, client: Client, conv_job: Job, tmp_path: Path
) -> None:
    # Pinned: a slow config measured under another driver. Now (replay records no driver) the
    # toolchain differs, so the entry is re-tuned, and the new best beats the pinned config.
    slowest = max((t for t in client.trials(conv_job.id) if t.state == "complete"), key=lambda t: t.time_ms or 0)
    export = client.export(CONV, gpu=[RTX3090])
    pinned = export.entries[0].model_copy(update={
        "config": slowest.config, "config_key": slowest.config_key, "time_ms": slowest.time_ms,
        "toolchain": export.entries[0].toolchain.model_copy(update={"driver_version": "535.54"})})  # fmt: skip
    (tmp_path / "baseline.json").write_text(json_format.write(export.model_copy(update={"entries": [pinned]})))
    gate_config(tmp_path / "recheck.json")
    flagged = cli(farm, admin_token, tmp_path, "ci", "recheck", "recheck.json", "--run-id", "re-1", "--junit", "j.xml",
                  "--summary", "s.md", "--poll", "0.2")  # fmt: skip
    assert flagged.returncode == 1, flagged.stdout + flagged.stderr
    summary = (tmp_path / "s.md").read_text()
    assert "best changed" in summary and "driver_version 535.54 → None" in summary
    assert junit_counts(tmp_path / "j.xml") == (1, 1, 0)

    # The same toolchain as recorded: re-measured only, nothing flagged.
    write_baseline(client, conv_job, tmp_path / "baseline.json")
    unchanged = cli(farm, admin_token, tmp_path, "ci", "recheck", "recheck.json", "--run-id", "re-2", "--poll", "0.2")
    assert unchanged.returncode == 0 and "toolchain unchanged" in unchanged.stdout


# ---------------------------------------------------------------------------------------------- Triton drop-in
def test_dropin_submits_one_tuning_job_for_a_shape_nobody_measured(client: Client, h100_worker: None) -> None:
    """The farm has nothing for softmax on the H100: the drop-in falls back to Triton's tuning (a
    stand-in here: no GPU) and submits a tuning job for the shape, once, also from a second process."""
    from kernelfarm.sdk.triton_autotune import autotune
    from tests.sdk.test_triton_dropin import AutotuneStandIn

    class SoftmaxStandIn:
        arg_names = ("x_ptr", "y_ptr", "M", "N", "dtype")

        def __getitem__(self, grid: Any) -> Any:
            raise AssertionError("no config was known: Triton's autotuner must run the kernel")

    shape = {"M": 8192, "N": 4096, "dtype": "bfloat16"}
    kernels = []
    for _ in range(2):  # two processes of an inference server, each with its own drop-in
        lookup = BestConfigLookup("softmax", client=client, gpu="NVIDIA H100 80GB HBM3", cache_file=None)
        tuner = AutotuneStandIn()
        decorate = autotune(configs=["c"], key=["M", "N", "dtype"], kernel="softmax", lookup=lookup, submit_to=client,
                            submit_options={"budget_trials": 4, "profile": "none"}, autotune_factory=tuner)  # fmt: skip
        kernel = decorate(SoftmaxStandIn())
        kernel["grid"]("x", "y", 8192, 4096, "bfloat16")
        assert tuner.calls and kernel.choices[(8192, 4096, "bfloat16")].source == "autotune"
        kernels.append(kernel)
    jobs = client.http.get("/v1/jobs", params={"kernel": "softmax", "gpu_model": H100}).json()["items"]
    assert len(jobs) == 1 and jobs[0]["problem"] == shape and jobs[0]["budget_trials"] == 4
    client.cancel(jobs[0]["id"])


# ---------------------------------------------------------------------------------------------- energy, options
def test_objective_and_strategy_options_from_the_client_and_the_cli(
    farm: Farm, admin_token: str, client: Client, database_url: str, tmp_path: Path
) -> None:
    """Issue 17's energy objective and the strategies' options were reachable by raw HTTP alone: neither
    the Python client nor the CLI could submit them, or ask /v1/best for energy or the Pareto front."""
    job = client.submit(CONV, RTX3090, CONV_PROBLEM, budget_trials=4, parallelism=1, profile="none",
                        objective="energy", strategy_options={"n_init": 3, "xi": 0.1})  # fmt: skip
    assert job.objective == "energy" and job.strategy_options == {"n_init": 3, "xi": 0.1}
    client.cancel(job.id)
    with pytest.raises(ApiError) as refused:
        client.submit(CONV, RTX3090, CONV_PROBLEM, budget_trials=4, strategy_options={"n_init": "3"})
    assert refused.value.status == 422 and "'n_init' must be an integer, not a string" in refused.value.message

    submitted = cli(farm, admin_token, tmp_path, "tune", CONV, "--gpu", RTX3090, "--budget", "4", "--no-follow",
                    "--objective", "time+energy", "--option", "n_init=2", "-o", "acquisition=lcb")  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job = client.job(re.search(r"job (\S+) submitted", submitted.stdout).group(1))  # type: ignore[union-attr]
    assert job.objective == "time+energy" and job.strategy_options == {"n_init": 2, "acquisition": "lcb"}
    client.cancel(job.id)
    bad = cli(farm, admin_token, tmp_path, "tune", CONV, "--gpu", RTX3090, "--budget", "4", "-o", "n_init=two")
    assert bad.returncode == 1 and "'n_init' must be an integer, not a string" in bad.stderr
    assert "Traceback" not in bad.stdout + bad.stderr

    # /v1/best by energy and the front, from trials with energy readings (replay workers have no meter)
    gpu = new_model()
    job_id = add_job(database_url, gpu)
    fast, frugal = (
        record(database_url, job_id, 1.0, 9.0, key="fast"),
        record(database_url, job_id, 3.0, 2.0, key="frugal"),
    )
    record(database_url, job_id, 4.0, 5.0, key="dominated")
    with session_scope(database_url) as session:  # finished: no coordinator steps it (no worker serves its model)
        job_store.set_job_status(session, job_store.get_job(session, job_id), state=JobState.COMPLETE, message="test")
    front = client.best(KERNEL, gpu, objective="pareto")
    assert [p.trial_id for p in front.pareto or []] == [fast, frugal] and front.trial_id == fast
    frugal_best = client.best(KERNEL, gpu, objective="energy")
    assert frugal_best.trial_id == frugal and frugal_best.energy_mj == 2.0
    shown = cli(farm, admin_token, tmp_path, "best", KERNEL, "--gpu", gpu, "--objective", "pareto")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "time/energy front" in shown.stdout and "1.0000 ms, 9 mJ" in shown.stdout
    assert shown.stdout.index("fast") < shown.stdout.index("frugal") and "dominated" not in shown.stdout
