"""Profile → tune → verify: put the farm-tuned kernels into the model, check its outputs against eager,
and measure the end-to-end latency again.

A matrix product the farm tuned with ``matmul_triton`` replaces the forward of every module that
computes it: a ``torch.nn.Linear`` (weight stored N x K: ``b_layout="nk"``) or a transformers
``Conv1D`` (weight stored K x N: ``"kn"``) with the tuned K and N. The kernel runs through a torch
custom operator (``kernelfarm::tuned_matmul``), so the swapped model also traces under torch.compile,
and it launches the very ``@triton.jit`` function the farm measured, with the farm's best config.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable
from typing import Any

from kernelfarm.model_profiler.capture import latency
from kernelfarm.model_profiler.models import ModelUnderTest

logger = logging.getLogger(__name__)
SWAPPABLE = frozenset({"matmul_triton"})
# The swapped model's outputs match eager when the relative L2 error of the logits stays under this
# and no element is further off than MAX_ERROR_OF_SCALE times the largest logit: bf16 products
# accumulated in fp32 in another order differ by about 1e-3 relative.
REL_L2_TOLERANCE = 1e-2
# Baseline and swapped model are timed by turns, this many blocks each.
AB_ROUNDS = 3
MAX_ERROR_OF_SCALE = 5e-2

_registered = False


def _register_op() -> None:
    """Define ``kernelfarm::tuned_matmul`` once (torch refuses a second definition)."""
    global _registered
    if _registered:
        return
    import torch

    # The schema is spelled out: this module's annotations are strings (from __future__ import
    # annotations), which torch cannot infer a schema from.
    @torch.library.custom_op(
        "kernelfarm::tuned_matmul", mutates_args=(), schema="(Tensor a, Tensor b, bool b_nk, int[] config) -> Tensor"
    )
    def tuned_matmul(a: torch.Tensor, b: torch.Tensor, b_nk: bool, config: list[int]) -> torch.Tensor:
        return _launch(a, b, b_nk, config)

    @tuned_matmul.register_fake
    def _(a: torch.Tensor, b: torch.Tensor, b_nk: bool, config: list[int]) -> torch.Tensor:
        n = b.shape[0] if b_nk else b.shape[1]
        return a.new_empty((a.shape[0], n))

    _registered = True


def _config_order() -> list[str]:
    """The config's parameters in the kernel's space order: how the config travels through the custom
    operator (its schema takes a list of ints, not a dict)."""
    from kernelfarm.kernels.registry import get_kernel

    return [p.name for p in get_kernel("matmul_triton").space.parameters]


def _launch(a: Any, b: Any, b_nk: bool, config: list[int]) -> Any:
    """C = A @ B (B given N x K when ``b_nk``) with the farm's jit functions and one config, launched
    exactly as the farm's triton backend launches it: the kernel spec gives the jit function, its
    constexprs, compile options, grid and arguments (buffers and TMA descriptors by name)."""
    import importlib

    import torch

    from kernelfarm.kernels.registry import get_kernel
    from kernelfarm.kernels.triton_kernel import BufferArg, TensorDescriptorArg, TritonKernel

    impl = get_kernel("matmul_triton").impl("triton", TritonKernel)
    values = dict(zip(_config_order(), config, strict=True))
    m, k = a.shape
    n = b.shape[0] if b_nk else b.shape[1]
    dtype = {torch.bfloat16: "bfloat16", torch.float16: "float16"}[a.dtype]
    problem = {"M": m, "N": n, "K": k, "dtype": dtype, "b_layout": "nk" if b_nk else "kn"}
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    buffers = {"A": a, "B": b, "C": c}
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    arguments = {}
    for name, value in impl.arguments(values, problem, sms).items():
        if isinstance(value, BufferArg):
            value = buffers[value.buffer]
        elif isinstance(value, TensorDescriptorArg):
            from triton.tools.tensor_descriptor import TensorDescriptor

            value = TensorDescriptor(buffers[value.buffer], list(value.shape), list(value.strides),
                                     list(value.block_shape))  # fmt: skip
        arguments[name] = value
    function = getattr(importlib.import_module(impl.module), impl.entry(values))
    grid = impl.grid(values, problem, sms).dims
    function[grid](**arguments, **impl.constexprs(values, problem), **impl.options(values))
    return c


def padded_weight(weight: Any, n: int, n_pad: int, b_nk: bool) -> Any:
    """The weight with ``n_pad - n`` zero output rows (N x K) or columns (K x N) appended: the padded
    product's extra columns are zeros, and the caller keeps only the first ``n``."""
    import torch

    if n_pad == n:
        return weight
    if b_nk:
        return torch.cat([weight, weight.new_zeros((n_pad - n, weight.shape[1]))]).contiguous()
    return torch.cat([weight, weight.new_zeros((weight.shape[0], n_pad - n))], dim=1).contiguous()


def _forward(module: Any, k: int, n: int, n_pad: int, rows: int, b_nk: bool, config: list[int]) -> Callable[[Any], Any]:
    import torch

    original = module.forward
    weight = padded_weight(module.weight.detach(), n, n_pad, b_nk)  # once, not per call

    def forward(x: Any) -> Any:
        x2d = x.reshape(-1, k)
        if x2d.shape[0] != rows or not x2d.is_contiguous():
            return original(x)  # another shape than the one tuned: leave it to torch
        out = torch.ops.kernelfarm.tuned_matmul(x2d, weight, b_nk, config)[:, :n]
        if getattr(module, "bias", None) is not None:
            out = out + module.bias
        return out.reshape(*x.shape[:-1], n)

    return forward


def swap_in(model: Any, entry: dict[str, Any]) -> list[str]:
    """Replace the forward of every module computing the tuned product; returns their names."""
    import torch

    _register_op()
    problem, config = entry["kernel_problem"], entry["config"]
    k, rows, b_nk = int(problem["K"]), int(problem["M"]), problem["b_layout"] == "nk"
    n_pad = int(problem["N"])  # the product the farm tuned: N may be padded (mapping.PAD_N_TO)
    n = int(entry.get("problem", problem)["N"])  # the model's own N
    values = [int(config[name]) for name in _config_order()]
    swapped = []
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            continue
        is_linear = isinstance(module, torch.nn.Linear)
        is_conv1d = type(module).__name__ == "Conv1D"  # transformers' GPT-2 projection: x @ W + b
        if (b_nk and is_linear and tuple(weight.shape) == (n, k)) or (
            not b_nk and is_conv1d and tuple(weight.shape) == (k, n)
        ):
            module.forward = _forward(module, k, n, n_pad, rows, b_nk, values)
            swapped.append(name)
    return swapped


def _set_swapped(model: Any, forwards: dict[str, Any], *, on: bool) -> None:
    """Put the swapped forwards in (``on``) or take them out (the modules' own forward again)."""
    for name, module in model.named_modules():
        if name in forwards:
            if on:
                module.forward = forwards[name]
            else:
                module.__dict__.pop("forward", None)


def swap_and_measure(mut: ModelUnderTest, entries: list[dict[str, Any]], *, baseline_ms: float,
                     iterations: int) -> dict[str, Any]:  # fmt: skip
    """Swap the tuned products in (those faster than the baseline), compare outputs, time again."""
    import torch

    def logits() -> Any:
        with torch.inference_mode():
            out = mut.model(**mut.inputs)
        return (out.logits if hasattr(out, "logits") else out).float()

    def run() -> Any:
        with torch.inference_mode():
            return mut.model(**mut.inputs)

    def block() -> list[float]:
        for _ in range(3):
            run()
        return latency(run, mut.device, iterations)

    reference = logits()
    swapped: dict[str, list[str]] = {}
    for entry in entries:
        faster = entry.get("speedup") is not None and entry["speedup"] > 1.0
        if entry.get("kernel") in SWAPPABLE and entry.get("config") and faster:
            swapped[f"{entry['operator']} {entry['kernel_problem']}"] = swap_in(mut.model, entry)
    result: dict[str, Any] = {"swapped": swapped, "profile_latency_ms": baseline_ms}
    if not any(swapped.values()):
        before_ms = statistics.median(block())
        result.update(baseline_ms=before_ms, swapped_ms=before_ms, speedup=1.0, max_abs_error=0.0,
                      rel_l2_error=0.0, outputs_match=True,
                      note="no tuned operator was both faster than its baseline and swappable")  # fmt: skip
        return result
    out = logits()
    error = out - reference
    max_abs, scale = float(error.abs().max()), float(reference.abs().max())
    rel_l2 = float(error.norm() / reference.norm())
    # Baseline and swapped model are timed by turns (A B A B A B), in the conditions of this moment: the
    # profile's latency was taken before the tuning jobs ran, and a farm on the same host (its compile
    # pool, a measuring child) loads the CPU that launches eager kernels by spells; timed one after the
    # other, a spell on either side would count as the swap's gain or loss.
    names = {name for swapped_names in swapped.values() for name in swapped_names}
    forwards = {name: module.__dict__["forward"] for name, module in mut.model.named_modules() if name in names}
    before: list[float] = []
    after: list[float] = []
    for _ in range(AB_ROUNDS):
        _set_swapped(mut.model, forwards, on=False)
        before += block()
        _set_swapped(mut.model, forwards, on=True)
        after += block()
    before_ms, swapped_ms = statistics.median(before), statistics.median(after)
    result.update(
        baseline_ms=before_ms, swapped_ms=swapped_ms, speedup=before_ms / swapped_ms, max_abs_error=max_abs,
        rel_l2_error=rel_l2, outputs_match=rel_l2 <= REL_L2_TOLERANCE and max_abs <= MAX_ERROR_OF_SCALE * scale,
        rounds=AB_ROUNDS, baseline_runs_ms=before, swapped_runs_ms=after,
    )  # fmt: skip
    return result
