"""Per-GPU-model queues: workers of one model share a job's trials; another model's never sees them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Trial
from kernelfarm.core.states import TrialState
from tests.conftest import PNPOLY, RTX3090, Farm, live_worker_count, wait_for

OTHER_MODEL = "nvidia-test-gpu-b"


def other_gpu_landscape(directory: Path) -> Path:
    """A small recording of another GPU model (the pnpoly recording, relabelled)."""
    data = json.loads(gzip.decompress(PNPOLY.read_bytes()))
    data["device_name"] = "NVIDIA Test GPU B"
    data["cache"] = dict(list(data["cache"].items())[:50])
    path = directory / "pnpoly_test_gpu_b.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def mixed_farm(farm: Farm) -> Farm:
    """The module farm (two RTX 3090 replay workers) plus one worker of another model."""
    farm.start_worker("other-model", other_gpu_landscape(farm.directory))
    wait_for(lambda: live_worker_count(farm.database_url, OTHER_MODEL) == 1, 60, "the other-model worker")
    return farm


def test_two_workers_share_a_job_and_other_models_get_nothing(mixed_farm: Farm, admin_token: str) -> None:
    client = httpx.Client(base_url=mixed_farm.api_url, headers={"Authorization": f"Bearer {admin_token}"})
    body = {"kernel": "convolution_kernel", "gpu_model": RTX3090, "budget_trials": 40, "parallelism": 4, "seed": 11}
    job_id = client.post("/v1/jobs", json=body).json()["id"]
    wait_for(lambda: client.get(f"/v1/jobs/{job_id}").json()["state"] == "complete", 120, "the job")

    with session_scope(mixed_farm.database_url) as session:
        per_worker = dict(
            session.execute(
                select(Trial.worker_name, func.count())
                .where(Trial.job_id == job_id, Trial.state != TrialState.CANCELLED.value)
                .group_by(Trial.worker_name)
            ).all()
        )
    assert None not in per_worker, per_worker  # every measured trial names its worker
    names = {name.split("@")[0] for name in per_worker if name is not None}
    assert names == {"replay-a", "replay-b"}, per_worker  # both shared the work ...
    assert sum(per_worker.values()) == 40
    assert "other-model" not in names  # ... and the other model's worker received none
    assert "worker.evaluate" not in mixed_farm.log("other-model").split("ready.", 1)[-1]
