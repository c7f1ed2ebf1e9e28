"""A drop-in for ``triton.autotune`` that takes the farm's best config instead of re-tuning.

    @kernelfarm.sdk.triton_autotune.autotune(configs=[...], key=["M", "N", "K"], kernel="my_matmul",
                                             export="configs/")        # or lookup=BestConfigLookup(...)
    @triton.jit
    def my_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, ...): ...

    my_matmul[grid](a, b, c, M, N, K)   # as with triton.autotune

At the first call for a key (the values of the ``key`` arguments) the config is chosen once:

1. a pinned Triton export (kernelfarm's ``triton`` format, vLLM's layout): the file of this device,
   the exact shape, else the nearest recorded shape of that file;
2. the farm (a :class:`~kernelfarm.sdk.lookup.BestConfigLookup`: cache file, ``/v1/best``, its fallback order);
3. none: Triton's own autotuning over ``configs`` (``triton.autotune(configs, key, ...)``), and, with
   ``submit_to``, a tuning job for this shape is submitted (once per shape; an idempotency key makes a
   second process or a restart reuse it).

The chosen config's tunable values are passed as the kernel's ``tl.constexpr`` arguments (upper-case
names, as the export writes them) and ``num_warps``/``num_stages`` as launch options.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelfarm.client import ApiError
from kernelfarm.core.exports import triton as triton_format
from kernelfarm.sdk.client import Client
from kernelfarm.sdk.device import this_gpu
from kernelfarm.sdk.lookup import BestConfigLookup, LookupMiss, problem_distance, read_export_file

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Choice:
    """What the first call of a key decided; ``config`` None means Triton's own autotuning."""

    source: str  # export (pinned file) | lookup:farm | lookup:cache | lookup:export | autotune
    config: dict[str, Any] | None
    shape_key: str | None = None  # the recorded shape the config is for


def _triton_autotune() -> Callable[..., Any]:
    import triton

    return triton.autotune


def autotune(
    configs: Sequence[Any],
    key: Sequence[str],
    *,
    kernel: str,
    export: str | Path | Mapping[str, Mapping[str, Any]] | None = None,
    lookup: BestConfigLookup | None = None,
    device_name: str | None = None,
    submit_to: Client | None = None,
    submit_options: Mapping[str, Any] | None = None,
    autotune_factory: Callable[..., Any] | None = None,
    **autotune_kwargs: Any,
) -> Callable[[Any], FarmAutotuner]:
    """Args:
    configs, key, autotune_kwargs: as for ``triton.autotune`` (used when the farm has nothing).
    kernel: the kernel's name on the farm (and in the export's file names).
    export: a triton export: one device file, a folder of them (this device's file is used), or
        the parsed mapping shape key → config.
    lookup: ask the farm (with its cache file) when the export has no config.
    device_name: this GPU's name (default: read through NVML when an export folder needs it).
    submit_to: submit a tuning job for a shape nobody has measured; ``submit_options`` are passed
        to :meth:`Client.submit` (a budget is required).
    autotune_factory: ``triton.autotune`` itself by default (tests pass a stand-in).
    """

    def decorator(fn: Any) -> FarmAutotuner:
        pinned = _load_export(export, kernel, device_name)
        return FarmAutotuner(fn, list(configs), list(key), kernel=kernel, pinned=pinned,
                             lookup=lookup, submit_to=submit_to, submit_options=dict(submit_options or {}),
                             autotune_factory=autotune_factory or _triton_autotune(),
                             autotune_kwargs=autotune_kwargs)  # fmt: skip

    return decorator


def _load_export(
    export: str | Path | Mapping[str, Mapping[str, Any]] | None, kernel: str, device_name: str | None
) -> dict[str, dict[str, Any]]:
    if export is None:
        return {}
    if isinstance(export, Mapping):
        return {k: dict(v) for k, v in export.items()}
    path = Path(export)
    if path.is_dir():
        path = path / triton_format.device_file_name(kernel, device_name or this_gpu().name)
        if not path.exists():
            logger.info("no pinned Triton configs for this device: %s does not exist", path)
            return {}
    return triton_format.read(read_export_file(path))


class FarmAutotuner:
    """Stands where ``triton.autotune(...)(fn)`` stands: ``kernel[grid](*args, **kwargs)``."""

    def __init__(
        self,
        fn: Any,
        configs: list[Any],
        key: list[str],
        *,
        kernel: str,
        pinned: dict[str, dict[str, Any]],
        lookup: BestConfigLookup | None,
        submit_to: Client | None,
        submit_options: dict[str, Any],
        autotune_factory: Callable[..., Any],
        autotune_kwargs: dict[str, Any],
    ) -> None:
        self.fn, self.configs, self.key, self.kernel = fn, configs, key, kernel
        self.arg_names: list[str] = list(fn.arg_names)
        self.pinned = [(triton_format.parse_shape_key(k), k, v) for k, v in pinned.items()]
        self.lookup, self.submit_to, self.submit_options = lookup, submit_to, submit_options
        self._autotune_factory, self._autotune_kwargs = autotune_factory, autotune_kwargs
        self._fallback: Any = None
        self.choices: dict[tuple[Any, ...], Choice] = {}

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        shape = self.shape_of(args, kwargs)
        cache_key = tuple(shape.values())
        choice = self.choices.get(cache_key)
        if choice is None:
            choice = self.choices[cache_key] = self.choose(shape)
            logger.info("%s %s: %s config %s", self.kernel, shape, choice.source, choice.config)
        if choice.config is None:
            return self.fallback()[grid](*args, **kwargs)
        return self.fn[grid](*args, **kwargs, **choice.config)

    def shape_of(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        bound = dict(zip(self.arg_names, args, strict=False)) | dict(kwargs)
        missing = [name for name in self.key if name not in bound]
        if missing:
            raise TypeError(f"{self.kernel}: key arguments {missing} were not passed")
        return {name: _key_value(bound[name]) for name in self.key}

    def choose(self, shape: dict[str, Any]) -> Choice:
        pinned = self._from_export(shape)
        if pinned is not None:
            return pinned
        if self.lookup is not None:
            try:
                found = self.lookup.config(shape)
            except LookupMiss:
                pass
            else:
                return Choice(f"lookup:{found.source}", triton_format.triton_config(found.config),
                              ",".join(f"{k}={v}" for k, v in found.problem.items()))  # fmt: skip
        self._submit(shape)
        return Choice("autotune", None)

    def _from_export(self, shape: dict[str, Any]) -> Choice | None:
        scored = []
        for recorded, text, config in self.pinned:
            # vLLM's files key by one number (the batch size): compare it with the first key argument.
            comparable = {self.key[0]: recorded[""]} if set(recorded) == {""} else recorded
            common = {k: v for k, v in comparable.items() if k in shape}
            if not common:
                continue
            scored.append((problem_distance({k: shape[k] for k in common}, common), text, config))
        finite = [s for s in scored if math.isfinite(s[0])]
        if not finite:
            return None
        _, text, config = min(finite, key=lambda s: s[0])
        return Choice("export", dict(config), text)

    def _submit(self, shape: dict[str, Any]) -> None:
        if self.submit_to is None or self.lookup is None:
            return
        shape_key = ",".join(f"{k}={v}" for k, v in shape.items())
        try:
            job = self.submit_to.submit(
                self.kernel, self.lookup.gpu_model, shape, **self.submit_options,
                idempotency_key=f"triton-dropin:{self.kernel}:{self.lookup.gpu_model}:{shape_key}",
            )  # fmt: skip
        except ApiError as exc:  # the kernel still runs, with Triton's own tuning
            logger.warning("could not submit a tuning job for %s %s: %s", self.kernel, shape_key, exc)
        else:
            logger.info("submitted tuning job %s for %s %s", job.id, self.kernel, shape_key)

    def fallback(self) -> Any:
        if self._fallback is None:
            self._fallback = self._autotune_factory(configs=self.configs, key=self.key, **self._autotune_kwargs)(
                self.fn
            )
        return self._fallback


def _key_value(value: Any) -> Any:
    """Key arguments are sizes (ints) or tensors (their dtype, as Triton keys them)."""
    dtype = getattr(value, "dtype", None)
    return str(dtype) if dtype is not None else value
