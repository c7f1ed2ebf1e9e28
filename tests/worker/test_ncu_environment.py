"""The ncu profiling path runs user kernels (ncu launches the profile target, which launches them),
so what ncu starts must hold no secret and run under the measuring child's limits (docs/SECURITY.md,
"Kernel trust"). Proved through the real profiler (a fresh batch and the standby ncu process) with a
fake ``ncu`` first on PATH: it stands in for the hardware tool only, records the environment, limits
and parent's /proc environ it was started with, and behaves as ncu does when its filter matched no
kernel (the standby fake also follows the standby protocol: ``ready``, then wait for ``job.json``)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest

from kernelfarm.worker.cuda.ncu_profiler import NcuProfiler
from kernelfarm.worker.cuda.profile import ProfileTarget
from kernelfarm.worker.measuring.sandbox import ChildLimits

SECRETS = {
    "DATABASE_URL": "postgresql://farm:hunter2@db/kernelfarm",
    "REDIS_URL": "redis://:hunter2@broker:6379/0",
    "KERNELFARM_API_TOKEN": "kf_secret-token-value",
    "KERNELFARM_DB_PASSWORD": "db-password-value",
    "CUDA_LICENSE_SECRET": "secret-behind-an-allowed-prefix",
    "NV_COMPUTE_PROFILER_TOKEN": "token-behind-an-allowed-prefix",
    "MY_SERVICE_TOKEN": "service-token-value",
}

FAKE_NCU = """#!{python}
import json, os, resource, sys, time
from pathlib import Path

args = sys.argv[1:]
program = args[args.index("--log-file") + 2:]
report = Path(args[args.index("--log-file") + 1])


def record(stage):
    try:
        with open(f"/proc/{{os.getppid()}}/environ", "rb") as handle:
            parent = handle.read().decode(errors="replace")
    except OSError as exc:
        parent = "unreadable: " + type(exc).__name__
    names = ("RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_CPU")
    limits = {{name: resource.getrlimit(getattr(resource, name)) for name in names}}
    out = Path(__file__).parent / f"record-{{stage}}-{{os.getpid()}}.json"
    out.write_text(json.dumps({{"environ": dict(os.environ), "argv": args, "parent": parent, "limits": limits}}))


if "--wait" in program:  # the standby: its target gets ready, then waits for its batch
    directory = Path(program[program.index("--wait") + 1])
    record("standby-start")
    (directory / "ready").touch()
    while not (directory / "job.json").is_file():
        if not directory.is_dir():
            sys.exit(0)
        time.sleep(0.01)
    record("standby-batch")
else:
    record("fresh")
report.write_text("")  # no kernel matched the filter: an empty report, exit 0
"""


def target(entry: str) -> ProfileTarget:
    return ProfileTarget("k", {"N": 1}, {"B": 1}, "cubin.bin", 1, entry)


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ncu first on PATH, secrets in this (the worker's) environment; returns where the fake
    writes its records."""
    tools = tmp_path / "bin"
    tools.mkdir()
    ncu = tools / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return tools


def records(tools: Path, stage: str) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(tools.glob(f"record-{stage}-*.json"))]


def assert_confined(record: dict, tools: Path, cpu_limited: bool) -> None:
    environ, text = record["environ"], json.dumps(record["environ"]) + json.dumps(record["argv"])
    for name, value in SECRETS.items():
        assert name not in environ, f"{name} reached the ncu process"
        assert value not in text, f"the value of {name} reached the ncu process"
        assert value not in record["parent"], f"the ncu process read {name} from the worker's /proc environ"
    if os.geteuid() != 0:  # root reads every process's /proc files (docs/SECURITY.md says so)
        assert record["parent"].startswith("unreadable"), "the worker's /proc/<pid>/environ is readable"
    # what ncu needs to run is kept
    assert environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert environ["PATH"].split(os.pathsep)[0] == str(tools)
    limits = record["limits"]
    assert limits["RLIMIT_CORE"] == [0, 0]
    assert limits["RLIMIT_NOFILE"][0] <= 1024
    if cpu_limited:  # the batch's budget: max(the child's 30 s, the batch's 60 s deadline), plus 1 s
        assert 0 < limits["RLIMIT_CPU"][0] <= 62
    else:  # as the worker's
        assert limits["RLIMIT_CPU"][0] == resource.getrlimit(resource.RLIMIT_CPU)[0]


def test_a_fresh_ncu_batch_starts_with_no_secret_and_the_childs_limits(fake_ncu: Path) -> None:
    profiler = NcuProfiler(lambda: frozenset({"kf_a"}), standby=False, limits=ChildLimits(cpu_seconds=30.0))
    outcomes = profiler.profile([target("kf_a"), target("kf_b")], 60.0)
    profiler.close()
    assert [o.error for o in outcomes] == ["not profiled", "not profiled"]  # the fake matched no kernel
    (record,) = records(fake_ncu, "fresh")
    assert_confined(record, fake_ncu, cpu_limited=True)
    assert os.environ["DATABASE_URL"] == SECRETS["DATABASE_URL"]  # the worker keeps its own environment


def test_the_standby_ncu_starts_with_no_secret_and_gets_a_cpu_budget_with_its_batch(fake_ncu: Path) -> None:
    profiler = NcuProfiler(lambda: frozenset({"kf_a"}), standby=True, limits=ChildLimits(cpu_seconds=30.0))
    try:
        profiler.start_standby()
        deadline = time.monotonic() + 60
        while not profiler.ready():
            assert time.monotonic() < deadline, "the standby fake ncu never became ready"
            time.sleep(0.05)
        outcomes = profiler.profile([target("kf_a")], 60.0)
        assert outcomes[0].error == "not profiled"
    finally:
        profiler.close()
    (start,) = records(fake_ncu, "standby-start")
    assert_confined(start, fake_ncu, cpu_limited=False)  # it may wait for hours: the CPU budget comes with the batch
    (batch,) = records(fake_ncu, "standby-batch")
    assert_confined(batch, fake_ncu, cpu_limited=True)
