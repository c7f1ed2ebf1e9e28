"""The cuda backend's Nsight Compute profiles: one ncu process per batch, the next one on standby.

A fresh ncu process costs seconds of start-up, so one is kept started and waiting (see
``profile.StandbyProfiler``): it is started with the worker's warm-up and again after each batch.
ncu fixes its kernel-name filter when it starts, before the batch is known, so the standby filters
on the entry names of every kernel the worker can name then (its catalogue, and kernels profiled
before). A batch with a kernel outside that filter is profiled by a fresh ncu process filtering on
the batch's own names, and the next standby's filter includes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from kernelfarm.worker.backends.base import ProfileOutcome
from kernelfarm.worker.cuda.profile import (
    LoaderRef,
    ProfileBatchResult,
    ProfileTarget,
    StandbyProfiler,
    find_ncu,
    profile_batch,
)
from kernelfarm.worker.measuring.sandbox import ChildLimits

logger = logging.getLogger(__name__)


class NcuProfiler:
    """Profiles batches of compiled candidates on one GPU, keeping a standby ncu process."""

    def __init__(
        self, catalogue_entries: Callable[[], frozenset[str]], refs: Mapping[str, str] | None = None,
        device_ordinal: int = 0, standby: bool = True, loader: LoaderRef | None = None,
        limits: ChildLimits | None = None,
    ) -> None:  # fmt: skip
        """
        Args:
            catalogue_entries: the entry names of every kernel the worker can name now (asked each
                time a standby starts).
            refs: kernels outside the registry, by reference, for ncu's target program.
            device_ordinal: the GPU (CUDA numbering).
            standby: keep a standby ncu process (GPU memory for an idle CUDA context).
            loader: the backend's kernel loader for the target program (default: the cuda
                backend's cubin loader).
            limits: what ncu and the target it launches run under (default: the measuring child's
                :class:`ChildLimits`; see ``profile``'s module docstring).
        """
        self.loader = loader
        self.limits = limits or ChildLimits()
        self.catalogue_entries = catalogue_entries
        self.refs = dict(refs or {})
        self.device_ordinal = device_ordinal
        self.standby = standby
        self._standby: StandbyProfiler | None = None
        self._profiled_entries: set[str] = set()  # kernels of batches so far: the next standby's too

    def start_standby(self) -> None:
        """Start the standby ncu process unless one is held (or standby is off, or there is no ncu)."""
        if self._standby is not None or not self.standby:
            return
        ncu = find_ncu()
        if ncu is None:
            return
        try:
            entries = self.catalogue_entries() | self._profiled_entries
        except Exception:  # a broken catalogue: batches still run on fresh processes
            logger.warning("no standby ncu: the kernel catalogue did not load", exc_info=True)
            return
        if entries:
            self._standby = StandbyProfiler(
                ncu, entries, self.refs, self.device_ordinal, loader=self.loader, limits=self.limits
            )

    def ready(self) -> bool:
        """Is a standby ncu process waiting for the next batch?"""
        return self._standby is not None and self._standby.ready()

    def profile(self, items: Sequence[ProfileTarget | str], timeout_s: float) -> list[ProfileOutcome]:
        """Profile the targets among ``items`` in ONE ncu process.

        Args:
            items: per request, what to launch, or why it cannot be profiled.
            timeout_s: for the whole batch.

        Returns:
            One outcome per item, in order: the ncu metrics (plus ``ncu_wall_s``, this target's
            share of the batch's wall time, ``ncu_batch_size`` and ``ncu_standby``), or the reason
            there are none. Never raises for a profiler problem.
        """
        outcomes: list[ProfileOutcome | None] = [
            ProfileOutcome(None, item) if isinstance(item, str) else None for item in items
        ]
        where = [i for i, item in enumerate(items) if isinstance(item, ProfileTarget)]
        targets = [item for item in items if isinstance(item, ProfileTarget)]
        if targets:
            batch, standby = self._profile_batch(targets, timeout_s)
            share = batch.wall_s / len(targets)
            for i, metrics in zip(where, batch.metrics, strict=True):
                if metrics is None:
                    outcomes[i] = ProfileOutcome(None, batch.error or "not profiled")
                else:
                    outcomes[i] = ProfileOutcome({**metrics, "ncu_wall_s": share, "ncu_batch_size": len(targets),
                                                  "ncu_standby": standby})  # fmt: skip
        return [o if o is not None else ProfileOutcome(None, "not profiled") for o in outcomes]

    def _profile_batch(self, targets: list[ProfileTarget], timeout_s: float) -> tuple[ProfileBatchResult, bool]:
        """On the standby ncu process if one is ready and its filter covers the batch (then start
        the next), else on a fresh one. Returns the batch and whether the standby ran it."""
        entries = {target.entry for target in targets}
        self._profiled_entries |= entries
        standby, self._standby = self._standby, None
        if standby is not None and not standby.covers(entries):
            logger.info("the standby ncu does not filter for %s: a fresh ncu process profiles this batch",
                        sorted(entries - standby.entries))  # fmt: skip
            standby.close()  # the next one filters for these kernels too
            standby = None
        batch = standby.run(targets, timeout_s) if standby is not None else None
        used_standby = batch is not None
        if batch is None:
            batch = profile_batch(
                targets, self.refs, self.device_ordinal, timeout_s, loader=self.loader, limits=self.limits
            )
        self.start_standby()
        return batch, used_standby

    def close(self) -> None:
        if self._standby is not None:
            self._standby.close()
            self._standby = None
