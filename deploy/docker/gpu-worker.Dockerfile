# syntax=docker/dockerfile:1.7
# kernelfarm GPU worker image: CUDA runtime + Nsight Compute + CuPy, one container per GPU.
#
#   docker build -f deploy/docker/gpu-worker.Dockerfile -t kernelfarm/gpu-worker:0.1.0 .
#
# The CUDA minor version must not be newer than the hosts' driver supports (driver 580 = CUDA
# 13.0): NVRTC output and ncu both follow the toolkit, and an older driver rejects newer code.
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu24.04
# Ubuntu 24.04's python3 is 3.12, the same interpreter the bare-metal GPU nodes run.
ARG PYTHON_VERSION=3.12

# --- stage 1: wheelhouse for the image's interpreter, with the gpu extra (cupy-cuda13x)
FROM python:${PYTHON_VERSION}-slim AS wheels
ARG PYTHON_VERSION
WORKDIR /src
COPY . .
RUN python deploy/wheelhouse.py --python-version "${PYTHON_VERSION}" --extra gpu --dest /wheelhouse

# --- stage 2: CUDA runtime (libcudart, NVRTC, NVML via the driver) plus the profiler
FROM ${CUDA_IMAGE}
# Apt package suffix of the image's CUDA version ("13-0" for 13.0.x); the CUDA apt repository
# is already configured in the nvidia/cuda images.
ARG CUDA_PKG_VERSION=13-0
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Unpinned on purpose: the CUDA repository's package matching CUDA_PKG_VERSION is the pin.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 python3-venv tini "cuda-nsight-compute-${CUDA_PKG_VERSION}" \
        "cuda-cudart-dev-${CUDA_PKG_VERSION}" "cuda-crt-${CUDA_PKG_VERSION}" "cuda-cccl-${CUDA_PKG_VERSION}" \
    && rm -rf /var/lib/apt/lists/*
# The headers above are what NVRTC includes for a kernel's `#include <cuda_fp16.h>` (runtime), `<mma.h>`'s
# crt/ (compiler) and `<cuda/std/...>` (CCCL): a runtime image has none. cuda.pathfinder finds them here.
ENV CUDA_HOME=/usr/local/cuda
# The worker looks ncu up on PATH; fail the build here, not at the first profiled trial.
RUN ncu="$(command -v ncu || true)"; \
    for candidate in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do \
        if [ -z "$ncu" ] && [ -x "$candidate" ]; then ncu="$candidate"; fi; \
    done; \
    test -n "$ncu" && ln -sf "$ncu" /usr/local/bin/ncu && ncu --version
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/kernelfarm kernelfarm
ENV VIRTUAL_ENV=/opt/kernelfarm \
    PATH=/opt/kernelfarm/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    KERNELFARM_STATE_DIR=/var/lib/kernelfarm \
    CUPY_CACHE_DIR=/var/lib/kernelfarm/cupy-cache \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN --mount=type=bind,from=wheels,source=/wheelhouse,target=/wheelhouse \
    python3 -m venv "$VIRTUAL_ENV" \
    && PYTHON="$VIRTUAL_ENV/bin/python" sh /wheelhouse/install.sh --no-cache-dir \
    && python -c "import cupy, kernelfarm.core.settings, kernelfarm.kernels.registry, kernelfarm.worker.runner" \
    && kernelfarm --help >/dev/null
COPY --chmod=0755 deploy/healthcheck.py /usr/local/bin/kernelfarm-healthcheck

USER 10001:10001
WORKDIR /var/lib/kernelfarm
# Profiling note: ncu needs GPU performance counters. Either load the driver on the host with
# NVreg_RestrictProfilingToAdminUsers=0 (recommended; see docs/DEPLOY.md) or grant the container
# CAP_SYS_ADMIN. Without either, trials are still measured and verified; only ncu metrics are missing.
ENTRYPOINT ["/usr/bin/tini", "--"]
# Inside the container the one GPU it was given is always device 0.
CMD ["kernelfarm", "worker", "--backend", "cuda", "--gpu", "0"]
