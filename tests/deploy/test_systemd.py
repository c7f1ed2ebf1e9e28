"""deploy/systemd: the templated bare-metal GPU worker (one instance per GPU)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.sources import DEPLOY, systemd_unit, systemd_values

WORKER = DEPLOY / "systemd" / "kernelfarm-worker@.service"


def environment(path: Path) -> dict[str, str]:
    values = systemd_values(path, "Service", "Environment")
    return dict(item.split("=", 1) for value in values for item in shlex.split(value))


def test_one_instance_per_gpu() -> None:
    env = environment(WORKER)
    # The instance name is the GPU index, in nvidia-smi's (PCI bus) order.
    assert env["CUDA_VISIBLE_DEVICES"] == "%i"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    (exec_start,) = systemd_values(WORKER, "Service", "ExecStart")
    argv = shlex.split(exec_start)
    assert Path(argv[0]).name == "kernelfarm" and argv[1] == "worker"
    assert argv[argv.index("--backend") + 1] == "cuda"
    # CUDA_VISIBLE_DEVICES leaves one device, which the process sees as 0.
    assert argv[argv.index("--gpu") + 1] == "0"
    assert "%i" in argv[argv.index("--name") + 1], "worker names must differ per GPU"


def test_restart_and_shutdown_policy() -> None:
    service = dict(systemd_unit(WORKER)["Service"])
    assert service["Restart"] == "on-failure"
    assert service["KillSignal"] == "SIGTERM"  # Celery's warm shutdown
    assert int(service["TimeoutStopSec"]) >= 60
    assert service["EnvironmentFile"].startswith("/etc/kernelfarm/")
    assert service["User"] != "root"
    # These would break the GPU: hidden /dev/nvidia*, and no JIT for NVRTC/the driver.
    assert service.get("PrivateDevices", "no") == "no"
    assert service.get("MemoryDenyWriteExecute", "no") == "no"
    assert dict(systemd_unit(WORKER)["Install"])["WantedBy"] == "multi-user.target"


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    # verify also checks that ExecStart exists; point it at an executable that does here.
    text = WORKER.read_text().replace("/opt/kernelfarm/venv/bin/kernelfarm", shutil.which("true") or "/bin/true")
    (tmp_path / WORKER.name).write_text(text)
    (tmp_path / "kernelfarm-worker@0.service").symlink_to(WORKER.name)
    result = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / "kernelfarm-worker@0.service")],
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    # Unknown keys are only warned about (exit 0), so any output counts as a failure.
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
