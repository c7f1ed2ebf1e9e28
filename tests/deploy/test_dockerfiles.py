"""deploy/docker: the two images, checked as text (there is no Docker engine to build them here)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.deploy.sources import DEPLOY, dockerfile_instructions

API = DEPLOY / "docker" / "api.Dockerfile"
GPU = DEPLOY / "docker" / "gpu-worker.Dockerfile"


def instructions(path: Path, keyword: str) -> list[str]:
    return [rest for k, rest in dockerfile_instructions(path) if k == keyword]


def test_api_image_is_python_slim_installed_from_the_wheelhouse() -> None:
    froms = instructions(API, "FROM")
    assert all(f.startswith("python:${PYTHON_VERSION}-slim") for f in froms)
    runs = " ".join(instructions(API, "RUN"))
    assert "deploy/wheelhouse.py" in runs and "install.sh" in runs
    assert json.loads(instructions(API, "CMD")[0])[:2] == ["kernelfarm", "serve-api"]


def test_gpu_image_has_cuda_runtime_nsight_compute_and_cupy() -> None:
    text = GPU.read_text()
    assert "ARG CUDA_IMAGE=nvidia/cuda:13." in text and "-runtime-" in text
    runs = " ".join(instructions(GPU, "RUN"))
    assert "cuda-nsight-compute-${CUDA_PKG_VERSION}" in runs and "ncu --version" in runs
    assert "--extra gpu" in runs, "the worker image needs cupy-cuda13x (the gpu extra)"
    assert json.loads(instructions(GPU, "CMD")[0])[:2] == ["kernelfarm", "worker"]


def test_images_run_unprivileged_under_an_init() -> None:
    for path in (API, GPU):
        (user,) = instructions(path, "USER")
        # Numeric, so runAsNonRoot can verify it; the same UID the manifests use.
        assert user == "10001:10001", path.name
        assert json.loads(instructions(path, "ENTRYPOINT")[0])[0].endswith("tini"), path.name
        assert any("kernelfarm-healthcheck" in c for c in instructions(path, "COPY")), path.name


def test_each_dockerfile_has_its_own_dockerignore() -> None:
    for path in (API, GPU):
        ignore = path.with_name(path.name + ".dockerignore").read_text().split()
        assert {".git", ".venv", "build"} <= set(ignore), path.name
