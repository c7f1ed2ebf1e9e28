"""Fusion candidates: an MLP's up-projection and its GELU, as one farm kernel (``matmul_bias_gelu_triton``).

The profile's rows are single operators; eager GPT-2's MLP runs its up-projection (one GEMM) and then its
GELU, which transformers' ``NewGELUActivation`` computes in eight elementwise kernels. The farm's fused
kernel does both in one launch, GELU in the GEMM's epilogue (fp32, rounded once).

The rule (module structure, not names of classes of models): a module with a child ``c_fc`` and a child
``act`` (GPT-2's ``GPT2MLP``, and the models built like it), where

- ``c_fc`` is a ``torch.nn.Linear`` (weight N x K: ``b_layout="nk"``) or a transformers ``Conv1D`` (weight
  K x N: ``"kn"``), exactly those types, with a 2-D weight;
- ``act`` is a GELU whose form the fused kernel computes: transformers' ``NewGELUActivation`` or ``GELUTanh``
  (the tanh approximation), ``GELUActivation`` (erf), or ``torch.nn.GELU`` with ``approximate`` ``"tanh"``
  or ``"none"``. Any other activation (FastGELU, QuickGELU, a clipped GELU, ReLU...) is not a candidate.

The structure says what the MLP holds, not that its forward computes ``act(c_fc(x))`` and uses ``c_fc``'s
output nowhere else: the swap's output check against a float32 copy of the model is what catches a model
for which that is not so.

M (the tokens) and the calls per inference come from one inference with forward hooks on each ``c_fc``;
the baseline is the pair ``act(c_fc(x))`` timed in isolation on the device on the input that inference
handed the first such ``c_fc``: CUDA events around back-to-back calls (so a pair whose launches take longer
than its kernels counts its launch time, as in the eager model), not a sum of the profile's rows (the
GELU's elementwise rows are grouped by shape with any other elementwise operator of that shape).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from kernelfarm.model_profiler.models import ModelUnderTest

FAMILY = "matmul_bias_gelu"
# GELU form per activation type (module.qualname: exact types; a subclass may compute something else).
TRANSFORMERS_GELUS = {
    "transformers.activations.NewGELUActivation": "tanh",
    "transformers.activations.GELUTanh": "tanh",
    "transformers.activations.GELUActivation": "erf",
}
TORCH_GELU_FORMS = {"tanh": "tanh", "none": "erf"}
# The isolated timing: back-to-back calls per block, blocks (the median is kept), unmeasured calls first.
PAIR_CALLS, PAIR_BLOCKS, PAIR_WARMUP = 20, 5, 3


@dataclass(frozen=True)
class Mlp:
    """One MLP block the fused kernel can run: its module names and the problem's model-independent part."""

    name: str  # the MLP module's name; its children are f"{name}.c_fc" and f"{name}.act"
    c_fc: Any
    act: Any
    n: int
    k: int
    b_layout: str
    gelu: str


def gelu_form(act: Any) -> str | None:
    """``"erf"`` or ``"tanh"`` for a GELU module the fused kernel computes, else None."""
    import torch

    if type(act) is torch.nn.GELU:
        return TORCH_GELU_FORMS.get(act.approximate)
    return TRANSFORMERS_GELUS.get(f"{type(act).__module__}.{type(act).__qualname__}")


def _projection_layout(module: Any) -> str | None:
    """``"nk"`` for a Linear, ``"kn"`` for transformers' Conv1D (x @ W + b), None for anything else."""
    import torch

    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        return None
    if type(module) is torch.nn.Linear:
        return "nk"
    if type(module).__name__ == "Conv1D" and type(module).__module__.startswith("transformers."):
        return "kn"
    return None


def find_mlps(model: Any) -> list[Mlp]:
    """The MLP blocks of the GPT-2 form in ``model``, in module order (the rule: module docstring)."""
    found = []
    for name, module in _named_modules(model):
        c_fc, act = getattr(module, "c_fc", None), getattr(module, "act", None)
        if c_fc is None or act is None:
            continue
        layout, form = _projection_layout(c_fc), gelu_form(act)
        if layout is None or form is None:
            continue
        weight = c_fc.weight
        n, k = (weight.shape[0], weight.shape[1]) if layout == "nk" else (weight.shape[1], weight.shape[0])
        found.append(Mlp(name, c_fc, act, int(n), int(k), layout, form))
    return found


def _named_modules(model: Any) -> list[tuple[str, Any]]:
    named = getattr(model, "named_modules", None)
    if named is None:  # models.build's wrapper of a model called with positional inputs
        named = model.model.named_modules
    return list(named())


def fused_mlp_candidates(mut: ModelUnderTest) -> list[dict[str, Any]]:
    """One candidate per distinct fused problem: ``problem`` (M, N, K, dtype, b_layout, gelu), the MLPs'
    names, ``calls`` per inference and ``baseline_ms`` (one ``act(c_fc(x))``, timed in isolation)."""
    import torch

    mlps = find_mlps(mut.model)
    if not mlps:
        return []
    rows: dict[str, list[int]] = {}  # MLP name -> the rows its c_fc got, per call
    first: dict[str, Any] = {}  # MLP name -> its c_fc's first input, 2-D (the baseline's input)
    handles = []
    for mlp in mlps:

        def hook(module: Any, args: tuple[Any, ...], name: str = mlp.name, k: int = mlp.k) -> None:
            x = args[0] if args else None
            if isinstance(x, torch.Tensor) and x.shape[-1] == k:
                rows.setdefault(name, []).append(x.shape[:-1].numel())
                first.setdefault(name, x.detach().reshape(-1, k).clone())

        handles.append(mlp.c_fc.register_forward_pre_hook(hook))
    try:
        with torch.inference_mode():
            mut.model(**mut.inputs)
    finally:
        for handle in handles:
            handle.remove()
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    firsts: dict[tuple[Any, ...], tuple[Mlp, Any]] = {}
    for mlp in mlps:
        counts = rows.get(mlp.name)
        if not counts or len(set(counts)) != 1:
            continue  # not run by this inference, or with several shapes: no one problem to tune
        problem = {"M": counts[0], "N": mlp.n, "K": mlp.k, "dtype": mut.dtype, "b_layout": mlp.b_layout,
                   "gelu": mlp.gelu}  # fmt: skip
        key = tuple(problem.values())
        group = groups.setdefault(key, {"problem": problem, "modules": [], "calls": 0})
        group["modules"].append(mlp.name)
        group["calls"] += len(counts)
        firsts.setdefault(key, (mlp, first[mlp.name]))
    candidates = []
    for key, group in groups.items():
        mlp, x = firsts[key]
        group["baseline_ms"] = time_pair(mlp, x, mut.device)
        group["baseline_how"] = (
            f"c_fc + act of {mlp.name or 'the model'} timed in isolation: median of {PAIR_BLOCKS} blocks of "
            f"{PAIR_CALLS} back-to-back calls ({'CUDA events' if mut.device.startswith('cuda') else 'wall time'})"
        )
        candidates.append(group)
    return candidates


def time_pair(mlp: Mlp, x: Any, device: str) -> float:
    """ms per call of ``act(c_fc(x))`` as the eager model runs it (the modules' current forwards)."""
    import torch

    def pair() -> Any:
        return mlp.act(mlp.c_fc(x))

    on_gpu = device.startswith("cuda")
    blocks = []
    with torch.inference_mode():
        for _ in range(PAIR_WARMUP):
            pair()
        for _ in range(PAIR_BLOCKS):
            if on_gpu:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                for _ in range(PAIR_CALLS):
                    pair()
                end.record()
                end.synchronize()
                blocks.append(start.elapsed_time(end) / PAIR_CALLS)
            else:
                began = time.perf_counter()
                for _ in range(PAIR_CALLS):
                    pair()
                blocks.append((time.perf_counter() - began) * 1e3 / PAIR_CALLS)
    return statistics.median(blocks)
