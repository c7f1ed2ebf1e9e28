"""The README path: the CLI on the embedded stack (PostgreSQL and redis-server from the wheels),
with DATABASE_URL / REDIS_URL unset, exactly as on a machine with no services, run from a project
folder whose own `core/`, `kernels/`, ... (and `kernelfarm/`) packages must not be imported."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelfarm.stack import StackState, alive, tagged_processes
from kernelfarm.testing.decoys import write_decoy_packages

RTX3090 = "nvidia-geforce-rtx-3090"


def run(state_dir: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"KERNELFARM_STATE_DIR": str(state_dir), "COLUMNS": "200", "OMP_NUM_THREADS": "1"})
    project = write_decoy_packages(state_dir.parent / f"{state_dir.name}-project")
    # -P: like the `kernelfarm` console script, the CLI itself does not import from the working directory.
    return subprocess.run([sys.executable, "-P", "-m", "kernelfarm", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    state_dir = tmp_path_factory.mktemp("stack")
    started = run(state_dir, "up", "--detach", "--workers", "2")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield state_dir
    finally:
        run(state_dir, "down")


def test_up_runs_embedded_servers(stack: Path) -> None:
    state = StackState.load(stack)
    assert state is not None and state.embedded_postgres and state.embedded_redis_pid
    assert all(alive(p.pid) for p in state.processes)
    assert {p.name for p in state.processes} == {"api", "coordinator", "worker-0", "worker-1"}


def test_tune_then_best_from_the_cli(stack: Path) -> None:
    tuned = run(stack, "tune", "convolution_kernel", "--gpu", RTX3090, "--budget", "50", "--seed", "5")
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    assert "best config" in tuned.stdout and "top 10 trials" in tuned.stdout
    # the stack's own database: no other GPU model has tuned it (kept by the job: its status has moved on)
    assert "cold start: no other GPU model had tuned this kernel and problem" in tuned.stdout
    best_ms = float(re.search(r"best config \(([\d.]+) ms\)", tuned.stdout).group(1))  # type: ignore[union-attr]

    looked_up = run(stack, "best", "convolution_kernel", "--gpu", RTX3090, "--json")
    assert looked_up.returncode == 0, looked_up.stderr
    result = json.loads(looked_up.stdout)
    assert result["match"] == "exact" and round(result["time_ms"], 4) == best_ms

    job_id = tuned.stdout.split("job ", 1)[1].split()[0]
    jobs = run(stack, "jobs")
    assert jobs.returncode == 0, jobs.stderr
    assert job_id in jobs.stdout and "convolution_kernel" in jobs.stdout and "complete" in jobs.stdout
    workers = run(stack, "workers")
    assert workers.returncode == 0, workers.stderr
    assert "replay0@" in workers.stdout and "replay1@" in workers.stdout and RTX3090 in workers.stdout
    kernels = run(stack, "kernels")
    assert kernels.returncode == 0, kernels.stderr
    assert "convolution_kernel" in kernels.stdout and "block_size_x" in kernels.stdout


def test_tune_searches_only_the_values_set(stack: Path) -> None:
    tuned = run(stack, "tune", "convolution_kernel", "--gpu", RTX3090, "--budget", "6", "--seed", "2", "--top", "6",
                "--cold-start", "--set", "block_size_x=32,64", "--set", "tile_size_x=2")  # fmt: skip
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    rows = [line for line in tuned.stdout.splitlines() if "block_size_x=" in line and "best config" not in line]
    complete = int(re.search(r"trials: (\d+) complete", tuned.stdout).group(1))  # type: ignore[union-attr]
    assert len(rows) == complete > 0, tuned.stdout  # every complete trial of the job is in the table
    assert {re.search(r"block_size_x=(\d+)", row).group(1) for row in rows} <= {"32", "64"}  # type: ignore[union-attr]
    assert all(" tile_size_x=2 " in row for row in rows), rows


def test_tokens_from_the_cli(stack: Path) -> None:
    created = run(stack, "token", "create", "--scope", "read", "--name", "ci-reader")
    assert created.returncode == 0 and created.stdout.strip().startswith("kf_")
    refused = run(stack, "token", "create", "--scope", "root")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr + refused.stdout


def test_cli_errors_are_one_line_not_tracebacks(stack: Path) -> None:
    bad = run(stack, "tune", "no_such_kernel", "--gpu", RTX3090, "--budget", "5")
    assert bad.returncode == 1
    assert "unknown kernel" in bad.stderr and "Traceback" not in bad.stdout + bad.stderr  # errors: stderr
    missing = run(stack, "job", "00000000-0000-0000-0000-000000000000")
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_demo_is_readme_command_one(tmp_path: Path) -> None:
    """The demo starts its own embedded stack, completes >= 50 trials, checks best == fastest
    completed trial, and stops everything it started."""
    demo = run(tmp_path, "demo", "--trials", "50")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "equals the fastest of" in demo.stdout
    assert "50 total" in demo.stdout
    assert StackState.load(tmp_path) is None  # stopped and cleaned up


def test_up_refuses_an_unknown_backend_before_starting_anything(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    refused = run(state_dir, "up", "--backend", "cudaa", timeout=60)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "backend must be one of cuda, triton, replay, fake or auto" in refused.stderr
    assert StackState.load(state_dir) is None  # no server was started, no state written


def test_a_foreground_up_ends_when_down_stops_the_stack(tmp_path: Path) -> None:
    """`kernelfarm up` in the foreground supervises the stack; `kernelfarm down` from another shell stops
    it, and the supervising `up` then ends (it went on supervising nothing, its embedded Redis a
    zombie child, until Ctrl-C), its warm spares with it."""
    tmp_path.chmod(0o711)  # the embedded PostgreSQL's own user passes through (pytest makes it 0700)
    state_dir = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"KERNELFARM_STATE_DIR": str(state_dir), "COLUMNS": "200", "OMP_NUM_THREADS": "1"})
    project = write_decoy_packages(tmp_path / "project")
    up = subprocess.Popen([sys.executable, "-P", "-m", "kernelfarm", "up", "--workers", "1"], cwd=project, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        assert up.stdout is not None
        said = []
        for line in up.stdout:  # until it supervises
            said.append(line)
            if line.startswith("running;"):
                break
        else:
            raise AssertionError(f"`up` ended before it supervised (exit {up.wait()}): {''.join(said)}")
        stopped = run(state_dir, "down")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert up.wait(timeout=10) == 0
        assert "stopped by `kernelfarm down`" in up.stdout.read()
        assert not [pid for pid in tagged_processes(state_dir.resolve()) if alive(pid)]  # no spare outlives it
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            up.wait(timeout=60)
        run(state_dir, "down")
