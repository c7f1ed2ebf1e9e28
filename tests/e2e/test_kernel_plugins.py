"""Plugin kernels (``kernelfarm.kernels`` entry points) over the farm's real parts: the API and the
coordinator find the plugin's kernel; a worker without the plugin, or with another version of it,
takes none of its trials and the job says why; a worker with that very version runs them.

The plugin is a dist-info written into a temp folder on the components' PYTHONPATH
(kernelfarm/testing/plugins.py): seen as an installed distribution, installed nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kernelfarm import launcher
from kernelfarm.services import free_port
from kernelfarm.stack import api_ready
from kernelfarm.testing.plugins import write_plugin
from tests.conftest import CONVOLUTION, RTX3090, Farm, live_worker_count, wait_for

DISTRIBUTION, VERSION, KERNEL = "kf-test-plugin", "1.2.0", "plugin-conv"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("plugin-sites")
    return {
        version: write_plugin(
            root / version, distribution=DISTRIBUTION, version=version, kernel=KERNEL, recording=CONVOLUTION
        )
        for version in (VERSION, "1.1.0")
    }


@pytest.fixture(scope="module")
def plugin_farm(database_url: str, redis_url: str, sites: dict[str, Path],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:  # fmt: skip
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("plugin-farm"))
    with_plugin = {"PYTHONPATH": str(sites[VERSION])}
    try:
        port = free_port()
        farm.api_url = f"http://127.0.0.1:{port}"
        farm.start("api", launcher.api_argv(port), **with_plugin)
        wait_for(lambda: farm.check_running() and api_ready(farm.api_url), 30, "API")
        farm.start("coordinator", launcher.coordinator_argv(farm.directory / "schedule"), **with_plugin)
        # one worker without the plugin, one with another version of it
        farm.start("no-plugin", launcher.worker_argv("no-plugin", landscapes=(CONVOLUTION,)))
        farm.start("old-plugin", launcher.worker_argv("old-plugin", landscapes=(CONVOLUTION,)),
                   PYTHONPATH=str(sites["1.1.0"]))  # fmt: skip
        wait_for(lambda: farm.check_running() and live_worker_count(database_url, RTX3090) >= 2, 60, "two workers")
        yield farm
    finally:
        farm.stop_all()
        from tests.conftest import _reset_between_farms

        _reset_between_farms(database_url, redis_url)


def test_only_a_worker_with_the_plugin_version_runs_its_trials(
    plugin_farm: Farm, database_url: str, admin_token: str, sites: dict[str, Path]
) -> None:
    http = httpx.Client(base_url=plugin_farm.api_url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=60)
    kernel = http.get(f"/v1/kernels/{KERNEL}").json()
    requirement = f"plugin:{DISTRIBUTION}=={VERSION}"
    assert kernel["origin"] == "plugin" and kernel["requires"] == [requirement]

    workers = {w["name"].split("@")[0]: w for w in http.get("/v1/workers").json()}
    assert workers["old-plugin"]["capabilities"] == [f"plugin:{DISTRIBUTION}==1.1.0"]
    assert workers["no-plugin"]["capabilities"] == []

    body = {"kernel": KERNEL, "gpu_model": RTX3090, "budget_trials": 12, "parallelism": 3, "seed": 1}
    created = http.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    waiting = wait_for(
        lambda: requirement in (j := http.get(f"/v1/jobs/{job_id}").json())["status_message"] and j,
        60,
        "the job to say it waits for the plugin",
    )
    message = waiting["status_message"]
    assert message.startswith("waiting: no live worker"), message
    assert f"{workers['no-plugin']['name']} has no kernel plugins" in message
    assert f"{workers['old-plugin']['name']} has plugin:{DISTRIBUTION}==1.1.0" in message
    assert waiting["progress"]["total"] == 0  # nothing was sent to the workers that lack it

    plugin_farm.start("new-plugin", launcher.worker_argv("new-plugin", landscapes=(CONVOLUTION,)),
                      PYTHONPATH=str(sites[VERSION]))  # fmt: skip
    done = wait_for(
        lambda: (j := http.get(f"/v1/jobs/{job_id}").json())["state"] in ("complete", "failed") and j, 120, "the job"
    )
    assert done["state"] == "complete", done["status_message"]
    trials = http.get(f"/v1/jobs/{job_id}/trials", params={"limit": 100}).json()["items"]
    assert len(trials) == 12
    assert {t["worker_name"].split("@")[0] for t in trials} == {"new-plugin"}
