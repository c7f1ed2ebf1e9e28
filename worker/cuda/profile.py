"""Nsight Compute in a separate process, one process for a batch of candidates.

ncu's start-up costs seconds per profiled process, so candidates are profiled in batches: one
``ncu`` run launches each candidate once (``kernelfarm.worker.cuda.profile_target``), with ``--clock-control
none`` (never change the GPU's clocks). Profiling never happens inside the timed loop.

ncu profiles only the kernels its name filter matches (:func:`kernel_filter`): exactly the entry
names of the kernels being profiled, taken from their CUDA implementations, so the kernels that
make inputs, poison outputs or compute references are not profiled, whatever the candidates are
called. A standby process must be started before its batch is known: it filters on a set of names
fixed at its start, and takes only batches within it (:meth:`StandbyProfiler.covers`).

A fresh ncu process took 3.2-4.4 s for a batch of one matmul_fp32 kernel on an H200 and 4.6-5.0 s
for five, so much of it is start-up. A worker therefore keeps a :class:`StandbyProfiler`: the next
ncu process, started ahead, whose target has imported CuPy, created its CUDA context and loaded its
libraries, and waits for a batch (1.7-1.9 s for one kernel, 3.0-3.4 s for five; see
benchmarks/gpu/ncu_batches.py). It launches nothing while it waits, but ncu's own process spins one CPU
core at 100 % for as long as its target runs, waiting included (measured on the H100 host: a full core for
as long as the farm sat idle, which slowed an eager model launched on the same host by up to half). So a
standby is *parked* once its target is ready: ncu's processes are stopped (SIGSTOP; the target keeps
polling for its batch) and continued when the batch is handed over. A target whose worker is gone
continues its process group (ncu's) before it exits, so a parked ncu never outlives its target.

The profile target runs user kernels, so ncu (and with it the target) is started like the measuring
child (docs/SECURITY.md, "Kernel trust"): with :func:`child_environment` (no database or broker URL,
no token), from a non-dumpable worker, with its limits (no core dumps, open files, a CPU budget per
batch: a standby, which may wait for hours, gets its budget with its batch), in a process group of
its own that a timeout kills whole. ncu and its target get no namespaces of their own: ncu's
injection library in the target reports to the ncu process, and the driver grants performance
counters by the host user's privileges.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelfarm.core.settings import child_environment
from kernelfarm.worker.measuring.sandbox import ChildLimits, limit_cpu_of_process_tree, make_undumpable, tool_limits

logger = logging.getLogger(__name__)

# metric -> short name stored in Measurement.metrics
METRICS: dict[str, str] = {
    "gpu__time_duration.sum": "ncu_duration_ns",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "launch__shared_mem_per_block_static": "static_shared_mem_per_block",
    "launch__shared_mem_per_block_dynamic": "dynamic_shared_mem_per_block",
    "dram__bytes_read.sum": "dram_bytes_read",
    "dram__bytes_write.sum": "dram_bytes_write",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
}
_SCALE = {
    "nsecond": 1.0,
    "usecond": 1e3,
    "msecond": 1e6,
    "second": 1e9,
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
}


@dataclass(frozen=True)
class ProfileTarget:
    """One candidate to profile: what the profile target needs to launch it once."""

    kernel: str
    problem: Mapping[str, Any]
    config: Mapping[str, Any]
    cubin: str
    seed: int
    entry: str  # the kernel's entry name: what ncu's filter matches
    kernel_version: int | None = None
    bundle: str | None = None  # an uploaded kernel's materialized bundle (the target has no database)


@dataclass(frozen=True)
class LoaderRef:
    """A backend's kernel loader for the profile target program: ``"module:Class"`` and the keyword
    arguments it is constructed with (JSON values)."""

    ref: str
    kwargs: Mapping[str, Any]


@dataclass(frozen=True)
class ProfileBatchResult:
    metrics: list[dict[str, Any] | None]  # per target, None when it was not profiled
    wall_s: float
    error: str | None = None


def find_ncu() -> str | None:
    return shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.path.exists(p)), None)


def kernel_filter(entries: Iterable[str]) -> str:
    """ncu's ``--kernel-name`` value that matches exactly these kernel names (anchored, escaped).

    Raises:
        ValueError: no names (a filter that matches nothing would profile nothing).
    """
    names = sorted(set(entries))
    if not names:
        raise ValueError("a kernel filter needs at least one kernel name")
    return "regex:^(" + "|".join(re.escape(name) for name in names) + ")$"


def ncu_command(
    ncu: str, report: str, job: str | Sequence[str], metrics: Sequence[str], entries: Iterable[str]
) -> list[str]:
    """The ncu command line that profiles the kernels named ``entries`` launched by the profile
    target running ``job`` (a job file, or the standby's ``--wait`` arguments)."""
    return [
        ncu,
        "--clock-control",
        "none",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        # The filter matches the function name without parameters (for an extern "C" kernel: its
        # entry name), which is ncu's default, stated so the filter's meaning does not depend on it.
        "--kernel-name-base",
        "function",
        "--kernel-name",
        kernel_filter(entries),
        "--metrics",
        ",".join(metrics),
        "--log-file",
        report,
        sys.executable,
        "-P",  # the worker's working directory must not shadow the package
        "-m",
        "kernelfarm.worker.cuda.profile_target",
        *([job] if isinstance(job, str) else job),
    ]


def batch_cpu_seconds(limits: ChildLimits, timeout_s: float) -> float | None:
    """A batch's CPU budget: the child's per-request budget, but never less than the batch's wall
    deadline (a busy single-threaded target then meets its deadline before its CPU limit)."""
    return None if limits.cpu_seconds is None else max(limits.cpu_seconds, timeout_s)


def start_ncu(command: Sequence[str], limits: ChildLimits, cpu_seconds: float | None, **popen: Any) -> subprocess.Popen:
    """Start ncu confined as the measuring child is (see the module docstring)."""
    make_undumpable()  # the target (same user) must not read this worker's /proc/<pid>/environ
    return subprocess.Popen(
        list(command),
        env=child_environment(),
        preexec_fn=tool_limits(limits, cpu_seconds),  # runs after fork: it makes system calls only
        start_new_session=True,  # ncu and its target in a group of their own: killed together
        **popen,
    )


def _target_pid(ready: Path) -> int | None:
    """The profile target's pid, which it writes into its ready file."""
    try:
        return int(ready.read_text())
    except (OSError, ValueError):
        return None


def _signal_ncu_processes(pid: int, target: int | None, signum: int) -> list[int]:
    """Send ``signum`` to ncu's processes (``pid``, the one started, and what it started: the ``ncu``
    launcher may run the ncu binary as a child) but not to the profile target (pid ``target``), which
    keeps polling for its batch and its worker; returns the pids signalled. Nothing is signalled when the
    target is not known: a stopped target could not see its worker go, and would never end."""
    import psutil

    if target is None:
        return []
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
    signalled = []
    for process in tree:
        if process.pid != target:
            with contextlib.suppress(psutil.Error, OSError):
                process.send_signal(signum)
                signalled.append(process.pid)
    return signalled


def kill_ncu(proc: subprocess.Popen) -> None:
    """Kill ncu and the target it launched (their process group)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def profile_batch(
    targets: Sequence[ProfileTarget],
    refs: Mapping[str, str] | None = None,
    device_ordinal: int = 0,
    timeout_s: float = 600.0,
    metrics: Sequence[str] = tuple(METRICS),
    loader: LoaderRef | None = None,
    limits: ChildLimits | None = None,
) -> ProfileBatchResult:
    """Profile ``targets`` in one fresh ncu process. Never raises for a profiler problem: the error
    is returned and the trials keep their timings without a profile.

    ``loader`` names the backend's kernel loader the target program launches with (default: the
    cuda backend's cubin loader); each target's ``cubin`` is then that loader's artifact.
    ``limits``: the measuring child's (default :class:`ChildLimits`); its CPU budget is per batch."""
    limits = limits or ChildLimits()
    start = time.perf_counter()
    ncu = find_ncu()
    if ncu is None:
        return ProfileBatchResult([None] * len(targets), 0.0, "ncu not found")
    with tempfile.TemporaryDirectory(prefix="kf-ncu-") as tmp:
        paths = _BatchPaths(Path(tmp))
        paths.job.write_text(_job_text(targets, refs, device_ordinal, paths, loader))
        entries = [target.entry for target in targets]
        proc = start_ncu(
            ncu_command(ncu, str(paths.report), str(paths.job), list(metrics), entries),
            limits,
            batch_cpu_seconds(limits, timeout_s),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_ncu(proc)
            proc.communicate()
            return ProfileBatchResult([None] * len(targets), time.perf_counter() - start, "ncu timed out")
        return _collect(paths, len(targets), proc.returncode, stderr or stdout, start)


class StandbyProfiler:
    """An ncu process started ahead of need (see the module docstring). :meth:`run` hands it one
    batch; it then exits and a new standby is started for the next batch.

    The target waits for ``job.json`` to appear in its directory (written atomically). It exits on
    its own if the worker process that started it is gone, or its directory is removed. Once the
    target is ready, ncu's process is parked (stopped) until :meth:`run` (module docstring).
    """

    # How long the parking thread waits for the target to be ready (a cold start imports CuPy and,
    # for the triton backend, torch under ncu), and how often it looks.
    PARK_WAIT_S = 600.0
    PARK_POLL_S = 0.2

    def __init__(
        self, ncu: str, entries: Iterable[str], refs: Mapping[str, str] | None = None, device_ordinal: int = 0,
        metrics: Sequence[str] = tuple(METRICS), loader: LoaderRef | None = None, limits: ChildLimits | None = None,
        parent_pid: int | None = None, park: bool = True,
    ) -> None:  # fmt: skip
        """
        Args:
            ncu: the ncu executable.
            entries: the kernel names its filter matches, fixed now: every kernel the worker may
                be asked to profile that is known at this point.
            refs: kernels outside the registry, by reference (see ``measuring.catalogue``).
            device_ordinal: the GPU (CUDA numbering).
            metrics: what ncu collects.
            loader: the backend's kernel loader (default: the cuda backend's); the waiting target
                warms it up before it says it is ready.
            limits: the measuring child's (default :class:`ChildLimits`); the CPU budget is given
                per batch, when :meth:`run` hands one over.
            parent_pid: the process whose end makes the waiting target exit (default: this one).
            park: stop ncu's process while the ready target waits (see the module docstring).
        """
        self.refs, self.device_ordinal, self.loader = dict(refs or {}), device_ordinal, loader
        self.limits = limits or ChildLimits()
        self.entries = frozenset(entries)
        self.paths = _BatchPaths(Path(tempfile.mkdtemp(prefix="kf-ncu-standby-")))
        if loader is not None:
            (self.paths.root / "loader.json").write_text(json.dumps(loader.__dict__))
        self._log = (self.paths.root / "ncu.out").open("w")
        wait = ["--wait", str(self.paths.root), str(device_ordinal), str(parent_pid or os.getpid())]
        self._proc = start_ncu(
            ncu_command(ncu, str(self.paths.report), wait, list(metrics), self.entries),
            self.limits,
            None,  # it may wait for hours: the CPU budget comes with its batch (run)
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._lock = threading.Lock()  # parking against handing a batch over
        self._handed = False
        self.parked = False
        self._parked_pids: list[int] = []
        if park:
            threading.Thread(target=self._park_when_ready, name="ncu-standby-park", daemon=True).start()

    def _park_when_ready(self) -> None:
        deadline = time.monotonic() + self.PARK_WAIT_S
        while time.monotonic() < deadline and not self._handed and self.alive():
            if (self.paths.root / "ready").is_file():
                with self._lock:
                    if not self._handed and self.alive():
                        target = _target_pid(self.paths.root / "ready")
                        self._parked_pids = _signal_ncu_processes(self._proc.pid, target, signal.SIGSTOP)
                        self.parked = bool(self._parked_pids)
                return
            time.sleep(self.PARK_POLL_S)

    def _unpark(self) -> None:
        with self._lock:
            self._handed = True
            if self.parked:
                for pid in self._parked_pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
                self.parked = False

    def alive(self) -> bool:
        return self._proc.poll() is None

    def covers(self, entries: Iterable[str]) -> bool:
        """Does this standby's filter match every one of these kernel names?"""
        return self.entries.issuperset(entries)

    def ready(self) -> bool:
        """Started, and its target waiting for a batch (a batch handed over earlier just waits)."""
        return self.alive() and (self.paths.root / "ready").is_file()

    def run(self, targets: Sequence[ProfileTarget], timeout_s: float) -> ProfileBatchResult | None:
        """Profile ``targets``; None if this standby died before taking them (profile them with a
        fresh process instead)."""
        if not self.alive():
            output = (self.paths.root / "ncu.out").read_text(errors="replace")[-1500:]
            logger.warning("the standby ncu process exited early (code %s): %s", self._proc.returncode, output)
            self.close()
            return None
        start = time.perf_counter()
        self._unpark()  # before the target can see its batch: ncu follows it from the first launch
        budget = batch_cpu_seconds(self.limits, timeout_s)
        if budget is not None:  # before the target can see its batch
            limit_cpu_of_process_tree(self._proc.pid, budget)
        pending = self.paths.root / "job.json.tmp"
        pending.write_text(_job_text(targets, self.refs, self.device_ordinal, self.paths, self.loader))
        pending.rename(self.paths.job)
        try:
            returncode = self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.close()
            return ProfileBatchResult([None] * len(targets), time.perf_counter() - start, "ncu timed out")
        self._log.flush()
        output = (self.paths.root / "ncu.out").read_text(errors="replace")
        result = _collect(self.paths, len(targets), returncode, output, start)
        self.close()
        return result

    def close(self) -> None:
        self._unpark()  # the parking thread must not stop a process group being killed
        kill_ncu(self._proc)
        self._log.close()
        shutil.rmtree(self.paths.root, ignore_errors=True)


@dataclass(frozen=True)
class _BatchPaths:
    root: Path

    @property
    def job(self) -> Path:
        return self.root / "job.json"

    @property
    def launched(self) -> Path:
        return self.root / "launched.json"

    @property
    def report(self) -> Path:
        return self.root / "report.csv"


def _job_text(
    targets: Sequence[ProfileTarget], refs: Mapping[str, str] | None, device: int, paths: _BatchPaths,
    loader: LoaderRef | None = None,
) -> str:  # fmt: skip
    return json.dumps(
        {
            "targets": [t.__dict__ | {"problem": dict(t.problem), "config": dict(t.config)} for t in targets],
            "refs": dict(refs or {}),
            "device": device,
            "launched": str(paths.launched),
        }
        | ({"loader": loader.__dict__} if loader is not None else {})
    )


def _collect(paths: _BatchPaths, count: int, returncode: int, output: str, start: float) -> ProfileBatchResult:
    """Match ncu's rows to the targets the target program says it launched."""
    launched: list[int] = json.loads(paths.launched.read_text()) if paths.launched.is_file() else []
    text = paths.report.read_text() if paths.report.is_file() else ""
    rows = parse_ncu_csv(text)
    error = None
    if returncode != 0 or len(rows) != len(launched):
        error = (
            f"ncu exit {returncode}; {len(rows)} profiled kernels for {len(launched)} launches; "
            f"{output[-1500:]} {text[-500:] if not rows else ''}"
        )
        logger.warning("ncu batch: %s", error)
    out: list[dict[str, Any] | None] = [None] * count
    for index, row in zip(launched, rows, strict=False):
        out[index] = row
    return ProfileBatchResult(out, time.perf_counter() - start, error)


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ``ncu --csv --page raw`` (one per kernel; a units row after the header) or of the
    long ``details`` page (one per metric); returns per kernel {short metric name: value}."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if not lines:
        return []
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    header = table[0]
    if "Metric Name" in header:
        return _parse_long(header, table[1:])
    units = table[1] if len(table) > 1 and not (table[1] and table[1][0].strip().isdigit()) else None
    body = table[2:] if units else table[1:]
    kernels = []
    for row in body:
        values: dict[str, Any] = {}
        for j, column in enumerate(header):
            if column in METRICS and j < len(row):
                unit = units[j] if units and j < len(units) else ""
                values[METRICS[column]] = _number(row[j], unit)
        if "Kernel Name" in header:
            values["kernel_name"] = row[header.index("Kernel Name")]
        kernels.append(values)
    return kernels


def _parse_long(header: list[str], rows: list[list[str]]) -> list[dict[str, Any]]:
    col = {name: header.index(name) for name in ("ID", "Metric Name", "Metric Unit", "Metric Value")}
    by_id: dict[str, dict[str, Any]] = {}
    for row in rows:
        metric = row[col["Metric Name"]]
        entry = by_id.setdefault(row[col["ID"]], {})
        if metric in METRICS:
            entry[METRICS[metric]] = _number(row[col["Metric Value"]], row[col["Metric Unit"]])
    return [by_id[k] for k in sorted(by_id, key=lambda v: int(v) if v.isdigit() else 0)]


def _number(text: str, unit: str = "") -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value * _SCALE.get(unit.strip().lower(), 1.0)
