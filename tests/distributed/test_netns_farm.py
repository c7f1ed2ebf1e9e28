"""Workers on separate hosts, over real TCP: three network namespaces joined by veth pairs.

    srv  (API, coordinator, PostgreSQL, Redis)   10.213.1.1 ──veth── 10.213.1.2  wa (worker A)
                                                 10.213.2.1 ──veth── 10.213.2.2  wb (worker B)

Every address lives on the test's own veths inside the test's own namespaces, so no traffic
leaves them. A job is submitted over HTTP; in the middle of a trial on worker A, A's link is cut.
The farm must notice through the lease (A can no longer heartbeat), run that trial again on B,
and finish the job with every trial counted once. Needs root and ``ip netns``; skipped otherwise.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from kernelfarm import launcher
from kernelfarm.services import EmbeddedPostgres, wait_for
from kernelfarm.stack import ProcessInfo, alive, signal_group, spawn
from kernelfarm.testing.recordings import CONVOLUTION, RTX3090

# Run by path: the script imports only the installed package, so it needs no PYTHONPATH.
SERVERS_SCRIPT = Path(__file__).with_name("netns_servers.py")
CLONE_NEWNET = 0x40000000
API_PORT = 8000
# Fast clocks: a lost worker is reaped within seconds. Trials last 1 s so a cut lands mid-trial.
TIMINGS = {
    "KERNELFARM_HEARTBEAT_SECONDS": "0.5",
    "KERNELFARM_LEASE_SECONDS": "3",
    "KERNELFARM_WORKER_TTL_SECONDS": "3",
    "KERNELFARM_REAP_INTERVAL_SECONDS": "1",
    "KERNELFARM_REDISPATCH_AFTER_SECONDS": "8",
}
TRIAL_MS = 1000
BUDGET = 12


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=20)


def _netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"kfprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is not available here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Topology:
    """Three namespaces: srv, wa, wb; a veth pair from srv to each worker namespace."""

    srv: str
    workers: dict[str, str]  # worker namespace → the srv address it dials
    links: dict[str, str] = field(default_factory=dict)  # worker namespace → its veth name

    @classmethod
    def create(cls) -> Topology:
        tag = f"kf{os.getpid() % 100000}"
        topology = cls(srv=f"{tag}srv", workers={})
        _ip("netns", "add", topology.srv)
        _ip("-n", topology.srv, "link", "set", "lo", "up")
        for index, side in enumerate(("wa", "wb"), start=1):
            namespace = f"{tag}{side}"
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
            # Both ends are created inside their namespaces, so the names never meet the host's.
            _ip("link", "add", f"s{index}", "netns", topology.srv, "type", "veth", "peer", "name", f"v{index}",
                "netns", namespace)  # fmt: skip
            _ip("-n", topology.srv, "addr", "add", f"10.213.{index}.1/24", "dev", f"s{index}")
            _ip("-n", namespace, "addr", "add", f"10.213.{index}.2/24", "dev", f"v{index}")
            _ip("-n", topology.srv, "link", "set", f"s{index}", "up")
            _ip("-n", namespace, "link", "set", f"v{index}", "up")
            topology.workers[namespace] = f"10.213.{index}.1"
            topology.links[namespace] = f"v{index}"
        return topology

    def destroy(self) -> None:
        for namespace in [self.srv, *self.workers]:
            _ip("netns", "del", namespace, check=False)


class NamespacedHttp:
    """HTTP from this test into the srv namespace: one thread that joined srv's network namespace
    (setns changes only the calling thread), so its sockets are srv's; no host address is needed."""

    def __init__(self, namespace: str, token: str) -> None:
        self._pool = ThreadPoolExecutor(1, initializer=_join_netns, initargs=(namespace,))
        self._headers = {"Authorization": f"Bearer {token}"}

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = f"http://127.0.0.1:{API_PORT}{path}"
        return self._pool.submit(httpx.request, method, url, headers=self._headers, timeout=10, **kwargs).result()

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def _join_netns(namespace: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {namespace} failed")
    finally:
        os.close(fd)


@dataclass
class NetnsFarm:
    topology: Topology
    directory: Path
    token: str = ""
    pg_dir: str = ""
    redis_pid: int | None = None
    processes: list[ProcessInfo] = field(default_factory=list)

    def env(self, host: str) -> dict[str, str]:
        database_url, redis_url = f"postgresql+psycopg2://postgres@{host}:5432/postgres", f"redis://{host}:6379/0"
        return launcher.component_env(database_url, redis_url, overrides=TIMINGS)

    def start(self, name: str, namespace: str, host: str, argv: list[str]) -> ProcessInfo:
        # `ip netns exec` execs in place (no fork), so the pid is the component's own.
        info = spawn(name, ["ip", "netns", "exec", namespace, *argv], self.env(host), self.directory / "logs")
        self.processes.append(info)
        return info

    def start_servers(self) -> None:
        launched = subprocess.run(
            ["ip", "netns", "exec", self.topology.srv, sys.executable, str(SERVERS_SCRIPT), str(self.directory)],
            env=self.env("127.0.0.1"), capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert launched.returncode == 0, launched.stderr[-3000:]
        info = json.loads(launched.stdout.strip().splitlines()[-1])
        self.token, self.pg_dir, self.redis_pid = info["token"], info["pg_dir"], info["redis_pid"]

    def log(self, name: str) -> str:
        path = self.directory / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for info in reversed(self.processes):
            if alive(info.pid):
                signal_group(info.pid, 9)
        deadline = time.monotonic() + 10
        for info in self.processes:
            while alive(info.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.redis_pid and alive(self.redis_pid):
            signal_group(self.redis_pid, 9)
        if self.pg_dir:
            EmbeddedPostgres(Path(self.pg_dir)).stop("immediate")


@pytest.fixture
def netns_farm(tmp_path: Path) -> Iterator[NetnsFarm]:
    reason = _netns_unavailable()
    if reason:
        pytest.skip(reason)
    topology = Topology.create()
    farm = NetnsFarm(topology, tmp_path)
    try:
        yield farm
    finally:
        farm.stop()
        topology.destroy()


def _worker_argv(name: str) -> list[str]:
    return launcher.worker_argv(name, landscapes=[CONVOLUTION], sleep_ms=TRIAL_MS)


def _trials(http: NamespacedHttp, job_id: str) -> list[dict[str, Any]]:
    response = http.call("GET", f"/v1/jobs/{job_id}/trials", params={"limit": 1000})
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def _poll(predicate: Callable[[], Any], timeout: float, what: str, farm: NetnsFarm) -> Any:
    try:
        return wait_for(predicate, timeout, what, interval=0.2)
    except TimeoutError as exc:
        logs = "\n".join(f"--- {p.name}\n{farm.log(p.name)[-1500:]}" for p in farm.processes)
        raise AssertionError(f"{exc}\n{logs}") from None


def test_workers_in_other_namespaces_survive_a_cut_link(netns_farm: NetnsFarm) -> None:
    farm, topology = netns_farm, netns_farm.topology
    farm.start_servers()
    farm.start("api", topology.srv, "127.0.0.1", launcher.api_argv(API_PORT, host="0.0.0.0"))
    farm.start("coordinator", topology.srv, "127.0.0.1", launcher.coordinator_argv(farm.directory / "schedule"))
    (ns_a, host_a), (ns_b, host_b) = topology.workers.items()
    farm.start("worker-a", ns_a, host_a, _worker_argv("wa"))
    farm.start("worker-b", ns_b, host_b, _worker_argv("wb"))

    http = NamespacedHttp(topology.srv, farm.token)
    try:

        def two_live_workers() -> bool:
            try:
                listed = http.call("GET", "/v1/workers").json()
            except httpx.HTTPError:
                return False
            return isinstance(listed, list) and sum(1 for w in listed if w["live"]) >= 2

        _poll(two_live_workers, 60, "both workers to register over the veths", farm)
        created = http.call("POST", "/v1/jobs", json={"kernel": "convolution_kernel", "gpu_model": RTX3090,
                                                      "budget_trials": BUDGET, "parallelism": 2, "seed": 5,
                                                      "strategy": "random", "profile": "none"})  # fmt: skip
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]

        # Wait for A to be measuring a trial, past its first heartbeat, then cut A's only link.
        def running_on_a() -> dict[str, Any] | None:
            running = [t for t in _trials(http, job_id) if t["state"] == "running"]
            return next((t for t in running if (t["worker_name"] or "").startswith("wa@")), None)

        victim = _poll(running_on_a, 60, "a trial running on worker A", farm)
        time.sleep(TRIAL_MS / 1e3 / 4)
        _ip("-n", ns_a, "link", "set", topology.links[ns_a], "down")
        cut_at = time.monotonic()

        def job_finished() -> dict[str, Any] | None:
            job = http.call("GET", f"/v1/jobs/{job_id}").json()
            return job if job["state"] in ("complete", "failed", "cancelled") else None

        job = _poll(job_finished, 70, "the job to finish without worker A", farm)
        assert job["state"] == "complete", job["status_message"]
        assert time.monotonic() - cut_at > float(TIMINGS["KERNELFARM_LEASE_SECONDS"])  # A was really gone

        trials = _trials(http, job_id)
        assert len(trials) == BUDGET, "every trial counted once: no extra rows for the re-run"
        assert len({t["config_key"] for t in trials}) == BUDGET
        assert all(t["state"] in ("complete", "failed") for t in trials)
        assert job["progress"]["complete"] + job["progress"]["failed"] == BUDGET
        rerun = next(t for t in trials if t["id"] == victim["id"])
        # A's lease expired, the reaper re-queued the trial, and B measured it as attempt 2.
        assert rerun["state"] in ("complete", "failed")
        assert rerun["attempt"] == victim["attempt"] + 1, rerun
        assert rerun["worker_name"].startswith("wb@"), rerun
        # A finished nothing after the cut: trials it recorded all started before it.
        late_on_a = [t for t in trials if t["worker_name"].startswith("wa@") and t["id"] != victim["id"]
                     and t["started_at"] > rerun["started_at"]]  # fmt: skip
        assert not late_on_a, late_on_a
    finally:
        with contextlib.suppress(Exception):
            _ip("-n", ns_a, "link", "set", topology.links[ns_a], "up", check=False)
        http.close()
