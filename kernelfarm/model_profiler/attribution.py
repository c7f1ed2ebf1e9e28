"""Two passes, one table: the times of a lightly profiled run, attributed to the operators and input
shapes that a fully recorded run saw.

Recording every operator with its shapes costs the host time per operator; a model whose inference is
bound by the host's launches (eager GPT-2) then runs far slower while recorded. So the times come from
a *timed* pass that records as little as it can (on a GPU: the device's own kernel records, no host
operators; on the CPU: operators without shapes), and the operator of each timed event comes from one
*recorded* inference (operators, shapes, and the operator that launched each kernel).

An inference launches the same sequence of kernels each time (same operators, same shapes, same
library heuristics), so the k-th event of every timed inference is the k-th event of the recorded one:
that is the attribution *by order*, checked name by name. Where the sequences differ (a model that
branches on data, a library that picks another kernel), the timed time of each event name is split
among the operators that launched that name in the recorded pass, in proportion to their recorded time:
the attribution *by name*. The report says which one was used.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

# An owner is (operator name, its input shapes as text): one row of the table.
Owner = tuple[str, str]

BY_ORDER = "by order"
BY_NAME = "by name"


@dataclass(frozen=True)
class TimedEvent:
    """One event of the timed pass: a kernel (GPU) or an operator (CPU)."""

    name: str
    us: float  # its (self) time
    start_us: float = 0.0  # on the device's clock; only the GPU pass has them
    end_us: float = 0.0


@dataclass(frozen=True)
class RecordedEvent:
    """One event of the recorded inference, with the operator it belongs to."""

    name: str
    us: float
    owner: Owner


@dataclass
class Attribution:
    method: str  # BY_ORDER or BY_NAME
    per_owner_us: dict[Owner, float]  # per inference
    per_event_us: dict[str, float]  # per inference, by event name (the GPU's kernel table)
    calls_per_event: dict[str, int]  # per inference
    busy_us: float  # per inference: the sum of the timed events
    # Per timed inference, from its first event's start to its last one's end (GPU, by order only).
    spans_us: list[float] = field(default_factory=list)


def attribute(
    sessions: list[list[TimedEvent]], *, inferences: int, skip: int, recorded: list[RecordedEvent]
) -> Attribution:
    """Attribute the timed sessions' events to the owners of ``recorded`` (one inference, in launch order).

    Each session holds ``skip`` warm-up inferences, then ``inferences`` timed ones, in launch order;
    the figures are per timed inference over all sessions."""
    if inferences < 1 or not sessions:
        raise ValueError("at least one session of at least one timed inference")
    n = len(recorded)
    total = skip + inferences
    if n and all(_follows(session, recorded, total) for session in sessions):
        timed = [event for session in sessions for event in session[skip * n :]]
        return _by_order(timed, inferences * len(sessions), recorded)
    return _by_name([event for session in sessions for event in session], total * len(sessions), recorded)


def _follows(session: list[TimedEvent], recorded: list[RecordedEvent], inferences: int) -> bool:
    """Whether ``session`` is ``inferences`` repeats of the recorded sequence, name by name."""
    n = len(recorded)
    return len(session) == n * inferences and all(e.name == recorded[i % n].name for i, e in enumerate(session))


def _by_order(timed: list[TimedEvent], inferences: int, recorded: list[RecordedEvent]) -> Attribution:
    n = len(recorded)
    owners: dict[Owner, float] = defaultdict(float)
    for i, event in enumerate(timed):
        owners[recorded[i % n].owner] += event.us / inferences
    spans = []
    for j in range(inferences):
        chunk = timed[j * n : (j + 1) * n]
        if chunk[-1].end_us > 0:
            spans.append(max(e.end_us for e in chunk) - min(e.start_us for e in chunk))
    return Attribution(BY_ORDER, dict(owners), *_event_table(timed, inferences), spans_us=spans)


def _by_name(timed: list[TimedEvent], inferences: int, recorded: list[RecordedEvent]) -> Attribution:
    # Every timed inference counts (the warm-up one too): without the order nothing tells them apart.
    recorded_us: dict[str, dict[Owner, float]] = defaultdict(lambda: defaultdict(float))
    for event in recorded:
        # a zero-length record still says who launched the name: weigh it by a tiny time
        recorded_us[event.name][event.owner] += max(event.us, 1e-9)
    per_event, calls, busy = _event_table(timed, inferences)
    owners: dict[Owner, float] = defaultdict(float)
    for name, us in per_event.items():
        launched_by = recorded_us.get(name)
        if not launched_by:  # not seen in the recorded inference: a row of its own, named by the event
            owners[(name, "[]")] += us
            continue
        weight = sum(launched_by.values())
        for owner, part in launched_by.items():
            owners[owner] += us * part / weight
    return Attribution(BY_NAME, dict(owners), per_event, calls, busy)


def _event_table(timed: list[TimedEvent], inferences: int) -> tuple[dict[str, float], dict[str, int], float]:
    per_event: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for event in timed:
        per_event[event.name] += event.us / inferences
        counts[event.name] += 1
    calls = {name: max(1, round(count / inferences)) for name, count in counts.items()}
    return dict(per_event), calls, sum(per_event.values())


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
