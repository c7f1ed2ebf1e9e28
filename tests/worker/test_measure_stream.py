"""The pipelined measure stream (worker/measuring/stream.py) on a fake child, no GPU: requests are
queued one ahead on the child, a request lost with a crashed child is sent again to a fresh one,
and every reply becomes a Measurement with its time split, provenance and roofline."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.states import FailureKind
from kernelfarm.worker.backends.base import KeepAlive, MeasureRequest
from kernelfarm.worker.cuda.loader import CubinLoader
from kernelfarm.worker.measuring import fake_child
from kernelfarm.worker.measuring.child import ChildConfig
from kernelfarm.worker.measuring.stream import Staged, measure_on_child
from kernelfarm.worker.measuring.supervisor import MeasuringChild


class Steps:
    """Stages each request as the fake child's message. Config {"fake": ...} picks its fault,
    {"invalid": 1} fails before the child, {"compile_s": t} takes t seconds to stage."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def stage(self, request: MeasureRequest) -> Measurement | Staged:
        self.events.append(f"stage {request.seed}")
        time.sleep(request.config.get("compile_s", 0.0))
        if request.config.get("invalid"):
            return Measurement.failed(FailureKind.CONSTRAINT, "invalid", provenance={"backend": "test"})
        message = {"op": "measure", "seed": request.seed, "fake": request.config.get("fake")}
        return Staged(message, {"backend": "test", "seed": request.seed}, {"compile_s": 0.5})

    def clocks(self) -> dict[str, Any]:
        return {"sm_clock_mhz": 1980}

    def roofline(self, request: MeasureRequest, timing: TimingStats) -> dict[str, Any]:
        return {"flops": 1.0, "bytes": 2.0}


def request(seed: int, **config: Any) -> MeasureRequest:
    return MeasureRequest("k", {}, config, profile=False, seed=seed)


@pytest.fixture
def child() -> Iterator[MeasuringChild]:
    c = MeasuringChild(ChildConfig(CubinLoader()), target=fake_child.serve, start_timeout_s=60)
    yield c
    c.close()


def test_a_verified_reply_becomes_a_measurement_with_time_split_provenance_and_roofline(child: MeasuringChild) -> None:
    (m,) = measure_on_child(child, [(request(1), None)], Steps(), timeout_s=30)
    assert m.verified and m.timing is not None
    assert m.timing.times_ms == fake_child.FAKE_TIMES_MS
    assert m.metrics["compile_s"] == 0.5 and m.metrics["registers"] == 1
    assert m.metrics["gpu_s"] <= m.metrics["child_s"] and m.metrics["measure_wall_s"] > 0
    assert m.metrics["flops"] == 1.0
    assert m.provenance["clocks_before"] == m.provenance["clocks_after"] == {"sm_clock_mhz": 1980}
    assert m.provenance["pid"] == child.pid and m.provenance["seed"] == 1


def test_the_next_request_is_pulled_and_sent_before_this_reply_is_awaited(child: MeasuringChild) -> None:
    steps = Steps()
    pulled: list[int] = []

    def pairs() -> Iterator[tuple[MeasureRequest, KeepAlive]]:
        for seed in (1, 2, 3):
            pulled.append(seed)
            yield request(seed), None

    stream = measure_on_child(child, pairs(), steps, timeout_s=30)
    first = next(stream)
    assert first.verified
    assert pulled == [1, 2]  # the second was staged and queued while the first was measured
    assert [m.verified for m in stream] == [True, True]
    assert steps.events == ["stage 1", "stage 2", "stage 3"]


@pytest.mark.parametrize("next_compile_s", [0.0, 1.0])
def test_a_crash_fails_only_its_request_and_the_queued_one_is_sent_again(
    child: MeasuringChild, next_compile_s: float
) -> None:
    # With a slow stage after the crash, the child is dead before the next request is sent.
    requests = [request(1), request(2, fake="die"), request(3, compile_s=next_compile_s), request(4, invalid=1),
                request(5)]  # fmt: skip
    results = list(measure_on_child(child, ((r, None) for r in requests), Steps(), timeout_s=30))
    assert [m.failure for m in results] == [None, FailureKind.CRASH, None, FailureKind.CONSTRAINT, None]
    assert "died without a reply" in (results[1].failure_message or "")
    # Whether the crash was found while awaiting its reply or when the next request was sent
    # (a race), the request after it is measured by a fresh child.
    assert results[2].provenance["pid"] != results[0].provenance["pid"]  # measured by the fresh child


def test_a_hang_is_a_timeout_and_the_stream_goes_on(child: MeasuringChild) -> None:
    requests = [request(1, fake="hang"), request(2)]
    results = list(measure_on_child(child, ((r, None) for r in requests), Steps(), timeout_s=1.0))
    assert [m.failure for m in results] == [FailureKind.TIMEOUT, None]


def test_a_child_that_dies_just_before_a_send_is_replaced_and_the_request_goes_to_the_new_one(
    child: MeasuringChild, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race the liveness check cannot close: the child is dead (its end of the pipe closed) but was
    # still alive when send() looked. The write's BrokenPipeError is that child's death, not an error.
    assert child.ask({"op": "measure", "seed": 1, "fake": None}, 30)["status"] == "ok"
    process = child._process
    assert process is not None
    process.kill()
    process.join(5)
    monkeypatch.setattr(process, "is_alive", lambda: True)  # looked alive when send() checked
    sequence = child.send({"op": "measure", "seed": 2, "fake": None})
    reply = child.receive(sequence, 30)
    assert reply is not None and reply["status"] == "ok", reply
    assert child.restarts == 1 and child._process is not process
