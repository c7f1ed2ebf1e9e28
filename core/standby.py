"""Warm spares: a component started ahead of need and held at a gate until its supervisor needs it.

A killed replay worker's replacement needs 1.3-2.6 s from its spawn to serving (the interpreter, its
imports, its backend and the kernel catalogue), a killed coordinator's 3.5-5 s (the strategies bring
SciPy and scikit-optimize); docs/RELIABILITY.md has the figures. A spare pays for all of that ahead of
time and stops at the gate just before it would show itself to the farm: a GPU worker before it
connects to its queue, registers or warms its device up (a spare of a GPU worker holds no device
context), the coordinator before it consumes its queue and before its scheduler ticks. Its supervisor
opens the gate when the component it stands in for dies, and the spare serves within a few tenths of
a second. A spare whose supervisor is gone exits, so no spare outlives the supervisor that would have
opened its gate.

Both sides are here: :func:`spare_env` (the supervisor: the variables that make a component a spare,
read by the component through Settings), :func:`open_gate` (the supervisor: promote it) and
:func:`wait_at_gate` (the component, where it stops).
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kernelfarm.core.settings import Settings

logger = logging.getLogger(__name__)

# Settings.standby_gate and Settings.standby_supervisor_pid
GATE_ENV = "KERNELFARM_STANDBY_GATE"
SUPERVISOR_ENV = "KERNELFARM_STANDBY_SUPERVISOR_PID"
# How often a spare looks at its gate: a promoted spare starts at most this late, and ~100 stat()
# calls a second cost a waiting spare nothing measurable.
POLL_S = 0.01


def spare_env(gate: Path, supervisor_pid: int | None = None) -> dict[str, str]:
    """The environment that makes a component a spare held at ``gate`` (a file that does not exist
    yet), for the supervisor ``supervisor_pid`` (this process when None)."""
    return {GATE_ENV: str(gate), SUPERVISOR_ENV: str(supervisor_pid or os.getpid())}


def open_gate(gate: Path) -> None:
    """Promote the spare held at ``gate``: it goes on at its next look (or passes straight through,
    if it has not reached its gate yet)."""
    gate.parent.mkdir(parents=True, exist_ok=True)
    gate.touch()


@dataclass
class SpareDemand:
    """How many spares a supervisor keeps of one component: ``base``, plus one for each promotion in
    the last ``window_s`` seconds that found its spare still starting, up to ``most``.

    One spare covers a death every few seconds; deaths that come faster than a spare starts (a crash
    loop, a node shedding processes, the fault runs' bursts of 2-3 kills a second) found it still
    starting in about half the promotions, and each such replacement served 1-2 s late. The pool
    grows while that happens and shrinks back (:meth:`surplus`) once it has stopped for a window.
    """

    base: int
    most: int
    window_s: float = 60.0
    _late: deque[float] = field(default_factory=deque)

    def promoted(self, ready: bool, now: float | None = None) -> None:
        """A spare was promoted; ``ready``: it was at its gate (else still starting)."""
        if not ready:
            self._late.append(time.monotonic() if now is None else now)

    def wanted(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        while self._late and now - self._late[0] > self.window_s:
            self._late.popleft()
        return min(self.most, self.base + len(self._late))

    def surplus(self, held: int, now: float | None = None) -> int:
        """How many of ``held`` spares to stop: those beyond what is wanted now."""
        return max(0, held - self.wanted(now))


def beside_gate(settings: Settings, name: str) -> Path | None:
    """In a spare, a path of its own beside its gate (None in a component started normally). A spare
    coordinator keeps its scheduler's schedule file there: Celery beat opens that file before the gate,
    and the serving coordinator's scheduler holds its own open."""
    gate = settings.standby_gate
    return gate.with_name(f"{gate.name}.{name}") if gate else None


def standing_by(gate: Path) -> int:
    """How many processes of the spare held at ``gate`` wait there now (each leaves a mark beside the
    gate as it arrives: Celery has not set its logging up yet where a worker stops)."""
    return len(list(gate.parent.glob(f"{gate.name}.standing-*")))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process under that pid: ours is gone
        return False
    return True


def wait_at_gate(settings: Settings) -> None:
    """Return at once in a component started normally; in a spare, wait until its gate opens. A spare
    whose supervisor has died exits (status 0: nothing failed, nobody is left to promote it)."""
    gate = settings.standby_gate
    if gate is None:
        return
    supervisor = settings.standby_supervisor_pid
    started = time.monotonic()
    gate.parent.mkdir(parents=True, exist_ok=True)
    (gate.parent / f"{gate.name}.standing-{os.getpid()}").touch()
    logger.info("standing by as a spare until %s exists", gate)
    while not gate.exists():
        if supervisor and not _alive(supervisor):
            logger.warning("the supervisor (pid %d) is gone: this spare exits", supervisor)
            os._exit(0)
        time.sleep(POLL_S)
    logger.info("promoted after %.1f s as a spare", time.monotonic() - started)
