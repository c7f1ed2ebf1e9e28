"""The models the profiler can run: built-in architectures with random weights, or the user's own.

Built-ins are made from a transformers config (nothing is downloaded: the config is written here and
the weights are random), so their operators are those of the real architecture: GPT-2 (Conv1D
projections, GELU MLP, LayerNorm, tied LM head) and Llama (RMSNorm, SwiGLU, RoPE, grouped-query
attention through scaled_dot_product_attention).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelfarm.core.printable import one_line


class ModelError(ValueError):
    """A model that cannot be built (unknown name, a bad ``module:function``, a missing package)."""


@dataclass(frozen=True)
class BuiltIn:
    family: str  # "gpt2" or "llama"
    config: dict[str, Any]
    what: str


BUILT_INS: dict[str, BuiltIn] = {
    "gpt2": BuiltIn("gpt2", {}, "GPT-2 small: 12 layers, d=768, 12 heads, vocab 50257"),
    "gpt2-tiny": BuiltIn(
        "gpt2", {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 1024, "n_positions": 256,
         "bos_token_id": 0, "eos_token_id": 0},
        "GPT-2-shaped, 2 layers, d=64 (for CPU tests)",
    ),
    "llama": BuiltIn(
        "llama",
        {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 16, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 4096},
        "Llama-shaped ~1.1B (TinyLlama dimensions): RMSNorm, SwiGLU, RoPE, GQA via SDPA",
    ),
    "llama-tiny": BuiltIn(
        "llama",
        {"hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1024, "max_position_embeddings": 256},
        "Llama-shaped, 2 layers, d=64 (for CPU tests)",
    ),
}  # fmt: skip


@dataclass
class ModelUnderTest:
    name: str
    model: Any  # torch.nn.Module
    inputs: dict[str, Any]  # keyword arguments of model(**inputs)
    dtype: str
    device: str


def build(spec: str, *, dtype: str, batch: int, seq: int, device: str, seed: int = 0) -> ModelUnderTest:
    """A model in eval mode on ``device`` and its inputs.

    Args:
        spec: a built-in name (see :data:`BUILT_INS`) or ``module:function``; the function is called as
            ``function(dtype=..., batch=..., seq=..., device=...)`` and returns ``(model, inputs)`` with
            ``inputs`` a dict of keyword arguments (or a tuple of positional ones, wrapped here).
    Raises:
        ModelError: unknown name, import failure, or a function that does not return ``(model, inputs)``.
    """
    check_spec(spec)
    import torch

    torch_dtype = _torch_dtype(dtype)
    torch.manual_seed(seed)
    if spec in BUILT_INS:
        model, inputs = _built_in(BUILT_INS[spec], torch_dtype, batch, seq, device)
    else:
        model, inputs = _user_built(spec, _user_model(spec), dtype=torch_dtype, batch=batch, seq=seq, device=device)
        if isinstance(inputs, (tuple, list)):
            inputs = {f"arg{i}": value for i, value in enumerate(inputs)}
            model = _Positional(model, len(inputs))
    return ModelUnderTest(spec, model.eval(), dict(inputs), dtype, device)


def _user_built(spec: str, function: Callable[..., Any], **arguments: Any) -> tuple[Any, Any]:
    """``function(**arguments)``, checked to be ``(model, inputs)``: what the user's function raises, or a
    return value of another shape, is a ModelError (one line from the command), not a traceback."""
    call = f"{spec}(dtype=, batch=, seq=, device=)"
    try:
        built = function(**arguments)
    except Exception as exc:  # the user's code: anything it raises says why it cannot be profiled
        raise ModelError(f"{call} raised {exception_line(exc)}") from None
    if not isinstance(built, (tuple, list)) or len(built) != 2:
        raise ModelError(f"{call} returned {_kind(built)}, not (model, inputs)")
    model, inputs = built
    if not callable(model) or not callable(getattr(model, "eval", None)):
        raise ModelError(f"{call} returned {_kind(model)} as the model, not a torch.nn.Module")
    if isinstance(inputs, dict):
        if not all(isinstance(key, str) for key in inputs):
            raise ModelError(f"{call}: the inputs' keys must be the model's keyword argument names (text)")
    elif not isinstance(inputs, (tuple, list)):
        raise ModelError(f"{call} returned {_kind(inputs)} as the inputs, not a dict or a tuple")
    return model, inputs


def _kind(value: Any) -> str:
    return f"an object of type {type(value).__name__}" if value is not None else "None"


def exception_line(exc: BaseException) -> str:
    """An exception as one line of at most about 300 characters: its type and its message's first words."""
    text = one_line(" ".join(str(exc).split()))
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


DTYPES = ("bfloat16", "float16", "float32")


def check_spec(spec: str) -> None:
    """Refuse a model name that cannot be built, before anything is imported (torch included).

    Raises:
        ModelError: not a built-in name, nor ``module:function`` with a dotted module name and a function name.
    """
    if spec in BUILT_INS:
        return
    if ":" not in spec:
        known = ", ".join(sorted(BUILT_INS))
        raise ModelError(f"unknown model {spec!r}: use one of {known} or module:function")
    module_name, _, function_name = spec.partition(":")
    form = "give module:function, e.g. mypkg.models:build"
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise ModelError(f"model {spec!r}: {module_name!r} is not a module name ({form})")
    if not function_name.isidentifier():
        raise ModelError(f"model {spec!r}: {function_name!r} is not a function name ({form})")


def check_dtype(name: str) -> None:
    if name not in DTYPES:
        raise ModelError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}")


def _torch_dtype(name: str) -> Any:
    import torch

    check_dtype(name)
    return getattr(torch, name)  # DTYPES are torch's own names


def _built_in(built_in: BuiltIn, dtype: Any, batch: int, seq: int, device: str) -> tuple[Any, dict[str, Any]]:
    import torch

    try:
        import transformers
    except ImportError as exc:
        raise ModelError("built-in models need transformers: pip install 'kernelfarm[profile]'") from exc
    if built_in.family == "gpt2":
        config: Any = transformers.GPT2Config(**built_in.config)
        model_class: Any = transformers.GPT2LMHeadModel
        limit = config.n_positions
    else:
        config = transformers.LlamaConfig(**built_in.config)
        model_class = transformers.LlamaForCausalLM
        limit = config.max_position_embeddings
    if seq > limit:
        raise ModelError(f"sequence length {seq} exceeds the model's {limit} positions")
    config.use_cache = False  # one forward pass of a prompt: no KV cache to fill
    config._attn_implementation = "sdpa"
    # Made on the device itself: the random initialisation of a 1.1B-parameter model on the host's CPU
    # takes longer than its whole profile on a GPU.
    with torch.device(device):
        model = model_class(config).to(dtype=dtype)
    input_ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    return model, {"input_ids": input_ids}


def _user_model(spec: str) -> Callable[..., Any]:
    module_name, _, function_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelError(f"cannot import {module_name!r}: {exc}") from None
    except Exception as exc:  # the module's own code failed (a SyntaxError, what its top level raised)
        raise ModelError(f"cannot import {module_name!r}: {exception_line(exc)}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ModelError(f"{module_name!r} has no function {function_name!r}")
    return function


class _Positional:
    """Wraps a model called with positional inputs so every model is called as ``model(**inputs)``."""

    def __init__(self, model: Any, count: int) -> None:
        self.model, self.count = model, count

    def eval(self) -> _Positional:
        self.model.eval()
        return self

    def named_modules(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped model's modules, under their own names: what the swap and the MLP finder walk."""
        return self.model.named_modules(*args, **kwargs)

    def __call__(self, **inputs: Any) -> Any:
        return self.model(*(inputs[f"arg{i}"] for i in range(self.count)))
