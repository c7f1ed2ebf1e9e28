"""The measuring child's supervision, with a fake child (no GPU): a hang is killed at its deadline,
a death or a poisoned context gets a fresh child, and the next request succeeds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kernels import fake_child
from worker.cuda.isolation import MeasuringChild


@pytest.fixture
def child() -> Iterator[MeasuringChild]:
    c = MeasuringChild(target=fake_child.serve, start_timeout_s=60)
    yield c
    c.close()


def test_hang_times_out_and_next_request_succeeds(child: MeasuringChild) -> None:
    first = child.ask({"op": "echo"}, 30)["pid"]
    reply = child.ask({"op": "hang"}, 1.0)
    assert reply["kind"] == "timeout"
    after = child.ask({"op": "echo"}, 30)
    assert after["status"] == "ok" and after["pid"] != first


@pytest.mark.parametrize("op", ["die", "poison"])
def test_dead_or_poisoned_child_is_replaced(child: MeasuringChild, op: str) -> None:
    reply = child.ask({"op": op}, 30)
    assert reply["kind"] == "crash"
    assert child.ask({"op": "echo"}, 30)["status"] == "ok"


def test_lost_lease_abandons_the_measurement(child: MeasuringChild) -> None:
    reply = child.ask({"op": "hang"}, 30, keep_alive=lambda: False)
    assert "lease lost" in reply["message"]
    assert child.ask({"op": "echo"}, 30)["status"] == "ok"


def test_interrupt_replaces_the_child(child: MeasuringChild) -> None:
    first = child.ask({"op": "echo"}, 30)["pid"]

    def interrupt() -> bool:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        child.ask({"op": "hang"}, 30, keep_alive=interrupt)
    assert child.ask({"op": "echo"}, 30)["pid"] != first
