"""The measuring child runs user code with nothing worth stealing and with limits (worker/measuring/
sandbox.py), proved with the fake child, which is confined exactly as the real one: user code in it
(what an uploaded Python reference or a plugin kernel runs) finds no secret in its environment,
cannot read the parent's, has no network where the host allows namespaces, and a spinning, hanging
or memory-hungry kernel fails only its own request."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator

import pytest

from kernelfarm.worker.cuda.loader import CubinLoader
from kernelfarm.worker.measuring import fake_child
from kernelfarm.worker.measuring.child import ChildConfig
from kernelfarm.worker.measuring.sandbox import ChildLimits
from kernelfarm.worker.measuring.supervisor import MeasuringChild

SECRETS = {
    "DATABASE_URL": "postgresql://farm:hunter2@db/kernelfarm",
    "REDIS_URL": "redis://:hunter2@broker:6379/0",
    "KERNELFARM_API_TOKEN": "kf_secret-token-value",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
}
STEAL_ENVIRONMENT = """
import os
own = dict(os.environ)
try:
    with open(f"/proc/{os.getppid()}/environ", "rb") as handle:
        parent = handle.read().decode(errors="replace")
except OSError as exc:
    parent = "unreadable: " + type(exc).__name__
result = {"own": own, "parent": parent}
"""


@pytest.fixture
def secrets_in_parent(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def start(limits: ChildLimits) -> MeasuringChild:
    return MeasuringChild(ChildConfig(CubinLoader(), limits=limits), target=fake_child.serve, start_timeout_s=60)


@pytest.fixture
def child() -> Iterator[MeasuringChild]:
    c = start(ChildLimits(cpu_seconds=2.0, address_space_bytes=2 << 30, open_files=64))
    yield c
    c.close()


def test_user_code_finds_no_secret_in_its_or_the_parents_environment(
    child: MeasuringChild, secrets_in_parent: dict[str, str]
) -> None:
    reply = child.ask({"op": "python", "code": STEAL_ENVIRONMENT}, 30)
    assert reply["status"] == "ok", reply
    own, parent = reply["result"]["own"], reply["result"]["parent"]
    for name, value in secrets_in_parent.items():
        assert name not in own
        assert value not in str(own)
        assert value not in parent, f"the child read {name} from the parent's /proc environ"
    assert parent.startswith("unreadable")
    assert "PATH" in own  # it still runs: what the runtime needs to find its files is kept
    # the parent's own environment is intact after the child started
    assert os.environ["DATABASE_URL"] == secrets_in_parent["DATABASE_URL"]


def test_user_code_has_no_network_where_the_host_allows_namespaces(child: MeasuringChild) -> None:
    child.ask({"op": "echo"}, 30)  # started: its confinement is known
    if child.environment["sandbox"]["network"] != "isolated":
        pytest.skip(f"this host keeps the child on the network: {child.environment['sandbox']['network']}")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed at the end of the test
            accepted.append(listener.accept())

    threading.Thread(target=accept, daemon=True).start()
    port = listener.getsockname()[1]
    code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    result = "connected"
except OSError as exc:
    result = "refused: " + type(exc).__name__
"""
    try:
        reply = child.ask({"op": "python", "code": code}, 30)
    finally:
        listener.close()
    assert reply["status"] == "ok", reply
    assert reply["result"].startswith("refused"), reply["result"]
    assert not accepted
    assert child.environment["sandbox"]["uid"] != os.getuid()  # an unmapped, unprivileged user


def test_limits_are_applied_in_the_child(child: MeasuringChild) -> None:
    code = """
import resource
names = ("RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_CPU")
result = {name: resource.getrlimit(getattr(resource, name))[0] for name in names}
"""
    reply = child.ask({"op": "python", "code": code}, 30)
    limits = reply["result"]
    assert limits["RLIMIT_CORE"] == 0
    assert limits["RLIMIT_NOFILE"] == 64
    assert limits["RLIMIT_AS"] == 2 << 30
    assert limits["RLIMIT_CPU"] > 0  # a per-request budget, set before each request


def test_a_spinning_kernel_is_ended_by_its_cpu_limit_and_the_next_request_runs(child: MeasuringChild) -> None:
    first = child.ask({"op": "echo"}, 30)["pid"]
    reply = child.ask({"op": "spin"}, 60)  # the deadline is far: the CPU limit ends it
    assert reply["kind"] == "crash" and "CPU time limit" in reply["message"], reply
    after = child.ask({"op": "echo"}, 30)
    assert after["status"] == "ok" and after["pid"] != first


def test_a_memory_hungry_kernel_fails_its_request_only(child: MeasuringChild) -> None:
    reply = child.ask({"op": "python", "code": "result = len(bytearray(4 << 30))"}, 30)
    assert reply["status"] == "failure" and "MemoryError" in reply["message"]
    assert child.ask({"op": "echo"}, 30)["status"] == "ok"


def test_a_hanging_kernel_fails_its_request_only(child: MeasuringChild) -> None:
    reply = child.ask({"op": "hang"}, 1.0)
    assert reply["kind"] == "timeout"
    assert child.ask({"op": "echo"}, 30)["status"] == "ok"
