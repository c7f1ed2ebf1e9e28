"""Best-config exports in the formats users' code reads: one module per format (docs/EXPORTS.md).

Best-config formats take an :class:`~kernelfarm.core.exports.model.BestExport` (the best config per
GPU model and problem of one kernel); trial formats take a
:class:`~kernelfarm.core.exports.model.TrialsExport` (one job's trials). Each writer is a pure
function of that data, so the API, the CLI and the tests share it.
"""

from __future__ import annotations

BEST_FORMATS = ("json", "header", "triton")
TRIAL_FORMATS = ("kernel_tuner", "t4", "csv")
