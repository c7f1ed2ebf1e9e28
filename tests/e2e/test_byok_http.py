"""Bring your own kernel, over HTTP on the farm's real parts (API, coordinator, Celery replay
workers, Redis, PostgreSQL): a user's .cu file and manifest are uploaded with a recorded Kernel Tuner
cache file, a job tunes it on a replay worker that has never seen it (it fetches the version from
the farm), and the best config comes back. Every bad manifest is a 4xx naming the field, and nothing
is stored. The CLI's ``kernel add/list/show/versions`` run against the same farm.

The recording is made here (a Kernel Tuner cache file with timings from a formula): this tests the
farm's path, not a GPU; the replay worker reports it as a replay.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.models import KernelVersion
from kernelfarm.kernels.manifest.bundle import search_space, validated_model
from tests.configs import integer
from tests.conftest import CONVOLUTION, RTX3090, Farm, live_worker_count, make_token, wait_for
from tests.kernels.manifests import USER_FILES, USER_KERNEL, USER_MANIFEST, user_manifest, user_uploads
from tests.kernels.test_manifest import BAD_MANIFESTS

DEVICE = "NVIDIA GeForce RTX 3090"
RECORDING = "axpb_rtx3090.json"


def recorded_times(manifest: dict[str, Any]) -> dict[str, float]:
    """A made-up landscape over every valid config of the default problem: config key -> ms."""
    model = validated_model(manifest)
    space = search_space(model)
    problem = {name: p.default for name, p in model.problem.items()}
    times = {}
    for config in space.valid_configs(problem):
        threads = integer(config, "block_size_x") * integer(config, "block_size_y")
        work = integer(config, "tile_size_x") * integer(config, "tile_size_y")
        times[space.key(config)] = round(0.05 + abs(threads - 256) / 2000 + abs(work - 4) / 50, 5)
    return times


def recording_bytes(manifest: dict[str, Any]) -> bytes:
    cache = {}
    for key, ms in recorded_times(manifest).items():
        values = [int(v) for v in key.split(",")]
        cache[key] = {**dict(zip(manifest["tune_params"], values, strict=True)), "time": ms, "times": [ms] * 5}
    return json.dumps({
        "device_name": DEVICE, "kernel_name": "axpb", "problem_size": [4096, 2048],
        "tune_params_keys": list(manifest["tune_params"]), "tune_params": manifest["tune_params"],
        "objective": "time", "cache": cache,
    }).encode()  # fmt: skip


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where every component (and this process) materializes uploaded kernels: a temp folder."""
    path = tmp_path_factory.mktemp("kernel-cache")
    saved = os.environ.get("KERNELFARM_KERNEL_CACHE")
    os.environ["KERNELFARM_KERNEL_CACHE"] = str(path)
    from kernelfarm.core.settings import get_settings

    get_settings.cache_clear()
    yield path
    if saved is None:
        os.environ.pop("KERNELFARM_KERNEL_CACHE", None)
    else:
        os.environ["KERNELFARM_KERNEL_CACHE"] = saved
    get_settings.cache_clear()


@pytest.fixture(scope="module")
def byok_farm(database_url: str, redis_url: str, kernel_cache: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:  # fmt: skip
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("byok-farm"))
    try:
        farm.start_api()
        farm.start_coordinator()
        farm.start_worker("byok-replay")  # the shipped RTX 3090 recordings; it knows nothing of user-axpb
        wait_for(lambda: farm.check_running() and live_worker_count(database_url, RTX3090) >= 1, 60, "a live worker")
        yield farm
    finally:
        farm.stop_all()
        from tests.conftest import _reset_between_farms

        _reset_between_farms(database_url, redis_url)


def client(farm: Farm, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=farm.api_url, headers=headers, timeout=60)


def upload(http: httpx.Client, manifest: dict[str, Any], uploads: dict[str, bytes]) -> httpx.Response:
    parts = [("manifest", ("axpb.json", json.dumps(manifest).encode())),
             *(("files", (name, data)) for name, data in uploads.items())]  # fmt: skip
    return http.post("/v1/kernels", files=parts)


def stored_versions(database_url: str) -> int:
    with session_scope(database_url) as session:
        return int(session.execute(select(func.count()).select_from(KernelVersion)).scalar_one())


def test_upload_needs_the_kernels_scope(byok_farm: Farm, database_url: str) -> None:
    before = stored_versions(database_url)
    assert upload(client(byok_farm, None), user_manifest(), user_uploads()).status_code == 401
    reader = make_token(database_url, "read", "submit", name="byok-reader")
    refused = upload(client(byok_farm, reader), user_manifest(), user_uploads())
    assert refused.status_code == 403 and "kernels" in refused.json()["detail"]
    assert stored_versions(database_url) == before


@pytest.mark.parametrize(("case", "mutate", "field", "reason"), BAD_MANIFESTS, ids=[c[0] for c in BAD_MANIFESTS])
def test_a_bad_manifest_is_a_4xx_naming_the_field_and_nothing_is_stored(
    byok_farm: Farm, database_url: str, case: str, mutate: Any, field: str, reason: str
) -> None:
    uploader = make_token(database_url, "kernels", name="byok-uploader")
    manifest, uploads = copy.deepcopy(user_manifest()), user_uploads()
    mutate(manifest, uploads)
    before = stored_versions(database_url)
    response = upload(client(byok_farm, uploader), manifest, uploads)
    assert 400 <= response.status_code < 500, response.text
    detail = response.json()["detail"]
    assert detail.startswith(field) and reason.lower() in detail.lower(), detail
    assert stored_versions(database_url) == before


@pytest.mark.parametrize("filename", ["", None])
def test_a_manifest_sent_as_a_form_field_is_a_4xx_saying_so(
    byok_farm: Farm, database_url: str, filename: str | None
) -> None:
    """A multipart part without a file name is a form field to Starlette, not a file (curl's
    ``-F manifest=<axpb.json`` sends one): FastAPI answered "Expected UploadFile, received: <class 'str'>"
    with the manifest echoed back."""
    uploader = make_token(database_url, "kernels", name="byok-uploader")
    text = json.dumps(user_manifest()).encode()
    manifest_part = ("manifest", (filename, text)) if filename is not None else ("manifest", (None, text))
    parts = [manifest_part, *(("files", (name, data)) for name, data in user_uploads().items())]
    before = stored_versions(database_url)
    response = client(byok_farm, uploader).post("/v1/kernels", files=parts)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("manifest: ") and "file name" in detail and "UploadFile" not in detail, detail
    nameless_file = [("manifest", ("axpb.json", text)), ("files", (filename, b"__global__ void k() {}"))]
    response = client(byok_farm, uploader).post("/v1/kernels", files=nameless_file)
    assert response.status_code == 422 and response.json()["detail"].startswith("files: every file needs a file name")
    assert stored_versions(database_url) == before


def test_uploaded_python_needs_admin(byok_farm: Farm, database_url: str, admin_token: str) -> None:
    manifest, uploads = user_manifest(), user_uploads()
    manifest["reference"] = {"python": "reference.py"}
    manifest["name"] = "user-axpb-python"
    uploads.pop("axpb_naive.cu")
    uploads["reference.py"] = (
        b"def reference(buffers, problem):\n    return {'out': 1.5 * buffers['x'] + buffers['bias']}\n"
    )
    uploader = make_token(database_url, "kernels", name="byok-python-uploader")
    refused = upload(client(byok_farm, uploader), manifest, uploads)
    assert refused.status_code == 403 and "admin" in refused.json()["detail"]
    stored = upload(client(byok_farm, admin_token), manifest, uploads)
    assert stored.status_code == 201, stored.text
    shown = client(byok_farm, admin_token).get("/v1/kernels/user-axpb-python").json()
    assert shown["requires"] == ["uploaded-python"]  # only workers started with the opt-in run it


def test_uploaded_python_runs_only_on_workers_that_opted_in(byok_farm: Farm, admin_token: str) -> None:
    http = client(byok_farm, admin_token)
    manifest = user_manifest() | {"name": "python-axpb", "reference": {"python": "reference.py"},
                                  "recording": {"file": RECORDING}}  # fmt: skip
    uploads = {name: data for name, data in user_uploads().items() if name != "axpb_naive.cu"}
    uploads |= {
        "reference.py": b"def reference(buffers, problem):\n    return {}\n",
        RECORDING: recording_bytes(manifest),
    }
    assert upload(http, manifest, uploads).status_code == 201
    body = {"kernel": "python-axpb", "gpu_model": RTX3090, "budget_trials": 6, "parallelism": 2, "seed": 2}
    job_id = http.post("/v1/jobs", json=body).json()["id"]
    waiting = wait_for(
        lambda: "uploaded-python" in (j := http.get(f"/v1/jobs/{job_id}").json())["status_message"] and j,
        60,
        "the job to say it waits for a worker that opted in",
    )
    assert waiting["status_message"].startswith("waiting: no live worker") and waiting["progress"]["total"] == 0
    byok_farm.start("opted-in", launcher.worker_argv("opted-in", landscapes=(CONVOLUTION,), allow_uploaded_python=True))
    done = wait_for(
        lambda: (j := http.get(f"/v1/jobs/{job_id}").json())["state"] in ("complete", "failed") and j, 120, "the job"
    )
    assert done["state"] == "complete", done["status_message"]
    trials = http.get(f"/v1/jobs/{job_id}/trials").json()["items"]
    assert {t["worker_name"].split("@")[0] for t in trials} == {"opted-in"}


def test_upload_job_replay_best(byok_farm: Farm, database_url: str, admin_token: str) -> None:
    http = client(byok_farm, admin_token)
    manifest = user_manifest() | {"recording": {"file": RECORDING}}
    uploads = user_uploads() | {RECORDING: recording_bytes(manifest)}
    created = upload(http, manifest, uploads)
    assert created.status_code == 201, created.text
    version = created.json()
    assert version["name"] == "user-axpb" and version["recording"] == RECORDING
    again = upload(http, manifest, uploads)  # the same content: the same version, nothing new stored
    assert again.status_code == 200 and again.json()["version"] == version["version"]

    listed = {k["name"]: k for k in http.get("/v1/kernels").json()}
    assert listed["user-axpb"]["origin"] == "upload"
    assert listed["user-axpb"]["recorded_gpu_models"] == [RTX3090]

    body = {"kernel": "user-axpb", "kernel_version": version["version"], "gpu_model": RTX3090,
            "budget_trials": 30, "parallelism": 4, "seed": 5}  # fmt: skip
    job = http.post("/v1/jobs", json=body)
    assert job.status_code == 201, job.text
    job_id = job.json()["id"]
    done = wait_for(
        lambda: (j := http.get(f"/v1/jobs/{job_id}").json())["state"] in ("complete", "failed") and j, 120, "the job"
    )
    assert done["state"] == "complete", done["status_message"]
    assert done["kernel_version"] == version["version"]
    trials = http.get(f"/v1/jobs/{job_id}/trials", params={"limit": 100}).json()["items"]
    assert len(trials) == 30 and all(t["state"] == "complete" for t in trials)
    recorded = recorded_times(manifest)
    for trial in trials:
        assert trial["provenance"]["backend"] == "replay"
        assert trial["provenance"]["recording"] == RECORDING
        assert trial["provenance"]["kernel_version"] == version["version"]
        assert trial["time_ms"] == pytest.approx(recorded[trial["config_key"]])
    fastest = min(trials, key=lambda t: t["time_ms"])
    best = http.get("/v1/best", params={"kernel": "user-axpb", "gpu": RTX3090}).json()
    assert best["match"] == "exact" and best["time_ms"] == pytest.approx(fastest["time_ms"])
    assert best["config"] == fastest["config"]


def test_cli_adds_lists_shows_and_versions_a_kernel(
    byok_farm: Farm, database_url: str, tmp_path: Path, kernel_cache: Path
) -> None:
    token = make_token(database_url, "kernels", name="byok-cli")
    folder = tmp_path / "my-kernel"
    folder.mkdir()
    for name in (USER_MANIFEST.name, *USER_FILES):
        shutil.copy(USER_KERNEL / name, folder / name)
    text = (folder / USER_MANIFEST.name).read_text().replace('name = "user-axpb"', 'name = "cli-axpb"')
    (folder / USER_MANIFEST.name).write_text(text)
    env = {**os.environ, "KERNELFARM_API_URL": byok_farm.api_url, "KERNELFARM_API_TOKEN": token}

    def kernelfarm(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-P", "-m", "kernelfarm", *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=byok_farm.workdir)

    added = kernelfarm("kernel", "add", str(folder / USER_MANIFEST.name))
    assert added.returncode == 0, added.stderr + added.stdout
    assert "cli-axpb uploaded as version 1" in added.stdout
    (folder / "axpb_common.h").write_text((folder / "axpb_common.h").read_text() + "// a header edit\n")
    second = kernelfarm("kernel", "add", str(folder / USER_MANIFEST.name))
    assert "cli-axpb uploaded as version 2" in second.stdout  # the hash covers the included header
    versions = kernelfarm("kernel", "versions", "cli-axpb")
    assert versions.returncode == 0 and versions.stdout.count("axpb.cu") == 2
    shown = kernelfarm("kernel", "show", "cli-axpb", "--version", "1")
    assert "cli-axpb" in shown.stdout and "block_size_x" in shown.stdout
    listed = kernelfarm("kernel", "list")
    assert "cli-axpb" in listed.stdout and "upload" in listed.stdout

    (folder / "axpb.toml").write_text(text.replace('"block_size_x * block_size_y >= 32"', '"block_size_q >= 32"'))
    bad = kernelfarm("kernel", "add", str(folder / USER_MANIFEST.name))
    assert bad.returncode == 1 and "manifest.restrictions.0" in bad.stderr and "Traceback" not in bad.stderr
    (folder / "axpb_naive.cu").unlink()
    missing = kernelfarm("kernel", "add", str(folder / USER_MANIFEST.name))
    assert missing.returncode == 1 and "axpb_naive.cu" in missing.stderr


def renamed(manifest: dict[str, Any], uploads: dict[str, bytes], old: str, new: str) -> tuple[dict, dict]:
    """The same kernel with a tunable parameter renamed, in the manifest and in the sources."""
    text = json.dumps(manifest).replace(old, new)
    return json.loads(text), {name: data.replace(old.encode(), new.encode()) for name, data in uploads.items()}


def test_a_kernel_name_belongs_to_its_first_uploader(byok_farm: Farm, database_url: str, admin_token: str) -> None:
    owner = make_token(database_url, "kernels", name="byok-owner")
    other = make_token(database_url, "kernels", name="byok-other")
    manifest, uploads = user_manifest() | {"name": "owned-axpb"}, user_uploads()
    first = upload(client(byok_farm, owner), manifest, uploads)
    assert first.status_code == 201 and first.json()["owner"] == "byok-owner", first.text

    before = stored_versions(database_url)
    changed = manifest | {"description": "another kernel under the owner's name"}
    refused = upload(client(byok_farm, other), changed, uploads)
    assert refused.status_code == 403 and "'byok-owner'" in refused.json()["detail"], refused.text
    assert stored_versions(database_url) == before
    # The same content is already stored: the answer is that version, and nothing changes.
    same = upload(client(byok_farm, other), manifest, uploads)
    assert same.status_code == 200 and same.json()["version"] == 1 and same.json()["owner"] == "byok-owner"

    assert upload(client(byok_farm, owner), changed, uploads).json()["version"] == 2
    by_admin = upload(client(byok_farm, admin_token), manifest | {"description": "an admin's fix"}, uploads)
    assert by_admin.status_code == 201 and by_admin.json()["version"] == 3, by_admin.text
    versions = client(byok_farm, owner).get("/v1/kernels/owned-axpb/versions").json()
    assert [v["owner"] for v in versions][:2] == ["byok-owner", "byok-owner"] and len(versions) == 3


def test_a_new_version_changes_neither_an_old_jobs_exports_nor_leaves_a_stale_best(
    byok_farm: Farm, admin_token: str
) -> None:
    http = client(byok_farm, admin_token)
    manifest = user_manifest() | {"name": "versioned-axpb", "recording": {"file": RECORDING}}
    uploads = user_uploads() | {RECORDING: recording_bytes(manifest)}
    assert upload(http, manifest, uploads).status_code == 201
    body = {"kernel": "versioned-axpb", "gpu_model": RTX3090, "budget_trials": 8, "parallelism": 2, "seed": 3}
    job_id = http.post("/v1/jobs", json=body).json()["id"]
    done = wait_for(
        lambda: (j := http.get(f"/v1/jobs/{job_id}").json())["state"] in ("complete", "failed") and j, 120, "the job"
    )
    assert done["state"] == "complete", done["status_message"]
    lookup = {"kernel": "versioned-axpb", "gpu": RTX3090}
    assert http.get("/v1/best", params=lookup).status_code == 200  # answered, and cached

    # Version 2 renames a parameter and has no measurement yet.
    manifest_2, uploads_2 = renamed(user_manifest() | {"name": "versioned-axpb"}, user_uploads(), "tile_size_y", "tsy")
    assert upload(http, manifest_2, uploads_2).json()["version"] == 2
    # /v1/best answers for the latest source: nothing is measured for it. The cached answer for
    # version 1 was served until a trial of version 2 became a best.
    wait_for(lambda: http.get("/v1/best", params=lookup).status_code == 404, 10, "the cached best to be dropped")

    # The old job's trials are exported and plotted with the parameters it measured.
    rows = http.get(f"/v1/jobs/{job_id}/export", params={"format": "csv"}).text.splitlines()
    header = rows[0].split(",")
    assert "tile_size_y" in header and "tsy" not in header, header
    column = header.index("tile_size_y")
    assert len(rows) == 9 and all(row.split(",")[column] for row in rows[1:]), rows
    cache = http.get(f"/v1/jobs/{job_id}/export", params={"format": "kernel_tuner"}).json()
    assert cache["tune_params_keys"] == ["block_size_x", "block_size_y", "tile_size_x", "tile_size_y"]
    columns = http.get(f"/v1/jobs/{job_id}/trial-columns").json()
    assert columns["parameters"] == cache["tune_params_keys"] and len(columns["config"]["tile_size_y"]) == 8
