"""Runtime best-config lookup for inference code: the best config for (kernel, problem, this GPU).

Where the answer comes from, in order:

1. the local cache file (answers the farm gave, kept ``max_age`` seconds);
2. the farm (``GET /v1/best``, with its fallback order), whose answer is then cached;
3. a pinned export (the farm's ``json`` export), searched with the same fallback order as
   ``/v1/best``: exact (GPU model and problem) → same GPU model, nearest problem (sum of
   |log2 ratio| of the integer dimensions; other dimensions must match) → another GPU model of the
   same compute capability, exact problem first, then nearest. This step needs no network: with
   ``client=None`` the lookup is fully offline; with a client it is used when the farm cannot be
   reached or has no answer.

The cache is only a cache: a file or an entry that cannot be read, or is not of the shape written here,
is a miss (the next answer of the farm replaces it), and a cache that cannot be written (a read-only
home) is warned about once and skipped: the farm's answer is returned all the same. A kernel the farm
does not know is the caller's to fix: it raises ApiError 404, it is not a miss.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from kernelfarm.client import ApiError
from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports import MAX_EXPORT_BYTES, json_format
from kernelfarm.core.exports.model import BestEntry, BestExport
from kernelfarm.core.files import read_bounded, write_text_atomically
from kernelfarm.core.gpu import model_slug
from kernelfarm.sdk.client import Client
from kernelfarm.sdk.device import LocalGpu, this_gpu

logger = logging.getLogger(__name__)


def _default_cache_file() -> Path | None:
    try:
        return Path.home() / ".cache" / "kernelfarm" / "best-configs.json"
    except RuntimeError:  # no home directory (a container's arbitrary uid without HOME): no cache file
        return None


DEFAULT_CACHE_FILE = _default_cache_file()


class LookupMiss(LookupError):
    """No config for this kernel, problem and GPU anywhere the lookup may look."""


@dataclass(frozen=True)
class LookupResult:
    config: dict[str, Any]
    match: str  # exact | nearest_problem | same_architecture
    gpu_model: str  # the GPU model the config was measured on
    problem: dict[str, Any]  # the problem it was measured for
    time_ms: float
    source: str  # cache | farm | export


_CACHED_TYPES: dict[str, type | tuple[type, ...]] = {
    "config": dict, "match": str, "gpu_model": str, "problem": dict, "time_ms": (int, float),
}  # fmt: skip
assert set(_CACHED_TYPES) == {f.name for f in fields(LookupResult)} - {"source"}


def _cached_result(entry: Any) -> tuple[float, LookupResult] | None:
    """``(fetched_at, result)`` of a cache entry, None for anything not of the shape written here."""
    if not isinstance(entry, dict):
        return None
    fetched_at, result = entry.get("fetched_at"), entry.get("result")
    if isinstance(fetched_at, bool) or not isinstance(fetched_at, int | float) or not math.isfinite(fetched_at):
        return None
    if not isinstance(result, dict) or set(result) != set(_CACHED_TYPES):
        return None
    if any(isinstance(result[k], bool) or not isinstance(result[k], t) for k, t in _CACHED_TYPES.items()):
        return None
    return float(fetched_at), LookupResult(**result, source="cache")


def read_export_file(path: str | Path) -> str:
    """An export file's text (json or triton); InvalidInput when it is not UTF-8 (exports are JSON: UTF-8).

    Raises:
        RefusedFile: not a regular file, or larger than MAX_EXPORT_BYTES (core/files.read_bounded).
    """
    data = read_bounded(Path(path), MAX_EXPORT_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{path} is not an export: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


class BestConfigLookup:
    """Best configs of one kernel for this GPU (or ``gpu``: a model slug or device name).

    Args:
        client: the farm; None for offline use (then ``export`` is required).
        export: a pinned ``json`` export (path or parsed), used offline or when the farm has no answer;
            a file that is not an export raises InvalidInput.
        cache_file: where farm answers are kept; None: no cache file. One that cannot be written is
            warned about once and skipped.
        max_age: seconds a cached answer is used before the farm is asked again.
        compute_capability: of ``gpu`` when given explicitly (for the same-architecture fallback).
    """

    def __init__(
        self,
        kernel: str,
        *,
        client: Client | None = None,
        export: str | Path | BestExport | None = None,
        gpu: str | None = None,
        compute_capability: str | None = None,
        cache_file: str | Path | None = DEFAULT_CACHE_FILE,
        max_age: float = 24 * 3600.0,
    ) -> None:
        if client is None and export is None:
            raise ValueError("give a client (the farm) and/or an export (offline)")
        self.kernel, self.client, self.max_age = kernel, client, max_age
        self.export = json_format.read(read_export_file(export)) if isinstance(export, str | Path) else export
        if self.export is not None and self.export.kernel != kernel:
            raise ValueError(f"the export is of kernel {self.export.kernel!r}, not {kernel!r}")
        device = LocalGpu(gpu, compute_capability) if gpu else this_gpu()
        self.gpu_model, self.compute_capability = model_slug(device.name), device.compute_capability
        self.cache_file = Path(cache_file) if cache_file is not None else None
        self._cache_warned = False
        self._kernel_known = False  # the farm answered for this kernel once: a 404 is then a miss

    def config(self, problem: Mapping[str, Any] | None = None) -> LookupResult:
        """The best config for ``problem`` (the kernel's defaults fill what is left out).

        Raises:
            LookupMiss: neither the cache, the farm nor the export has one.
            kernelfarm.client.ApiError: the farm refused the request: 404 for a kernel it does not know
                (a typo is not "no result yet"), 422 for a bad problem.
        """
        problem = dict(problem or {})
        key = "|".join([self.kernel, self.gpu_model, ",".join(f"{k}={problem[k]}" for k in sorted(problem))])
        cached = _cached_result(self._read_cache().get(key))
        if cached is not None and time.time() - cached[0] < self.max_age:
            return cached[1]
        farm_error: str | None = None
        if self.client is not None:
            try:
                best = self.client.best(self.kernel, self.gpu_model, problem)
            except ApiError as exc:
                if exc.status not in (0, 404) and not (500 <= exc.status < 600):
                    raise  # a bad request (bad problem, GPU name) is the caller's to fix
                if exc.status == 404:
                    self._check_kernel_known()
                farm_error = str(exc.detail) if exc.status else str(exc)
            else:
                self._kernel_known = True
                result = LookupResult(best.config, best.match, best.matched_gpu_model, best.matched_problem,
                                      best.time_ms, "farm")  # fmt: skip
                self._write_cache(key, result)
                return result
        if self.export is not None:
            found = find_in_export(self.export, problem, self.gpu_model, self.compute_capability)
            if found is not None:
                entry, match = found
                return LookupResult(entry.config, match, entry.gpu_model, entry.problem, entry.time_ms, "export")
        raise LookupMiss(f"no config of {self.kernel} for {problem or 'the default problem'} on {self.gpu_model}"
                         + (f" (farm: {farm_error})" if farm_error else ""))  # fmt: skip

    def _check_kernel_known(self) -> None:
        """After a 404 of ``/v1/best``: raise the farm's 404 if it has no such kernel at all (a typo), so
        that it is not taken for "nothing measured yet". Asked once per lookup; unreachable: a miss."""
        if self._kernel_known or self.client is None:
            return
        try:
            self.client.kernel(self.kernel)
        except ApiError as exc:
            if exc.status == 404:
                raise ApiError(404, f"the farm has no kernel {self.kernel!r}: {exc.detail}") from None
            return  # the farm cannot say now: the 404 of /v1/best stays a miss
        self._kernel_known = True

    def _read_cache(self) -> dict[str, Any]:
        if self.cache_file is None:
            return {}
        try:
            data = json.loads(self.cache_file.read_bytes())
        except (OSError, ValueError):  # missing, unreadable, not UTF-8 or not JSON
            return {}  # a damaged cache is only a cache: ask the farm again
        entries = data.get("entries") if isinstance(data, dict) else None
        return entries if isinstance(entries, dict) else {}

    def _write_cache(self, key: str, result: LookupResult) -> None:
        if self.cache_file is None:
            return
        entries = {k: v for k, v in self._read_cache().items() if _cached_result(v) is not None}
        entries[key] = {"fetched_at": time.time(), "result": {k: v for k, v in asdict(result).items() if k != "source"}}
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            # Atomic replace: several processes of one inference server may write at once. Private to
            # its user (0o600), and not fsynced: it is only a cache, written on the lookup's path.
            text = json.dumps({"version": 1, "entries": entries})
            write_text_atomically(self.cache_file, text, mode=0o600, durable=False)
        except (OSError, ValueError) as exc:  # read-only home, full disk; a NaN config (ValueError)
            if not self._cache_warned:
                self._cache_warned = True
                logger.warning("best-config cache %s not written (%s); answers are not cached", self.cache_file, exc)


def problem_distance(
    a: Mapping[str, Any], b: Mapping[str, Any], key_defaults: Mapping[str, Any] | None = None
) -> float:
    """The farm's default distance: sum of |log2 ratio| of integer dimensions; infinite when another
    dimension differs. A dimension one problem leaves out reads as its ``key_defaults`` value (the
    export's ``problem_key_defaults``, which the kernel's spec decides: a dimension added later)."""
    defaults = key_defaults or {}
    total = 0.0
    # In the problems' order, not a set's: a set's order changes from one process to the next, and a
    # float sum in another order can make two problems that tie here differ in the last bit there.
    for name in dict.fromkeys([*a, *b]):
        x, y = a.get(name, defaults.get(name)), b.get(name, defaults.get(name))
        if isinstance(x, int) and isinstance(y, int) and x > 0 and y > 0:
            total += abs(math.log2(x / y))
        elif str(x) != str(y):
            return math.inf
    return total


def find_in_export(
    export: BestExport, problem: Mapping[str, Any], gpu_model: str, compute_capability: str | None
) -> tuple[BestEntry, str] | None:
    """``/v1/best``'s fallback order over an export's entries; ``problem`` is completed with the
    kernel's default problem."""
    wanted = {**export.default_problem, **problem}
    same_model = [e for e in export.entries if e.gpu_model == gpu_model]
    found = _nearest(same_model, wanted, export.problem_key_defaults)
    if found is not None:
        return found[0], "exact" if found[1] == 0 else "nearest_problem"
    if compute_capability:
        siblings = [
            e for e in export.entries if e.gpu_model != gpu_model and e.compute_capability == compute_capability
        ]
        found = _nearest(siblings, wanted, export.problem_key_defaults)
        if found is not None:
            return found[0], "same_architecture"
    return None


def _nearest(
    entries: list[BestEntry], problem: Mapping[str, Any], key_defaults: Mapping[str, Any]
) -> tuple[BestEntry, float] | None:
    scored = [(problem_distance(problem, e.problem, key_defaults), e) for e in entries]
    finite = [s for s in scored if math.isfinite(s[0])]
    if not finite:
        return None
    # Equally near entries (M=1024 between M=512 and M=2048; two GPU models of one architecture) go as
    # /v1/best breaks the tie (core/store/best.py, _pick): the first problem key, then GPU model, in
    # order. Taking the fastest instead answered another config offline than the farm did.
    distance, entry = min(finite, key=lambda s: (s[0], s[1].problem_key, s[1].gpu_model))
    return entry, distance
