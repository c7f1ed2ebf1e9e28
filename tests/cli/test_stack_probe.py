"""The embedded stack's commands (`up`, `down`, `status`) against what a careless user does, from an
outside probe: every failure is one line with an exit code, nothing is left running, nothing kept is
lost, and a pid in stack.json that now belongs to another process is never signalled."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from kernelfarm.services import EmbeddedPostgres, free_port, wait_for
from kernelfarm.stack import SECRETS_FILE, STATE_FILE, StackSecrets, alive, redis_pids, stop_stack, tagged_processes


def cli(state_dir: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env = base | {"KERNELFARM_STATE_DIR": str(state_dir), "COLUMNS": "200"} | (env or {})
    return subprocess.run([sys.executable, "-P", "-m", "kernelfarm", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout + result.stderr


def test_impossible_up_arguments_are_refused_before_anything_starts(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    for args, says in [
        (["--workers", "1000000"], "more than 64 worker processes"),  # forked hundreds before
        (["--api-port", "70000"], "less than or equal to 65535"),  # a traceback once the servers ran
        (["--api-port", "-5"], "greater than or equal to 0"),
        (["--sleep-ms", "nan"], "nan is not a finite number"),
        (["--time-scale", "-1"], "-1.0 is not a finite number"),
    ]:
        result = one_line_error(cli(state_dir, "up", "--detach", "--backend", "replay", *args), code=2)
        assert says in result, result
    assert not state_dir.exists()


def test_a_state_dir_that_is_a_file_or_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    said = one_line_error(cli(a_file, "up", "--detach"))
    assert f"cannot use {a_file} as the state directory" in said and a_file.read_text() == "mine"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = one_line_error(cli(tmp_path / "state", "up", "--detach", "--api-port", str(port)))
    assert f"API port {port} is in use" in said
    assert not (tmp_path / "state" / "postgres").exists()  # refused before starting PostgreSQL


def test_an_unreadable_secrets_file_is_one_line_and_kept(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    for content in ["", "not json", "[]", '{"postgres_password": 5, "redis_password": "x"}', '{"foo": 1}']:
        (state_dir / SECRETS_FILE).write_text(content)
        said = one_line_error(cli(state_dir, "up", "--detach"))
        assert f"cannot read {state_dir / SECRETS_FILE}" in said, said
        assert (state_dir / SECRETS_FILE).read_text() == content  # never replaced: it holds the password
        assert not (state_dir / "postgres").exists()


def test_a_secrets_file_readable_by_others_is_made_private(tmp_path: Path) -> None:
    (tmp_path / SECRETS_FILE).write_text(json.dumps({"postgres_password": "p", "redis_password": "r"}))
    (tmp_path / SECRETS_FILE).chmod(0o644)
    assert StackSecrets.load_or_create(tmp_path).postgres_password == "p"
    assert (tmp_path / SECRETS_FILE).stat().st_mode & 0o777 == 0o600


def test_a_pid_of_stack_json_reused_by_another_process_is_left_alone(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "120"], start_new_session=True)  # not the stack's: no tag
    try:
        (tmp_path / STATE_FILE).write_text(json.dumps({
            "database_url": "x", "redis_url": "y", "api_url": "http://127.0.0.1:1", "token": "t",
            "processes": [{"name": "api", "pid": other.pid, "log": "/dev/null"}],
        }))  # fmt: skip
        status = cli(tmp_path, "status")
        assert status.returncode == 1 and "not running" in status.stdout and "left over" not in status.stdout
        down = cli(tmp_path, "down")
        assert down.returncode == 0 and "nothing was running" in down.stdout, down.stdout + down.stderr
        assert alive(other.pid)  # down SIGTERMed its process group before
        assert not (tmp_path / STATE_FILE).exists()
    finally:
        other.kill()
        other.wait()


def test_a_corrupt_stack_json_is_one_line(tmp_path: Path) -> None:
    for content in ["{bad", "[]", '{"processes": 5}']:
        (tmp_path / STATE_FILE).write_text(content)
        said = one_line_error(cli(tmp_path, "status"))
        assert f"cannot read {tmp_path / STATE_FILE}" in said, said
        down = cli(tmp_path, "down")  # nothing of it runs: the file goes, down says so
        assert down.returncode == 0 and "nothing was running" in down.stdout, down.stdout + down.stderr
        assert "Traceback" not in down.stderr


def test_postgres_starts_in_a_folder_whose_name_has_a_space(tmp_path: Path) -> None:
    postgres = EmbeddedPostgres(tmp_path / "state with space" / "postgres", password="pw", boundary=tmp_path)
    try:
        postgres.start()  # postgres read "with" as an argument and refused to start
        assert postgres.server_pid() is not None
    finally:
        assert postgres.stop() is None


def test_sigterm_while_up_starts_stops_what_it_started(tmp_path: Path) -> None:
    """`timeout 60 kernelfarm up`: the workers it had spawned kept running, not in stack.json."""
    state_dir = tmp_path  # as root, PostgreSQL's user may enter it (the stack opens its state dir up)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["KERNELFARM_STATE_DIR"] = str(state_dir)
    up = subprocess.Popen([sys.executable, "-P", "-m", "kernelfarm", "up", "--detach", "--workers", "2"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: len(tagged_processes(state_dir)) >= 2 or up.poll() is not None, 120, "components")
        up.send_signal(signal.SIGTERM)
        out, err = up.communicate(timeout=60)
    finally:
        if up.poll() is None:
            up.kill()
    try:
        assert up.returncode == 130 and "interrupted while starting" in out, out + err
        assert "Traceback" not in err
        time.sleep(0.5)
        assert tagged_processes(state_dir) == [] and redis_pids(state_dir) == []
        assert EmbeddedPostgres(state_dir / "postgres").server_pid() is None
        assert (state_dir / SECRETS_FILE).is_file()  # kept for the next `up`
    finally:  # what a failed check found running is stopped all the same: the test leaves nothing behind
        stop_stack(state_dir)


def test_a_state_dir_whose_name_is_too_long_is_one_line(tmp_path: Path) -> None:
    """``Path.is_file`` raises for a name too long (ENAMETOOLONG) instead of answering False: `status`,
    `down`, and every command that looks for the stack (KERNELFARM_STATE_DIR) were a traceback."""
    too_long = tmp_path / ("x" * 300)
    says = f"error: cannot use {too_long} as the state directory: File name too long\n"
    for args in (["status"], ["status", "--json"], ["down"], ["kernel", "list"], ["jobs"]):  # KERNELFARM_STATE_DIR
        result = cli(too_long, *args)
        assert result.returncode == 1 and result.stderr == says and result.stdout == "", (args, result.stderr)
    for command in ("status", "down"):  # --state-dir, the variable naming a usable one
        result = cli(tmp_path / "usable", command, "--state-dir", str(too_long))
        assert result.returncode == 1 and result.stderr == says and result.stdout == "", (command, result.stderr)


def test_a_command_given_its_api_and_token_does_not_read_the_state_dir(tmp_path: Path) -> None:
    """With KERNELFARM_API_URL and KERNELFARM_API_TOKEN set, no local stack is asked for anything: an unusable
    KERNELFARM_STATE_DIR (a name too long) does not stop `jobs` from trying that API."""
    env = {"KERNELFARM_API_URL": f"http://127.0.0.1:{free_port()}", "KERNELFARM_API_TOKEN": "kf_not_a_real_token"}
    result = cli(tmp_path / ("x" * 300), "jobs", env=env)
    assert result.returncode == 1 and result.stderr.startswith("error: cannot reach the API"), result.stderr
    assert "state directory" not in result.stderr
