"""The suite's own clean-up (tests/conftest.py), checked on an inner pytest run that uses the same
conftest: a process it leaves running fails it (and is stopped), the database it created is dropped,
and its temporary folder is removed. Only the inner run's own process, database and folder are
looked at: other checkouts run tests on this machine at the same time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import Services

REPO = Path(__file__).resolve().parents[1]

INNER = """
import subprocess, sys
from pathlib import Path

from tests.conftest import fresh_database

def test_leaks(services, tmp_path):
    # made outside the database_url fixture (whose teardown drops what its process made): only the
    # end of the session drops it, in the worker that made it
    database_url = fresh_database(services.server_url)
    Path({record!r}).write_text(database_url + "\\n" + str(tmp_path) + "\\n")
    leaked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    Path({record!r}).open("a").write(str(leaked.pid) + "\\n")
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


# `make test` runs the suite in pytest-xdist workers: there a worker drops its databases and the
# controller, which runs no test, finds the survivor and removes the run's folder.
@pytest.mark.parametrize("parallel", [[], ["-n", "2"]], ids=["one process", "xdist workers"])
def test_a_leaked_process_fails_the_run_and_the_rest_is_cleaned_up(
    tmp_path: Path, services: Services, parallel: list[str]
) -> None:
    record = tmp_path / "record.txt"
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner_leak.py").write_text(INNER.format(record=str(record)))
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELFARM_TEST_RUN", "REDIS_URL")}
    env["DATABASE_URL"] = services.server_url  # the same server: the inner run makes its database there
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                             *parallel, "--rootdir", str(inner), str(inner / "test_inner_leak.py")],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    output = result.stdout + result.stderr
    database_url, inner_tmp, pid = record.read_text().split("\n")[:3]
    assert result.returncode != 0, output  # the test passed, the run failed
    assert "LEAK: processes started by this test run survived it" in output and pid in output
    deadline = time.monotonic() + 10
    while alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(int(pid))  # and it was stopped
    assert not Path(inner_tmp).exists()  # the run's temporary folder is gone
    name = database_url.rsplit("/", 1)[1].split("?")[0]
    engine = create_engine(services.server_url)
    with engine.connect() as connection:
        exists = connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()
    engine.dispose()
    assert exists is None, f"{name} was not dropped"


CLEAN_INNER = """
import multiprocessing

def test_uses_a_process_pool_semaphore():
    # A multiprocessing lock starts this process's resource tracker, which lives as long as the
    # test process does (joblib's pools start one too): it is not a leak.
    multiprocessing.get_context("spawn").Lock()
"""


def test_the_test_process_own_resource_tracker_is_no_leak(tmp_path: Path, services: Services) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner_clean.py").write_text(CLEAN_INNER)
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELFARM_TEST_RUN", "REDIS_URL")}
    env["DATABASE_URL"] = services.server_url
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                             "--rootdir", str(inner), str(inner / "test_inner_clean.py")],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "LEAK" not in output and "1 passed" in output
