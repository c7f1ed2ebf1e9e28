"""The GPU's roofline ceilings, measured once per GPU and kept on disk.

Measuring them takes the measuring child about a second of GPU time; a worker that restarts on the
same GPU (same UUID) reads them back instead.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

from kernelfarm.worker.measuring.roofline import Ceilings
from kernelfarm.worker.measuring.supervisor import MeasuringChild

logger = logging.getLogger(__name__)

# Generous: a child that starts here also pays its interpreter, CuPy import and context.
_MEASURE_TIMEOUT_S = 300.0


class CeilingsCache:
    """One GPU's ceilings: in memory, else on disk, else measured by the child (then saved)."""

    def __init__(self, cache_dir: Path, gpu_uuid: str, gpu_name: str, enabled: bool = True) -> None:
        """
        Args:
            cache_dir: the directory of the file ``ceilings-<GPU UUID>.json``.
            gpu_uuid: which GPU (the file's key).
            gpu_name: for the log line.
            enabled: False: never measure; :meth:`get` returns None (no roofline metrics).
        """
        self.path = Path(cache_dir) / f"ceilings-{gpu_uuid}.json"
        self.gpu_name = gpu_name
        self.enabled = enabled
        self._ceilings: Ceilings | None = None

    def get(self, child: MeasuringChild) -> Ceilings | None:
        """The ceilings, measuring them on ``child`` if they are known nowhere yet.

        Anything else asked of the child must come before a stream queues requests on it (the
        child answers in order, and a request sent meanwhile would overtake the queued ones): the
        backends ask for the ceilings before a stream's first request.

        Returns:
            The ceilings, or None when disabled or when measuring them failed (logged; asked again
            next time).
        """
        if self._ceilings is not None or not self.enabled:
            return self._ceilings
        if self.path.is_file():
            self._ceilings = Ceilings(**json.loads(self.path.read_text()))
            return self._ceilings
        reply = child.ask({"op": "ceilings"}, _MEASURE_TIMEOUT_S)
        if reply.get("status") != "ok":
            logger.warning("ceilings not measured: %s", reply.get("message"))
            return None
        self._ceilings = Ceilings(**reply["ceilings"])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(asdict(self._ceilings)))
        logger.info("measured ceilings of %s: %s", self.gpu_name, self._ceilings)
        return self._ceilings
