"""The one launcher: its command lines parse as the real CLI's, run past the caller's directory, and the
runtime never loads the test harness."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from kernelfarm import launcher
from kernelfarm.cli import app
from kernelfarm.testing.decoys import write_decoy_packages
from kernelfarm.testing.recordings import CONVOLUTION, PNPOLY
from kernelfarm.worker.backends.replay import ReplayBackend

PREFIX = [sys.executable, "-P", "-m", "kernelfarm"]


def parsed(argv: list[str]) -> dict[str, object]:
    """The parameters the ``kernelfarm`` CLI parses from ``argv`` (without running the command)."""
    assert argv[: len(PREFIX)] == PREFIX, argv
    name, *args = argv[len(PREFIX) :]
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    with command.make_context(name, list(args)) as context:
        return dict(context.params)


def test_api_command_line_is_the_clis() -> None:
    assert parsed(launcher.api_argv(8123)) == {"host": "127.0.0.1", "port": 8123, "workers": 1}
    assert parsed(launcher.api_argv(8123, host="0.0.0.0", workers=3)) == {"host": "0.0.0.0", "port": 8123,
                                                                          "workers": 3}  # fmt: skip


def test_coordinator_command_line_is_the_clis(tmp_path: Path) -> None:
    params = parsed(launcher.coordinator_argv(tmp_path / "schedule", concurrency=3, loglevel="WARNING"))
    assert params == {"concurrency": 3, "schedule": tmp_path / "schedule", "loglevel": "WARNING"}


def test_worker_command_line_is_the_clis() -> None:
    replay = parsed(launcher.worker_argv("r1", landscapes=[CONVOLUTION, PNPOLY], sleep_ms=150, time_scale=2.5,
                                         loglevel="WARNING"))  # fmt: skip
    assert replay == {"backend": "replay", "gpu": 0, "landscape": [CONVOLUTION, PNPOLY], "name": "r1",
                      "sleep_ms": 150.0, "time_scale": 2.5, "loglevel": "WARNING",
                      "allow_uploaded_python": False}  # fmt: skip
    assert parsed(launcher.worker_argv("p", allow_uploaded_python=True))["allow_uploaded_python"] is True
    cuda = parsed(launcher.worker_argv("cuda1", backend="cuda", gpu=1))
    assert cuda["backend"] == "cuda" and cuda["gpu"] == 1 and cuda["landscape"] == []


def test_another_interpreter_runs_the_same_command_line(tmp_path: Path) -> None:
    argv = launcher.worker_argv("w", python="/opt/other/python3")
    assert argv[:4] == ["/opt/other/python3", "-P", "-m", "kernelfarm"]
    assert argv[4:] == launcher.worker_argv("w")[4:]


def test_component_env_points_at_the_farm_and_overrides_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELFARM_LEASE_SECONDS", "15")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    env = launcher.component_env("postgresql://db", "redis://broker/3", api_url="http://api:1",
                                 overrides={"KERNELFARM_LEASE_SECONDS": "4", "OMP_NUM_THREADS": "2"})  # fmt: skip
    assert env["DATABASE_URL"] == "postgresql://db" and env["REDIS_URL"] == "redis://broker/3"
    assert env["KERNELFARM_API_URL"] == "http://api:1"
    assert env["KERNELFARM_LEASE_SECONDS"] == "4" and env["OMP_NUM_THREADS"] == "2"
    assert "PYTHONPATH" not in env  # components find their code in the installed package, nowhere else


def test_a_launched_command_line_ignores_decoys_in_its_working_directory(tmp_path: Path) -> None:
    """The decoys break a plain ``python -m`` started there; the launcher's command line is not fooled."""
    decoys = write_decoy_packages(tmp_path / "project")
    plain = subprocess.run([sys.executable, "-c", "import core"], cwd=decoys, capture_output=True, text=True,
                           timeout=60)  # fmt: skip
    assert "decoy 'core'" in plain.stderr
    # `worker --help` imports the command modules (core, kernels, ...) and exits before connecting anywhere.
    launched = subprocess.run([*launcher.worker_argv("w"), "--help"], cwd=decoys, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
    assert launched.returncode == 0, launched.stderr[-2000:]
    assert "--landscape" in launched.stdout


def test_the_runtime_never_imports_the_test_harness() -> None:
    entry_points = ["kernelfarm.cli", "kernelfarm.api.app", "kernelfarm.tuner.tasks", "kernelfarm.worker.tasks"]
    code = (f"import importlib, sys\nfor name in {entry_points!r}: importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.startswith('kernelfarm.testing')))")  # fmt: skip
    # The Celery apps need a broker URL to be built; nothing connects to it here.
    env = launcher.component_env("postgresql+psycopg2://nobody@127.0.0.1:1/x", "redis://127.0.0.1:1/0")
    result = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def _celery_help(*args: str) -> subprocess.CompletedProcess[str]:
    """``<celery_argv> --help`` under ``-X importtime`` (every module imported is named on stderr)."""
    argv = launcher.celery_argv("kernelfarm.worker.tasks", *args, "--help")
    env = launcher.component_env("postgresql+psycopg2://nobody@127.0.0.1:1/x", "redis://127.0.0.1:1/0")
    result = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result


@pytest.mark.parametrize("command", ["worker", "beat"])
def test_components_start_celery_without_its_repl(command: str) -> None:
    """A worker (every replacement of a killed one) and beat skip click_repl and prompt_toolkit (~50 ms of
    a replay worker's start); Celery still parses their whole command line."""
    result = _celery_help(command)
    assert "--loglevel" in result.stdout
    imported = result.stderr
    assert "| celery.bin.celery" in imported  # the module list is there: the check below means something
    assert "prompt_toolkit" not in imported and "click_repl." not in imported


def test_other_celery_commands_keep_the_repl() -> None:
    result = _celery_help("amqp")
    assert "repl" in result.stdout  # click_repl's register_repl added it
    assert "prompt_toolkit" in result.stderr


def test_a_replay_workers_command_finds_its_queue_from_the_recordings_alone() -> None:
    """``kernelfarm worker`` runs again for every replacement of a dead worker. Before it execs Celery, a
    replay worker's command reads its GPU from the recordings' JSON (the settings, numpy and the
    landscapes' entries cost it ~0.2 s), and names the GPU the backend will register with."""
    code = ("import sys\nfrom pathlib import Path\nfrom kernelfarm.cli import _worker_app\n"
            "from kernelfarm.commands.serve import default_landscapes, probe_gpu\n_worker_app()\n"
            f"print(probe_gpu('replay', [Path({str(CONVOLUTION)!r})]))\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'pydantic', 'sqlalchemy', 'celery'}),"
            " 'kernelfarm.core.landscape' in sys.modules)\n"
            "print([p.name for p in default_landscapes()])")  # fmt: skip
    env = launcher.component_env("postgresql+psycopg2://nobody@127.0.0.1:1/x", "redis://127.0.0.1:1/0")
    result = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    identity = ReplayBackend([CONVOLUTION]).identity()
    assert result.stdout.splitlines() == [repr((identity.gpu_name, identity.gpu_model)), "[] False",
                                          repr([CONVOLUTION.name, PNPOLY.name])]  # fmt: skip
