"""The kernel manifest format, version 1 (``format = "kernelfarm.kernel/1"``).

Each field maps onto what a Kernel Tuner user already writes for ``tune_kernel``:

=========================  ==============================================================
manifest                   Kernel Tuner
=========================  ==============================================================
``source.files[0]``        ``kernel_source``
``source.entry``           ``kernel_name`` (``name_expression``: a template instantiation)
``tune_params``            ``tune_params``
``restrictions``           ``restrictions`` (the farm's safe expression language)
``launch.problem_size``    ``problem_size`` (expressions over the problem parameters)
``launch.grid_div_x/y/z``  ``grid_div_x/y/z``
``launch.block_size_names``  ``block_size_names``
``source.defines``         ``defines`` (every tune parameter is defined too, as in KT)
``arguments``              ``arguments`` (buffers with shape, dtype, initial values; scalars)
``constant_memory``        ``cmem_args``
``outputs``                ``answer`` (which arguments are checked)
``reference``              ``answer``: a built-in reference or a second, naive CUDA kernel
``tolerance``              ``atol``
``recording``              ``cache`` (a Kernel Tuner cache file of this kernel)
=========================  ==============================================================

The models are the validator: a bad manifest fails with the path of the field (``launch.grid_div_x.0``)
and why. ``schema.json`` next to this module is generated from them (``manifest_json_schema``) and
shipped in the package; a test keeps the two equal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kernelfarm.kernels.spec import PROBLEM_TEXT, PROBLEM_TEXT_RULE

FORMAT = "kernelfarm.kernel/1"
SCHEMA_PATH = Path(__file__).with_name("schema.json")

Identifier = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
Expression = Annotated[str, Field(min_length=1, max_length=500)]
FileName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$", max_length=128)]
TuneValue = int | float | str
# uniqueItems: JSON Schema's equality (1 and 1.0 are one value); the upload also refuses values whose
# text is the same ("1" and 1), since a config's key is its values' text (core/space.py Parameter).
TuneValues = Annotated[list[TuneValue], Field(min_length=1, max_length=1024, json_schema_extra={"uniqueItems": True})]
DType = Literal["float16", "float32", "float64", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"]
BUILTIN_REFERENCES = ("matmul", "layernorm", "softmax", "conv2d", "attention")
# NVRTC options a manifest may add: they change code generation only. Options that read host files
# (--include-path, --pre-include) or write them are refused.
ALLOWED_COMPILER_OPTIONS = (
    "-use_fast_math", "--use_fast_math", "-lineinfo", "--extra-device-vectorization", "-ftz=", "-prec-div=",
    "-prec-sqrt=", "-fmad=", "--maxrregcount=", "-maxrregcount=", "-std=c++17", "-std=c++20", "-restrict",
    "--restrict",
)  # fmt: skip
# The same options matched whole, value included (new uploads, kernels/manifest/bundle.py): as prefixes,
# "-ftz=true --include-path=/" and "-std=c++17 -I/" passed, each one option to NVRTC.
WHOLE_COMPILER_OPTION = re.compile(
    r"--?use_fast_math|-lineinfo|--extra-device-vectorization|-(ftz|prec-div|prec-sqrt|fmad)=(true|false)"
    r"|--?maxrregcount=[0-9]{1,3}|-std=c\+\+(17|20)|--?restrict"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Entry(_Strict):
    """The ``__global__`` function to tune."""

    name: Annotated[str, Field(min_length=1, max_length=256)] = Field(
        description="function name as written in the source (plain C or C++ name)"
    )
    linkage: Literal["auto", "c", "c++"] = Field(
        default="auto",
        description='"c": the source declares it extern "C"; "c++": a C++ name, looked up through NVRTC '
        'name expressions; "auto" (Kernel Tuner\'s rule): wrapped in extern "C" unless the source has '
        'templates or its own extern "C"',
    )
    name_expression: Annotated[str, Field(min_length=1, max_length=256)] | None = Field(
        default=None,
        description="C++ name expression NVRTC instantiates and lowers, e.g. "
        '"matmul<float, 32>"; may use {param} placeholders filled from the config and problem',
    )


class Source(_Strict):
    files: list[FileName] = Field(
        min_length=1, max_length=16,
        description="uploaded files: the first is compiled, the others are headers it #includes by name",
    )  # fmt: skip
    entry: Entry
    defines: dict[Identifier, Expression] = Field(
        default_factory=dict, max_length=64,
        description="extra -D macros, as expressions over problem and tune parameters (every tune "
        "parameter is always defined under its own name)",
    )  # fmt: skip
    compiler_options: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=16)
    arch_specific: bool = Field(default=False, description="compile for sm_XXa (wgmma, setmaxnreg)")

    @field_validator("compiler_options")
    @classmethod
    def _allowed_options(cls, options: list[str]) -> list[str]:
        for option in options:
            if not option.startswith(ALLOWED_COMPILER_OPTIONS):
                raise ValueError(
                    f"compiler option {option!r} is not allowed (allowed: {list(ALLOWED_COMPILER_OPTIONS)})"
                )
        return options


class ProblemParam(_Strict):
    kind: Literal["int", "str"] = "int"
    default: int | str
    minimum: int = 1
    maximum: int = 1 << 31
    choices: list[int | str] | None = Field(default=None, max_length=256)

    @model_validator(mode="after")
    def _default_fits(self) -> ProblemParam:
        if self.kind == "int" and not isinstance(self.default, int):
            raise ValueError("default must be an integer for kind 'int'")
        if self.kind == "str" and not isinstance(self.default, str):
            raise ValueError("default must be a string for kind 'str'")
        if self.minimum > self.maximum:
            raise ValueError("minimum is above maximum")
        if self.kind == "int" and isinstance(self.default, int) and not self.minimum <= self.default <= self.maximum:
            raise ValueError(f"default {self.default} is outside [{self.minimum}, {self.maximum}]")
        if self.choices is not None and self.default not in self.choices:
            raise ValueError(f"default {self.default!r} is not one of the choices")
        if self.kind == "str":
            for value in [self.default, *(self.choices or [])]:
                if not isinstance(value, str) or not PROBLEM_TEXT.fullmatch(value):
                    raise ValueError(f"{value!r} is not a string problem value: those have {PROBLEM_TEXT_RULE}")
        return self


class Launch(_Strict):
    """Grid and block, as Kernel Tuner computes them: ``grid[d] = ceil(problem_size[d] / prod(grid_div_d))``
    and ``block[d] = config[block_size_names[d]]`` (256, 1, 1 when the name is not a tune parameter)."""

    problem_size: list[Expression] = Field(min_length=1, max_length=3)
    grid_div_x: list[Expression] | None = Field(default=None, max_length=8)
    grid_div_y: list[Expression] | None = Field(default=None, max_length=8)
    grid_div_z: list[Expression] | None = Field(default=None, max_length=8)
    block_size_names: list[Identifier] = Field(
        default_factory=lambda: ["block_size_x", "block_size_y", "block_size_z"], min_length=1, max_length=3
    )
    shared_memory: Expression = Field(default="0", description="dynamic shared memory bytes")


class Argument(_Strict):
    name: Identifier
    kind: Literal["buffer", "scalar"] = "buffer"
    dtype: DType = "float32"
    shape: list[Expression] | None = Field(default=None, min_length=1, max_length=6)
    init: Literal["random", "randn", "zeros", "ones", "arange"] = Field(
        default="random", description="random: uniform in [-1, 1); randn: standard normal; outputs are poisoned"
    )
    value: Expression | None = Field(default=None, description="scalars: an expression over the problem")

    @model_validator(mode="after")
    def _kind_fields(self) -> Argument:
        if self.kind == "buffer" and self.shape is None:
            raise ValueError("a buffer needs a shape")
        if self.kind == "scalar" and self.value is None:
            raise ValueError("a scalar needs a value")
        return self


class Reference(_Strict):
    """Exactly one of ``builtin`` (with ``inputs``), ``source`` (a naive CUDA kernel) and ``python``
    (an uploaded Python file: host code, accepted from admins only and run only by workers that opted
    in; docs/SECURITY.md)."""

    builtin: Literal["matmul", "layernorm", "softmax", "conv2d", "attention"] | None = None
    inputs: dict[Identifier, Identifier] = Field(
        default_factory=dict,
        description="builtin's operand -> argument name: matmul a, b; layernorm x (weight, bias); softmax x; "
        "conv2d input, weight; attention q, k, v",
    )
    options: dict[Identifier, int | float | bool] = Field(default_factory=dict, description="eps, causal, scale")
    source: FileName | None = Field(default=None, description="an uploaded .cu file with a naive kernel")
    entry: Identifier | None = Field(default=None, description='its extern "C" entry')
    grid: list[Expression] | None = Field(default=None, min_length=1, max_length=3)
    block: list[Expression] | None = Field(default=None, min_length=1, max_length=3)
    defines: dict[Identifier, Expression] = Field(default_factory=dict, max_length=64)
    arguments: list[Identifier] | None = Field(default=None, description="default: the kernel's argument list")
    python: FileName | None = Field(
        default=None,
        description="an uploaded .py file defining reference(buffers, problem) -> {output name: CuPy array}",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Reference:
        if sum(item is not None for item in (self.builtin, self.source, self.python)) != 1:
            raise ValueError("give exactly one of builtin, source and python")
        if self.source is not None and (self.entry is None or self.grid is None or self.block is None):
            raise ValueError("a CUDA reference needs entry, grid and block")
        return self


class Recording(_Strict):
    file: FileName = Field(description="a Kernel Tuner cache file (.json or .json.gz) of this kernel")
    problem: dict[Identifier, int | str] | None = Field(
        default=None, description="the problem it recorded; default: the default problem"
    )


class Manifest(_Strict):
    """A tunable CUDA kernel, as data."""

    format: Literal["kernelfarm.kernel/1"]
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_\-]*$", max_length=64)]
    description: Annotated[str, Field(max_length=2000)] = ""
    source: Source
    problem: dict[Identifier, ProblemParam] = Field(min_length=1, max_length=16)
    tune_params: dict[Identifier, TuneValues] = Field(min_length=1, max_length=32)
    restrictions: list[Expression] = Field(default_factory=list, max_length=64)
    launch: Launch
    arguments: list[Argument] = Field(min_length=1, max_length=32)
    constant_memory: dict[Identifier, Identifier] = Field(
        default_factory=dict, description="__constant__ symbol -> argument whose initial values it gets"
    )
    outputs: list[Identifier] = Field(min_length=1, max_length=8)
    reference: Reference
    tolerance: float = Field(default=1e-5, gt=0, le=1)
    flops: Expression = Field(default="0", description="useful floating-point operations of one launch")
    bytes: Expression = Field(default="0", description="minimum DRAM bytes of one launch")
    peak: Literal["fp32", "tensor"] = "fp32"
    recording: Recording | None = None

    @field_validator("tune_params")
    @classmethod
    def _values(cls, params: dict[str, list[TuneValue]]) -> dict[str, list[TuneValue]]:
        for name, values in params.items():
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: a value is listed twice")
        return params


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of the format (draft 2020-12), as shipped in ``schema.json``."""
    schema = Manifest.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "kernelfarm.kernel/1"
    return schema


def shipped_schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA_PATH.read_text()))
