"""Profile → tune → verify: put the farm-tuned kernels into the model, check its outputs, and measure the
end-to-end latency again.

A matrix product the farm tuned with ``matmul_triton`` replaces the forward of every module that
computes it: a ``torch.nn.Linear`` (weight stored N x K: ``b_layout="nk"``) or a transformers
``Conv1D`` (weight stored K x N: ``"kn"``) with the tuned K and N. The kernel runs through a torch
custom operator (``kernelfarm::tuned_matmul``), so the swapped model also traces under torch.compile,
and it launches the very ``@triton.jit`` function the farm measured, with the farm's best config.

An MLP's up-projection and GELU that the farm tuned as one ``matmul_bias_gelu_triton`` kernel (the
``c_fc + act`` entries of model_profiler/fusion.py) replace, in each MLP the entry names, ``c_fc``'s forward
by one call of ``kernelfarm::tuned_matmul_bias_gelu`` (product, bias and GELU in one launch) and ``act``'s by
the identity, for those modules only. Where both a fused entry and a plain product cover a ``c_fc``, the
fused one is swapped in.

The outputs are checked against a float32 copy of the model (same weights and inputs; made for the check
and freed after): the fused kernel rounds once where eager rounds after each of GELU's elementwise
operators, so the swapped model may sit further from eager than eager sits from the exact result while
being no less accurate. It passes when its error against float32 is at most the larger of the fixed
tolerance and ``EAGER_ERROR_FACTOR`` times eager's own error, in relative L2 and in the largest element.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelfarm.model_profiler.capture import latency
from kernelfarm.model_profiler.models import ModelUnderTest

logger = logging.getLogger(__name__)
SWAPPABLE = frozenset({"matmul_triton"})
FUSED_SWAPPABLE = frozenset({"matmul_bias_gelu_triton"})
# The swapped model's outputs match when their error against the float32 model (relative L2 of the
# logits) stays under the larger of this and EAGER_ERROR_FACTOR times eager's own error, and no element is
# further off than the larger of MAX_ERROR_OF_SCALE times the largest logit and EAGER_ERROR_FACTOR times
# eager's largest element error: bf16 products accumulated in fp32 in another order differ by about 1e-3
# relative; a GELU rounded once instead of after each of its ops moves the logits by about eager's own error.
REL_L2_TOLERANCE = 1e-2
MAX_ERROR_OF_SCALE = 5e-2
EAGER_ERROR_FACTOR = 1.5
# Baseline and swapped model are timed by turns, this many blocks each.
AB_ROUNDS = 3

_registered = False


def _register_op() -> None:
    """Define ``kernelfarm::tuned_matmul`` and ``kernelfarm::tuned_matmul_bias_gelu`` once (torch refuses
    a second definition)."""
    global _registered
    if _registered:
        return
    import torch

    # The schemas are spelled out: this module's annotations are strings (from __future__ import
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

    @torch.library.custom_op(
        "kernelfarm::tuned_matmul_bias_gelu", mutates_args=(),
        schema="(Tensor a, Tensor b, Tensor bias, bool b_nk, str gelu, int[] config) -> Tensor",
    )  # fmt: skip
    def tuned_matmul_bias_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, b_nk: bool, gelu: str,
                               config: list[int]) -> torch.Tensor:  # fmt: skip
        return _launch_fused(a, b, bias, b_nk, gelu, config)

    @tuned_matmul_bias_gelu.register_fake
    def _fake(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, b_nk: bool, gelu: str,
              config: list[int]) -> torch.Tensor:  # fmt: skip
        return a.new_empty((a.shape[0], bias.shape[0]))

    _registered = True


def _config_order(kernel: str = "matmul_triton") -> list[str]:
    """The config's parameters in the kernel's space order: how the config travels through the custom
    operator (its schema takes a list of ints, not a dict)."""
    from kernelfarm.kernels.registry import get_kernel

    return [p.name for p in get_kernel(kernel).space.parameters]


def _launch(a: Any, b: Any, b_nk: bool, config: list[int]) -> Any:
    """C = A @ B (B given N x K when ``b_nk``) with matmul_triton's jit functions and one config."""
    return _run("matmul_triton", a, b, b_nk, config, (), {})


def _launch_fused(a: Any, b: Any, bias: Any, b_nk: bool, gelu: str, config: list[int]) -> Any:
    """C = GELU(A @ B + bias), GELU in the given form, with matmul_bias_gelu_triton and one config."""
    return _run("matmul_bias_gelu_triton", a, b, b_nk, config, (("gelu", gelu),), {"bias": bias})


@dataclass(frozen=True)
class _Launcher:
    """Everything about one launch that depends only on the kernel, the problem and the config, worked
    out once: an eager model calls the swapped kernel on every inference, and the spec's own calls
    (registry, argument map, grid, constexprs) cost more host time than the launches they replace."""

    function: Any  # the @triton.jit function
    grid: tuple[int, ...]
    fixed: dict[str, Any]  # sizes, strides, constexprs and compile options
    buffers: tuple[tuple[str, str], ...]  # (argument, buffer): passed by pointer
    descriptors: tuple[tuple[str, str, list[int], list[int], list[int]], ...]  # (argument, buffer, TMA)


_launchers: dict[tuple[Any, ...], _Launcher] = {}


def _launcher(kernel: str, problem: dict[str, Any], config: tuple[int, ...], sms: int) -> _Launcher:
    import importlib

    from kernelfarm.kernels.registry import get_kernel
    from kernelfarm.kernels.triton_kernel import BufferArg, TensorDescriptorArg, TritonKernel

    impl = get_kernel(kernel).impl("triton", TritonKernel)
    values = dict(zip(_config_order(kernel), config, strict=True))
    fixed: dict[str, Any] = {}
    buffers, descriptors = [], []
    for name, value in impl.arguments(values, problem, sms).items():
        if isinstance(value, BufferArg):
            buffers.append((name, value.buffer))
        elif isinstance(value, TensorDescriptorArg):
            descriptors.append((name, value.buffer, list(value.shape), list(value.strides), list(value.block_shape)))
        else:
            fixed[name] = value
    fixed |= impl.constexprs(values, problem) | impl.options(values)
    function = getattr(importlib.import_module(impl.module), impl.entry(values))
    return _Launcher(function, impl.grid(values, problem, sms).dims, fixed, tuple(buffers), tuple(descriptors))


def _run(kernel: str, a: Any, b: Any, b_nk: bool, config: list[int], problem_extra: tuple[tuple[str, str], ...],
         buffers_extra: dict[str, Any]) -> Any:  # fmt: skip
    """Launch one farm kernel exactly as the farm's triton backend launches it: the kernel spec gives the
    jit function, its constexprs, compile options, grid and arguments (buffers and TMA descriptors by name)."""
    import torch

    m, k = a.shape
    n = b.shape[0] if b_nk else b.shape[1]
    key = (kernel, m, n, k, a.dtype, b_nk, problem_extra, tuple(config), a.device)
    launcher = _launchers.get(key)
    if launcher is None:
        dtype = {torch.bfloat16: "bfloat16", torch.float16: "float16"}[a.dtype]
        problem = {"M": m, "N": n, "K": k, "dtype": dtype, "b_layout": "nk" if b_nk else "kn", **dict(problem_extra)}
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count
        launcher = _launchers[key] = _launcher(kernel, problem, tuple(config), sms)
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    tensors = {"A": a, "B": b, "C": c, **buffers_extra}
    direct = _direct.get(key)
    if direct is not None and _DirectLaunch.aligned(tensors):
        direct.launch(tensors)
        return c
    compiled = _launch_jit(launcher, tensors)
    if key not in _direct and DIRECT_LAUNCH and _DirectLaunch.aligned(tensors):
        _direct[key] = _DirectLaunch.checked(launcher, compiled, tensors, c)
    return c


def _descriptor(launcher: _Launcher, name: str, tensor: Any) -> Any:
    from triton.tools.tensor_descriptor import TensorDescriptor

    for argument, _, shape, strides, block in launcher.descriptors:
        if argument == name:
            return TensorDescriptor(tensor, shape, strides, block)
    raise KeyError(name)


def _launch_jit(launcher: _Launcher, tensors: dict[str, Any]) -> Any:
    """Through the jit function (Triton binds the arguments, looks the compiled kernel up, compiles it the
    first time); returns the compiled kernel."""
    arguments = {name: tensors[buffer] for name, buffer in launcher.buffers}
    for name, buffer, *_ in launcher.descriptors:
        arguments[name] = _descriptor(launcher, name, tensors[buffer])
    return launcher.function[launcher.grid](**arguments, **launcher.fixed)


# Whether eager calls launch the compiled kernel directly once it was checked (see _DirectLaunch); the
# benchmarks turn it off to measure the jit function's own path.
DIRECT_LAUNCH = True


class _DirectLaunch:
    """The compiled kernel launched without the jit function's per-call work. ``JITFunction.run`` binds
    the keyword arguments, works out their specialisation and looks the kernel up on every call: 52 us of
    host time per fused-MLP call on the H100 host (TMA config; 28 us launched directly), against ~15 us for
    each torch operator it replaces, and eager GPT-2 is bound by the host's enqueueing
    (benchmarks/profiler/launch_host.py). The problem's sizes and
    strides are fixed per launcher, so the only specialisation that could change between calls is the
    buffers' 16-byte alignment (Triton specialises pointers on it): the direct path is taken only when
    every buffer is aligned, as it was when the kernel was compiled. The weight's TMA descriptor is made
    once per weight. Taken only after one launch through it matched the jit function's output exactly."""

    def __init__(self, launcher: _Launcher, compiled: Any) -> None:
        self.launcher = launcher
        grid = (*launcher.grid, 1, 1)[:3]
        self.runner = compiled[grid]  # CompiledKernel.__getitem__: its launch, without the jit function
        params = launcher.function.params
        self.slots: list[tuple[str, Any]] = []  # (kind, what) per parameter, in the kernel's order
        buffers, descriptors = dict(launcher.buffers), {d[0]: d[1] for d in launcher.descriptors}
        for param in params:
            name = param.name
            if name in buffers:
                self.slots.append(("buffer", buffers[name]))
            elif name in descriptors:
                self.slots.append(("descriptor", (name, descriptors[name])))
            elif name in launcher.fixed:
                self.slots.append(("value", launcher.fixed[name]))
            else:
                self.slots.append(("value", param.default))
        self.weight_descriptors: dict[int, Any] = {}

    @staticmethod
    def aligned(tensors: dict[str, Any]) -> bool:
        return all(t.data_ptr() % 16 == 0 for t in tensors.values())

    def arguments(self, tensors: dict[str, Any]) -> list[Any]:
        values = []
        for kind, what in self.slots:
            if kind == "buffer":
                values.append(tensors[what])
            elif kind == "descriptor":
                name, buffer = what
                tensor = tensors[buffer]
                if buffer == "B":  # the module's weight: the same tensor on every call
                    descriptor = self.weight_descriptors.get(tensor.data_ptr())
                    if descriptor is None or descriptor.base is not tensor:
                        descriptor = _descriptor(self.launcher, name, tensor)
                        self.weight_descriptors[tensor.data_ptr()] = descriptor
                    values.append(descriptor)
                else:
                    values.append(_descriptor(self.launcher, name, tensor))
            else:
                values.append(what)
        return values

    def launch(self, tensors: dict[str, Any]) -> None:
        self.runner(*self.arguments(tensors))

    @classmethod
    def checked(cls, launcher: _Launcher, compiled: Any, tensors: dict[str, Any],
                expected: Any) -> _DirectLaunch | None:  # fmt: skip
        """The direct launch when one launch of it gives exactly the jit function's output (``expected``,
        launched just before on the same inputs), else None: the eager calls keep the jit function."""
        import torch

        try:
            direct = cls(launcher, compiled)
            out = torch.empty_like(expected)
            direct.launch({**tensors, "C": out})
            same = bool(torch.equal(out, expected))
        except Exception:  # another Triton's internals: the jit function's path still works
            logger.warning("direct launch of %s unavailable; using the jit function", launcher.function, exc_info=True)
            return None
        if not same:
            logger.warning("direct launch of %s differs from the jit function's; using the jit function",
                           launcher.function)  # fmt: skip
            return None
        return direct


_direct: dict[tuple[Any, ...], _DirectLaunch | None] = {}


def _call(op: str, launch: Callable[..., Any], *args: Any) -> Any:
    """The custom operator while torch.compile traces (it needs the operator), the launch itself in eager
    mode: the same kernel and config, without the dispatcher's own host time on every call."""
    import torch

    if torch.compiler.is_compiling():
        return getattr(torch.ops.kernelfarm, op)(*args)
    return launch(*args)


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

    original = module.forward
    weight = padded_weight(module.weight.detach(), n, n_pad, b_nk)  # once, not per call

    def forward(x: Any) -> Any:
        x2d = x.reshape(-1, k)
        if x2d.shape[0] != rows or not x2d.is_contiguous():
            return original(x)  # another shape than the one tuned: leave it to torch
        out = _call("tuned_matmul", _launch, x2d, weight, b_nk, config)[:, :n]
        if getattr(module, "bias", None) is not None:
            out = out + module.bias
        return out.reshape(*x.shape[:-1], n)

    return forward


def swap_in(model: Any, entry: dict[str, Any], taken: frozenset[str] = frozenset()) -> list[str]:
    """Replace the forward of every module computing the tuned product (except those in ``taken``, already
    swapped for a fused kernel); returns their names."""
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
        if name in taken or not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            continue
        is_linear = isinstance(module, torch.nn.Linear)
        is_conv1d = type(module).__name__ == "Conv1D"  # transformers' GPT-2 projection: x @ W + b
        if (b_nk and is_linear and tuple(weight.shape) == (n, k)) or (
            not b_nk and is_conv1d and tuple(weight.shape) == (k, n)
        ):
            module.forward = _forward(module, k, n, n_pad, rows, b_nk, values)
            swapped.append(name)
    return swapped


def _identity(x: Any) -> Any:
    return x


def _fused_forward(c_fc: Any, act: Any, k: int, n: int, rows: int, b_nk: bool, gelu: str,
                   config: list[int]) -> Callable[[Any], Any]:  # fmt: skip

    original_fc, original_act = c_fc.forward, act.forward  # the modules' own (act's becomes the identity)
    weight = c_fc.weight.detach().contiguous()
    bias = c_fc.bias.detach() if getattr(c_fc, "bias", None) is not None else weight.new_zeros(n)

    def forward(x: Any) -> Any:
        x2d = x.reshape(-1, k)
        if x2d.shape[0] != rows or not x2d.is_contiguous():
            return original_act(original_fc(x))  # another shape than the one tuned: torch, GELU included
        out = _call("tuned_matmul_bias_gelu", _launch_fused, x2d, weight, bias, b_nk, gelu, config)
        return out.reshape(*x.shape[:-1], n)

    return forward


def swap_in_fused(model: Any, entry: dict[str, Any]) -> list[str]:
    """In each MLP the fused entry names (``modules``) that still has the tuned form, ``c_fc`` computes
    GELU(x @ W + b) with the tuned kernel and ``act`` becomes the identity; returns the swapped modules'
    names (``c_fc`` and ``act`` of each)."""
    from kernelfarm.model_profiler.fusion import find_mlps

    _register_op()
    problem, config = entry["kernel_problem"], entry["config"]
    k, n, rows = int(problem["K"]), int(problem["N"]), int(problem["M"])
    values = [int(config[name]) for name in _config_order("matmul_bias_gelu_triton")]
    wanted = set(entry.get("modules", ()))
    swapped = []
    for mlp in find_mlps(model):
        same = (mlp.n, mlp.k, mlp.b_layout, mlp.gelu) == (n, k, problem["b_layout"], problem["gelu"])
        if mlp.name not in wanted or not same:
            continue
        forward = _fused_forward(mlp.c_fc, mlp.act, k, n, rows, mlp.b_layout == "nk", mlp.gelu, values)
        mlp.c_fc.forward, mlp.act.forward = forward, _identity
        prefix = f"{mlp.name}." if mlp.name else ""
        swapped += [f"{prefix}c_fc", f"{prefix}act"]
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

    def wanted(entry: dict[str, Any]) -> bool:
        faster = entry.get("speedup") is not None and entry["speedup"] > 1.0
        return bool(entry.get("config")) and faster and entry.get("kernel") in SWAPPABLE | FUSED_SWAPPABLE

    # fused entries first: a c_fc they take is not swapped again for its plain product
    chosen = sorted(filter(wanted, entries), key=lambda e: e.get("kernel") not in FUSED_SWAPPABLE)
    reference = logits()
    # the float32 copy only where there is something to check, and before any swap (a copy would carry it)
    exact = float32_logits(mut) if chosen and mut.dtype != "float32" else reference
    swapped: dict[str, list[str]] = {}
    taken: set[str] = set()
    for entry in chosen:
        if entry.get("kernel") in FUSED_SWAPPABLE:
            names = swap_in_fused(mut.model, entry)
            taken |= set(names)
        else:
            names = swap_in(mut.model, entry, frozenset(taken))
        swapped[f"{entry['operator']} {entry['kernel_problem']}"] = names
    result: dict[str, Any] = {"swapped": swapped, "profile_latency_ms": baseline_ms}
    if not any(swapped.values()):
        before_ms = statistics.median(block())
        result.update(baseline_ms=before_ms, swapped_ms=before_ms, speedup=1.0, max_abs_error=0.0,
                      rel_l2_error=0.0, outputs_match=True,
                      note="no tuned operator was both faster than its baseline and swappable")  # fmt: skip
        return result
    out = logits()
    error = out - reference
    result.update(max_abs_error=float(error.abs().max()), rel_l2_error=float(error.norm() / reference.norm()))
    result.update(output_check(reference, out, exact, float32_copy=exact is not reference))
    # Baseline and swapped model are timed by turns (A B A B A B), in the conditions of this moment: the
    # profile's latency was taken before the tuning jobs ran, and a farm on the same host (its compile
    # pool, a measuring child) loads the CPU that launches eager kernels by spells; timed one after the
    # other, a spell on either side would count as the swap's gain or loss.
    every = {name for swapped_names in swapped.values() for name in swapped_names}
    forwards = {name: module.__dict__["forward"] for name, module in mut.model.named_modules() if name in every}
    before: list[float] = []
    after: list[float] = []
    for _ in range(AB_ROUNDS):
        _set_swapped(mut.model, forwards, on=False)
        before += block()
        _set_swapped(mut.model, forwards, on=True)
        after += block()
    before_ms, swapped_ms = statistics.median(before), statistics.median(after)
    result.update(
        baseline_ms=before_ms, swapped_ms=swapped_ms, speedup=before_ms / swapped_ms, rounds=AB_ROUNDS,
        baseline_runs_ms=before, swapped_runs_ms=after,
    )  # fmt: skip
    return result


def output_check(eager: Any, swapped: Any, exact: Any, *, float32_copy: bool) -> dict[str, Any]:
    """Whether the swapped logits match: their error against ``exact`` (the float32 model's logits, or
    eager's own when the model is float32) within the larger of the fixed tolerance and
    ``EAGER_ERROR_FACTOR`` times eager's error, in relative L2 and in the largest element; every figure."""
    norm, scale = float(exact.norm()), float(exact.abs().max())
    eager_rel, swapped_rel = float((eager - exact).norm()) / norm, float((swapped - exact).norm()) / norm
    eager_max, swapped_max = float((eager - exact).abs().max()), float((swapped - exact).abs().max())
    rel_tolerance = max(REL_L2_TOLERANCE, EAGER_ERROR_FACTOR * eager_rel)
    max_tolerance = max(MAX_ERROR_OF_SCALE * scale, EAGER_ERROR_FACTOR * eager_max)
    return {
        "reference": "a float32 copy of the model" if float32_copy else "eager (the model is float32)",
        "eager_rel_l2_vs_float32": eager_rel, "swapped_rel_l2_vs_float32": swapped_rel,
        "eager_max_abs_vs_float32": eager_max, "swapped_max_abs_vs_float32": swapped_max,
        "rel_l2_tolerance": rel_tolerance, "max_abs_tolerance": max_tolerance,
        "outputs_match": swapped_rel <= rel_tolerance and swapped_max <= max_tolerance,
    }  # fmt: skip


def float32_logits(mut: ModelUnderTest) -> Any:
    """The logits of a float32 copy of the model (same weights, the same inputs with floating ones made
    float32), as float32; the copy is freed before this returns. Call it before anything is swapped in:
    a copy would carry the swapped forwards."""
    import copy

    import torch

    from kernelfarm.model_profiler.models import _Positional

    clone = copy.deepcopy(mut.model)
    (clone.model if isinstance(clone, _Positional) else clone).float()
    inputs = {name: value.float() if isinstance(value, torch.Tensor) and value.is_floating_point() else value
              for name, value in mut.inputs.items()}  # fmt: skip
    try:
        with torch.inference_mode():
            out = clone(**inputs)
        return (out.logits if hasattr(out, "logits") else out).float()
    finally:
        del clone
        if mut.device.startswith("cuda"):
            torch.cuda.empty_cache()
