# syntax=docker/dockerfile:1.7
# kernelfarm control-plane image: the REST API (`kernelfarm serve-api`), the coordinator
# (`kernelfarm coordinator`) and the migration step (`kernelfarm db upgrade`) all run from it.
#
#   docker build -f deploy/docker/api.Dockerfile -t kernelfarm/api:0.1.0 .
#
# Build context: the repository root. Only the wheelhouse crosses from the build stage into the
# final image, so compilers, git metadata and tests never ship.
ARG PYTHON_VERSION=3.12

# --- stage 1: the project's own offline wheelhouse (the same tool the air-gapped GPU nodes use)
FROM python:${PYTHON_VERSION}-slim AS wheels
ARG PYTHON_VERSION
WORKDIR /src
COPY . .
RUN python deploy/wheelhouse.py --python-version "${PYTHON_VERSION}" --dest /wheelhouse

# --- stage 2: runtime, installed from that wheelhouse with --no-index
FROM python:${PYTHON_VERSION}-slim
# tini as PID 1: forwards SIGTERM to Celery/uvicorn (warm shutdown) and reaps orphaned children.
# Unpinned on purpose: the distribution's current build carries its security fixes.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/*
# A fixed UID so Kubernetes runAsUser/fsGroup and bind-mounted volumes agree with the image.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/kernelfarm kernelfarm
ENV VIRTUAL_ENV=/opt/kernelfarm \
    PATH=/opt/kernelfarm/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    KERNELFARM_STATE_DIR=/var/lib/kernelfarm
RUN --mount=type=bind,from=wheels,source=/wheelhouse,target=/wheelhouse \
    python -m venv "$VIRTUAL_ENV" \
    && PYTHON="$VIRTUAL_ENV/bin/python" sh /wheelhouse/install.sh --no-cache-dir \
    && kernelfarm --help >/dev/null
COPY --chmod=0755 deploy/healthcheck.py /usr/local/bin/kernelfarm-healthcheck

# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
# The coordinator keeps its beat schedule under the working directory; it must be writable.
WORKDIR /var/lib/kernelfarm
EXPOSE 8765
# No HEALTHCHECK here: one image serves three roles (API, coordinator, one-shot migration) whose
# health means different things; compose and the Kubernetes probes set one per role.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["kernelfarm", "serve-api", "--host", "0.0.0.0", "--port", "8765"]
