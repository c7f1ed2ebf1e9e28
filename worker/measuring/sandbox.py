"""The measuring child's confinement: it runs user code (uploaded kernels, their references, plugin
kernels), so it starts with nothing worth stealing and with limits on what it can take.

Parent side (:func:`start_confined`): the child is started with :func:`child_environment` (no
database or broker URL, no token: core/settings.py), and the parent makes itself non-dumpable, so the
child (same user) cannot read the parent's ``/proc/<pid>/environ`` or memory either.

Child side (:func:`enter`, first thing in the child's main loop, while it is still one thread):
resource limits (no core dumps, open files, address space where the backend allows it) and, where
the host allows unprivileged user namespaces, a new user and network namespace: the child then runs
as an unmapped ("nobody") user with no network interface but a downed loopback. A per-request CPU
budget (:func:`limit_cpu_for_request`) turns a spinning kernel into a dead child (a CRASH for that
trial) instead of a worker that waits for the deadline.

The ncu profiling path (worker/cuda/profile.py) runs user kernels too: ncu and the program it
launches are started with the same environment (:func:`child_environment`) and limits
(:func:`tool_limits`, :func:`limit_cpu_of_process_tree`), from a non-dumpable worker.

See docs/SECURITY.md, "Kernel trust".
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import psutil

from kernelfarm.core.settings import environment_for_children

logger = logging.getLogger(__name__)

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_DUMPABLE = 4


@dataclass(frozen=True)
class ChildLimits:
    """Attributes:
    cpu_seconds: CPU seconds one request may use (None: no limit); past it the kernel gets SIGXCPU.
    address_space_bytes: RLIMIT_AS (None: none; CUDA reserves address space for the whole GPU and
        more, so a CUDA child cannot have a tight one).
    open_files: RLIMIT_NOFILE.
    isolate_network: try a new user and network namespace (the child then has no network).
    """

    cpu_seconds: float | None = 120.0
    address_space_bytes: int | None = None
    open_files: int = 1024
    isolate_network: bool = True


def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def make_undumpable() -> None:
    """Make this process non-dumpable: its /proc files (environ, mem) become unreadable to other
    processes of the same user, such as a child running user code."""
    with contextlib.suppress(OSError, AttributeError):
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


@contextlib.contextmanager
def start_confined() -> Iterator[None]:
    """Around starting a child: the child inherits the reduced environment, and this process becomes
    non-dumpable (its /proc files become unreadable to other processes of the same user)."""
    make_undumpable()
    with environment_for_children():
        yield


def enter(limits: ChildLimits) -> dict[str, Any]:
    """Confine this (child) process. Call while it has one thread (before CUDA or any pool starts).

    Returns:
        What was applied, for the provenance of its measurements (``sandbox``).
    """
    applied: dict[str, Any] = {}
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    applied["core_dumps"] = False
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = limits.open_files if hard == resource.RLIM_INFINITY else min(limits.open_files, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, ceiling))
    applied["open_files"] = ceiling
    if limits.address_space_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.address_space_bytes, limits.address_space_bytes))
        applied["address_space_bytes"] = limits.address_space_bytes
    # the kernel refuses a new user namespace to a process with more than one thread (EINVAL)
    applied["threads_at_entry"] = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
    applied["network"] = _isolate_network() if limits.isolate_network else "shared (not asked)"
    applied["uid"] = os.getuid()
    return applied


def _isolate_network() -> str:
    libc = _libc()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        return f"shared (this host refuses unprivileged namespaces: {os.strerror(error)})"
    return "isolated"


def tool_limits(limits: ChildLimits, cpu_seconds: float | None) -> Callable[[], None]:
    """What a process started through a tool (ncu, which then starts the program that runs user
    code) applies right after fork, before exec (``subprocess.Popen(preexec_fn=...)``): ``limits``
    without the namespaces (see docs/SECURITY.md) and a CPU budget of ``cpu_seconds`` (None: none
    yet). The tool and what it starts inherit them. Built here, in the parent, so that the forked
    process only makes system calls."""
    confined = replace(limits, isolate_network=False, cpu_seconds=cpu_seconds)

    def apply() -> None:
        enter(confined)
        limit_cpu_for_request(confined)

    return apply


def limit_cpu_of_process_tree(pid: int, seconds: float) -> None:
    """Give process ``pid`` and every process it started ``seconds`` of CPU on top of what each has
    used (prlimit(2); for a process started earlier without a budget). A process that is gone, or
    refuses, is skipped."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for process in tree:
        with contextlib.suppress(psutil.Error, OSError):
            times = process.cpu_times()
            soft = int(times.user + times.system + seconds) + 1
            _, hard = resource.prlimit(process.pid, resource.RLIMIT_CPU)
            soft = soft if hard == resource.RLIM_INFINITY else min(soft, hard)
            resource.prlimit(process.pid, resource.RLIMIT_CPU, (soft, hard))


def limit_cpu_for_request(limits: ChildLimits) -> None:
    """Give the next request ``limits.cpu_seconds`` of CPU on top of what the child has used."""
    if limits.cpu_seconds is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft = int(used + limits.cpu_seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
