"""The device's roofline ceilings for the profiler's classes.

On a GPU these are the farm's own measurement (:func:`kernelfarm.worker.measuring.roofline.measure_ceilings`,
the same the workers take); on the CPU the same three probes run through torch, so the CPU mode's
classes stand on measured numbers too. A JSON file of :class:`Ceilings` fields can stand in for both.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import fields
from pathlib import Path

from kernelfarm.core.files import read_bounded
from kernelfarm.worker.measuring.roofline import Ceilings


class CeilingsError(ValueError):
    """A ceilings file that cannot be read or is not a JSON object of :class:`Ceilings` fields."""


RATES = ("dram_bytes_per_s", "fp32_flops", "tensor_flops")  # the required fields: numbers > 0
# The most of a ceilings file read (core/files.read_bounded): /dev/zero was read until the machine ran out
# of memory. Ceilings are a few numbers, but a whole profile.json may be given (its ``ceilings`` object is
# read): its operator table grows with the model, hence room for the largest model's report.
MAX_CEILINGS_BYTES = 64 << 20


def load(path: Path) -> Ceilings:
    """The ceilings in a JSON file: ``dram_bytes_per_s``, ``fp32_flops`` and ``tensor_flops`` (finite
    numbers > 0), optionally ``how`` (text); other keys are ignored (``profile.json``'s ``ceilings`` object
    is such a file).

    Raises:
        CeilingsError: the file cannot be read (or is not a regular file, or is larger than
            MAX_CEILINGS_BYTES), is not JSON, or lacks a rate or has a bad one.
    """
    try:
        data = json.loads(read_bounded(path, MAX_CEILINGS_BYTES))
    except OSError as exc:
        raise CeilingsError(f"cannot read {path}: {exc.strerror or exc}") from None
    except RecursionError:  # json.loads recurses once a level: 100000 nested arrays were a traceback
        raise CeilingsError(f"{path} is nested too deeply to read (a ceilings file is one object of numbers)") from None
    except ValueError as exc:  # not UTF-8, not JSON (neither message quotes the file), an integer too long
        raise CeilingsError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CeilingsError(f"{path} must hold a JSON object with {', '.join(RATES)}, not {type(data).__name__}")
    missing = [name for name in RATES if name not in data]
    if missing:
        names = {f.name for f in fields(Ceilings)}
        other = sorted(set(data) - names)
        raise CeilingsError(
            f"{path} lacks {', '.join(missing)} (a ceilings file has {', '.join(RATES)}: numbers > 0)"
            + (f"; not ceilings: {', '.join(map(repr, other))}" if other else "")
        )
    for name in RATES:
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value) or value <= 0:
            huge = isinstance(value, int) and not _finite(value)
            shown = f"an integer of {len(str(abs(value)))} digits" if huge else repr(value)
            raise CeilingsError(f"{path}: {name} must be a number > 0, got {shown}")
    how = data.get("how", f"given by {path}")
    if not isinstance(how, str):
        raise CeilingsError(f"{path}: how must be text, got {how!r}")
    return Ceilings(**{name: float(data[name]) for name in RATES}, how=how)


def measure(device: str) -> Ceilings:
    if device.startswith("cuda"):
        from kernelfarm.worker.measuring.roofline import measure_ceilings

        return measure_ceilings()
    return _measure_cpu()


def _best_seconds(fn: object, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def _measure_cpu() -> Ceilings:
    import torch

    src = torch.rand(1 << 25)  # 128 MiB: far larger than any CPU cache
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src))
    n = 1024
    a, b = torch.rand(n, n), torch.rand(n, n)
    sgemm_s = _best_seconds(lambda: a @ b)
    return Ceilings(
        dram_bytes_per_s=2 * src.numel() * 4 / copy_s, fp32_flops=2 * n**3 / sgemm_s, tensor_flops=2 * n**3 / sgemm_s,
        how="CPU: torch copy of 128 MiB; torch fp32 GEMM 1024^3 (no tensor cores: the same rate twice)",
    )  # fmt: skip


def _finite(value: float) -> bool:
    """``math.isfinite`` without its OverflowError: JSON's 1 followed by 400 zeros is an int too large for a
    float (it was a traceback), and no finite rate."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
