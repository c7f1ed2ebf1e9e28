"""The pool of compile processes every GPU backend compiles ahead in (NVRTC for cuda, Triton for triton).

Why a process pool: a compile takes 0.1-7 s of one CPU core; compiling the next candidates on the
host's other cores while the GPU measures the current one keeps the GPU busy. Compiling needs no
CUDA context, so the pool's processes never touch the GPU. A backend supplies the compile function
(job, cache directory) -> result and its processes' start-up (a throw-away compile, see
``worker/cuda/compiler.py``); this module owns the processes, their start and de-duplication by key.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from kernelfarm.worker.measuring.sandbox import start_confined


class Keyed(Protocol):
    """A compile job: its key hashes everything the compiled kernel depends on."""

    @property
    def key(self) -> str: ...


JobT = TypeVar("JobT", bound=Keyed)
ResultT = TypeVar("ResultT")


def _start(initializer: Callable[..., None], args: tuple[Any, ...], warmed: Synchronized[int]) -> None:
    """Initializer of a pool process: lower priority (the measuring path on the same cores must never
    wait behind a compile for a CPU), then the backend's own start-up, then counted as started."""
    with contextlib.suppress(OSError):
        os.nice(10)
    initializer(*args)
    with warmed.get_lock():
        warmed.value += 1


def _noop() -> None:
    """Submitted once per pool process so that all of them start (and warm up) at once."""


class ProcessCompilePool(Generic[JobT, ResultT]):
    """Compile jobs ahead on ``workers`` processes; ``submit`` de-duplicates by the job's key."""

    def __init__(
        self, cache_dir: Path, workers: int | None, compile: Callable[[JobT, str], ResultT],
        initializer: Callable[..., None], initargs: tuple[Any, ...] = (),
    ) -> None:  # fmt: skip
        """
        Args:
            cache_dir: where compiled kernels are kept, shared by a host's workers (created).
            workers: processes; default: all cores but one.
            compile: compiles one job into ``cache_dir`` (or finds it there); a module-level function
                (it is sent to the processes). Never raises for a bad config.
            initializer: each process's start-up, called with ``initargs`` (module-level too).
            initargs: its arguments.
        """
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.workers = workers or max(1, (os.cpu_count() or 2) - 1)
        self._compile = compile
        # spawn: the pool's processes must never inherit a CUDA context (or a lock held at fork).
        context = multiprocessing.get_context("spawn")
        self._warmed = context.Value("i", 0)  # pool processes that have finished starting
        self._executor = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=context,
            initializer=_start,
            initargs=(initializer, initargs, self._warmed),
        )
        self._futures: dict[str, Future[ResultT]] = {}
        # Start the processes now: spawning one, loading the compiler and its first compile take about
        # a second, which would otherwise delay the first job's first kernels. The executor starts a
        # process per submitted task while none is idle, so one task each starts them all.
        # Confined as the measuring child is started (sandbox.py): the processes compile uploaded
        # source, and what NVRTC reads through an #include is quoted in its log, the trial's stored
        # failure; an include of /proc/self/environ (refused at upload, the first line) would find
        # no database URL or token there, nor could it read the worker's own /proc files.
        with start_confined():
            for _ in range(self.workers):
                self._executor.submit(_noop)

    def wait_started(self, timeout: float) -> bool:
        """Wait until every process has started (and compiled its warm-up kernel); False if some
        had not within ``timeout`` seconds (they are then still starting: nothing is lost)."""
        deadline = time.monotonic() + timeout
        while self._warmed.value < self.workers:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def submit(self, job: JobT) -> Future[ResultT]:
        future = self._futures.get(job.key)
        if future is None:
            future = self._executor.submit(self._compile, job, str(self.cache_dir))
            self._futures[job.key] = future
        return future

    def done(self, job: JobT) -> bool:
        """Submitted and finished (a compiled kernel or a compile error is waiting)."""
        future = self._futures.get(job.key)
        return future is not None and future.done()

    def result(self, job: JobT) -> ResultT:
        return self.submit(job).result()

    def forget(self, job: JobT) -> None:
        self._futures.pop(job.key, None)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
