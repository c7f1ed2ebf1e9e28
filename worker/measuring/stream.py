"""A stream of requests measured on the measuring child, pipelined.

The next request is queued on the child before this one's reply is awaited, so the GPU keeps
measuring while the caller stores a result; the next request is pulled from the caller (and staged:
its compile may still run) only after this one was sent. A request lost with a replaced child (it
was queued behind one that crashed) is sent again to the fresh child.

A backend supplies its steps (:class:`ChildSteps`): what happens before the GPU (validity, the
compiled artifact, the child's message), the device's clocks, and the roofline metrics of a timing.
The reply becomes a :class:`~kernelfarm.core.measurement.Measurement` here, the same for every backend.

Anything else asked of the child (its ceilings) must be asked before a stream starts: the child
answers in order, and a request sent while others are queued would overtake them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kernelfarm.core.measurement import Measurement, TimingStats
from kernelfarm.core.objectives import ENERGY_MISSING
from kernelfarm.core.states import FailureKind
from kernelfarm.worker.backends.base import KeepAlive, MeasureRequest
from kernelfarm.worker.measuring.energy import ENERGY_METRICS
from kernelfarm.worker.measuring.supervisor import MeasuringChild

# Reply fields kept as metrics when the child sent them.
_REPLY_METRICS = (
    "child_s", "child_started_at", "data_s", "rel_error", "element_error", "max_abs_error", "max_rel_error",
    "second_seed", "second_seed_rel_error", "second_seed_element_error", "second_seed_max_abs_error",
    "second_seed_max_rel_error", *ENERGY_METRICS, ENERGY_MISSING, "energy_s",
)  # fmt: skip


@dataclass(frozen=True)
class Staged:
    """A request ready for the child: its message, and what its Measurement will carry."""

    message: dict[str, Any]  # op "measure": kernel, problem, config, seed, artifact, policy
    provenance: dict[str, Any]
    metrics: dict[str, Any]  # known before the GPU: compile time, compile wait, ptxas resources, ...


class ChildSteps(Protocol):
    """The backend's part of measuring a stream on the child."""

    def stage(self, request: MeasureRequest) -> Measurement | Staged:
        """Everything before the GPU (may wait for the request's compile).

        Returns:
            The child's request, or the Measurement of a failure that ends the trial here (an
            invalid config, a compile error).
        """
        ...

    def clocks(self) -> dict[str, Any]:
        """The device's clocks, read before a reply is awaited and after it arrived (provenance)."""
        ...

    def roofline(self, request: MeasureRequest, timing: TimingStats) -> dict[str, Any]:
        """Metrics that place a verified timing under the GPU's ceilings."""
        ...


def measure_on_child(
    child: MeasuringChild,
    requests: Iterable[tuple[MeasureRequest, KeepAlive]],
    steps: ChildSteps,
    timeout_s: float,
) -> Iterator[Measurement]:
    """Measure (request, lease check) pairs in order, yielding each result as soon as the child answers.

    Args:
        child: the measuring child (started on first use).
        requests: pulled lazily, one ahead of the request being measured.
        steps: the backend's stage, clocks and roofline.
        timeout_s: per request, from when the child reaches it; then it counts as hung.

    Returns:
        An iterator of one Measurement per request, in order. Never raises for a bad config.
    """
    source = iter(requests)
    pulled: list[tuple[MeasureRequest, KeepAlive]] = []
    staged: dict[int, Measurement | Staged] = {}

    def stage(index: int) -> Measurement | Staged | None:
        while len(pulled) <= index:
            pair = next(source, None)
            if pair is None:
                return None
            pulled.append(pair)
        if index not in staged:
            staged[index] = steps.stage(pulled[index][0])
        return staged[index]

    sent: dict[int, _Sent] = {}
    i = 0
    while (entry := stage(i)) is not None:
        if isinstance(entry, Staged):
            # This request and the next one queued on the child (again, after a replaced child
            # lost them).
            for j in (i, i + 1):
                queued = stage(j)
                if isinstance(queued, Staged) and (j not in sent or not child.in_flight(sent[j].sequence)):
                    sent[j] = _Sent(child.send(queued.message), time.perf_counter())
            clocks_before = steps.clocks()
            reply = child.receive(sent[i].sequence, timeout_s, pulled[i][1])
            assert reply is not None  # the oldest request in flight cannot have been lost
            sent[i].answered = time.perf_counter()
            # The child starts a queued request once it has answered the one before it.
            previous = sent.get(i - 1)
            started = max(sent[i].at, previous.answered if previous is not None else 0.0)
            provenance = entry.provenance | {
                "clocks_before": clocks_before,
                "clocks_after": steps.clocks(),
                **child.environment,
            }
            entry = measurement_from_reply(pulled[i][0], entry, reply, sent[i].answered - started, provenance, steps)
        yield entry  # a Measurement: measured, or failed before reaching the GPU
        i += 1


def measurement_from_reply(
    request: MeasureRequest, staged: Staged, reply: Mapping[str, Any], wall_s: float,
    provenance: dict[str, Any], steps: ChildSteps,
) -> Measurement:  # fmt: skip
    """The child's reply as a Measurement: the time split, the resources, the roofline of a verified
    timing, or the failure the child reported."""
    metrics = staged.metrics | {
        "measure_wall_s": wall_s,
        "gpu_s": reply.get("gpu_s", 0.0),
        **dict(reply.get("resources", {})),
    }
    for key in _REPLY_METRICS:
        if key in reply:
            metrics[key] = reply[key]
    if reply.get("status") != "ok":
        kind = FailureKind(reply.get("kind", FailureKind.CRASH.value))
        return Measurement.failed(kind, str(reply.get("message", "")), metrics=metrics, provenance=provenance)
    timing = TimingStats.from_times(reply["times_ms"])
    metrics |= steps.roofline(request, timing)
    return Measurement(timing=timing, verified=True, metrics=metrics, provenance=provenance)


@dataclass
class _Sent:
    sequence: int
    at: float  # perf_counter when it was sent to the child
    answered: float = 0.0  # perf_counter when its reply arrived
