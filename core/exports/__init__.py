"""Best-config exports in the formats users' code reads: one module per format (docs/EXPORTS.md).

Best-config formats take an :class:`~kernelfarm.core.exports.model.BestExport` (the best config per
GPU model and problem of one kernel); trial formats take a
:class:`~kernelfarm.core.exports.model.TrialsExport` (one job's trials). Each writer is a pure
function of that data, so the API, the CLI and the tests share it.
"""

from __future__ import annotations

BEST_FORMATS = ("json", "header", "triton")
TRIAL_FORMATS = ("kernel_tuner", "t4", "csv")
# The most of an export file a client reads (core/files.read_bounded: /dev/zero was read until the machine
# ran out of memory). No server limit applies, the file being the user's own: an export is about a few
# hundred bytes a best config, so this holds hundreds of thousands, while parsing one stays within memory.
MAX_EXPORT_BYTES = 128 << 20


def is_plain_file_name(name: str) -> bool:
    """Whether ``folder / name`` is a file directly in ``folder``: not empty, not ``.`` or ``..``, no
    separator (``/``, or ``\\`` on Windows) and no NUL. An absolute name has a separator. The triton
    writer refuses a device name that gives another; the CLI refuses a server's answer with one."""
    return name not in ("", ".", "..") and not any(ch in name for ch in "/\\\0")
