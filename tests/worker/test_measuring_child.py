"""The measuring child's supervision (worker/measuring/supervisor.py), with a fake child (no GPU): a
hang is killed at its deadline, a death or a poisoned context gets a fresh child, and the next
request succeeds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelfarm.worker.cuda.loader import CubinLoader
from kernelfarm.worker.measuring import fake_child
from kernelfarm.worker.measuring.child import ChildConfig
from kernelfarm.worker.measuring.supervisor import MeasuringChild


@pytest.fixture
def child() -> Iterator[MeasuringChild]:
    c = MeasuringChild(ChildConfig(CubinLoader()), target=fake_child.serve, start_timeout_s=60)
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


def test_pipelined_requests_are_answered_in_order_by_one_child(child: MeasuringChild) -> None:
    first = child.send({"op": "echo"})
    second = child.send({"op": "echo"})
    assert child.in_flight(first) and child.in_flight(second)
    one, two = child.receive(first, 30), child.receive(second, 30)
    assert one is not None and two is not None
    assert (one["seq"], two["seq"]) == (first, second) and one["pid"] == two["pid"]
    assert not child.in_flight(first) and not child.in_flight(second)


def test_a_replaced_child_loses_the_queued_request_and_it_can_be_sent_again(child: MeasuringChild) -> None:
    hung = child.send({"op": "hang"})
    queued = child.send({"op": "echo"})
    reply = child.receive(hung, 1.0)
    assert reply is not None and reply["kind"] == "timeout"
    assert child.receive(queued, 30) is None  # it died with the killed child
    again = child.receive(child.send({"op": "echo"}), 30)
    assert again is not None and again["status"] == "ok"


def _wait_until_dead(child: MeasuringChild) -> None:
    import time

    import psutil

    deadline = time.monotonic() + 30
    while child.pid is not None and psutil.pid_exists(child.pid) and time.monotonic() < deadline:
        if psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE:
            return
        time.sleep(0.02)


@pytest.mark.parametrize("op", ["die", "poison"])
def test_a_child_found_dead_when_the_next_request_is_sent_still_answers_what_was_queued(
    child: MeasuringChild, op: str
) -> None:
    # The parent compiles the next request while the child crashes on this one: the crash is found
    # only when the next one is sent. The request it died on still gets its failure.
    # The child is held for a second first, so that all three are queued before it dies: on a loaded
    # machine it once died of the fatal one before `lost` was sent, and `lost` went to its replacement.
    held = child.send({"op": "python", "code": "import time\ntime.sleep(1.0)"})
    answered = child.send({"op": "echo"})
    fatal = child.send({"op": op})
    lost = child.send({"op": "echo"})
    _wait_until_dead(child)
    after = child.send({"op": "echo"})  # replaces the dead child
    assert child.restarts == 1
    assert child.in_flight(answered) and child.in_flight(fatal) and not child.in_flight(lost)
    waited = child.receive(held, 30)
    assert waited is not None and waited["status"] == "ok"
    first = child.receive(answered, 30)
    assert first is not None and first["status"] == "ok"
    crash = child.receive(fatal, 30)
    assert crash is not None and crash["kind"] == "crash"
    assert child.receive(lost, 30) is None  # queued behind the fatal one: send it again
    last = child.receive(after, 30)
    assert last is not None and last["status"] == "ok" and last["pid"] != first["pid"]
