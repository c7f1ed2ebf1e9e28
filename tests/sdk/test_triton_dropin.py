"""The Triton drop-in's choice of config, on CPU: a stand-in for the ``@triton.jit`` function with the
same interface (``arg_names``, ``fn[grid](*args, **meta)``) and for ``triton.autotune``. The real
kernel runs in tests/gpu/test_triton_dropin_gpu.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from kernelfarm.core.exports import json_format, triton
from kernelfarm.sdk.lookup import BestConfigLookup
from kernelfarm.sdk.triton_autotune import autotune
from kernelfarm.testing.exports import sample_export

H100 = "NVIDIA H100 80GB HBM3"


class JitStandIn:
    """What the drop-in uses of a JITFunction: its argument names and ``fn[grid](...)``."""

    arg_names: ClassVar[list[str]] = ["a_ptr", "c_ptr", "M", "N", "K", "BLOCK_SIZE_M", "BLOCK_SIZE_N"]

    def __init__(self) -> None:
        self.launches: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def __getitem__(self, grid: Any) -> Any:
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))


class AutotuneStandIn:
    """``triton.autotune(configs=..., key=...)(fn)``: records that Triton's own tuning was used."""

    def __init__(self) -> None:
        self.built: list[dict[str, Any]] = []
        self.calls: list[tuple[Any, tuple[Any, ...]]] = []

    def __call__(self, **kwargs: Any) -> Any:
        self.built.append(kwargs)

        def wrap(fn: Any) -> Any:
            outer = self

            class Tuned:
                def __getitem__(self, grid: Any) -> Any:
                    return lambda *args, **kw: outer.calls.append((grid, args))

            return Tuned()

        return wrap


def write_triton_files(folder: Path) -> None:
    for name, text in triton.write(sample_export()).items():
        (folder / name).write_text(text)


def test_pinned_export_gives_the_config_of_this_device_and_shape(tmp_path: Path) -> None:
    write_triton_files(tmp_path)
    jit, tuner = JitStandIn(), AutotuneStandIn()
    kernel = autotune(configs=["c1", "c2"], key=["M", "N", "K"], kernel="matmul_demo", export=tmp_path,
                      device_name=H100, autotune_factory=tuner)(jit)  # fmt: skip
    kernel["grid"]("a", "c", 1024, 1024, 1024)
    kernel["grid"]("a", "c", 1024, 1024, 1024)  # chosen once per key, launched each time
    kernel["grid"]("a", "c", 4096, 4096, K=4096)  # key arguments by keyword too
    assert [launch[2] for launch in jit.launches] == [
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "num_warps": 4, "num_stages": 4},
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "num_warps": 4, "num_stages": 4},
        {"K": 4096, "BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "num_warps": 8, "num_stages": 3},
    ]
    assert jit.launches[0][:2] == ("grid", ("a", "c", 1024, 1024, 1024))
    assert len(kernel.choices) == 2 and not tuner.built  # Triton's autotuning never started
    # An unrecorded shape takes the nearest recorded one of this device's file (as vLLM does).
    kernel["grid"]("a", "c", 2048, 1024, 1024)
    assert kernel.choices[(2048, 1024, 1024)].shape_key == "M=1024,N=1024,K=1024"


def test_no_config_anywhere_falls_back_to_tritons_autotuning(tmp_path: Path) -> None:
    write_triton_files(tmp_path)
    jit, tuner = JitStandIn(), AutotuneStandIn()
    # No file for this device in the folder: Triton tunes, with the configs and key it was given.
    kernel = autotune(configs=["c1", "c2"], key=["M"], kernel="matmul_demo", export=tmp_path,
                      device_name="NVIDIA GeForce RTX 4090", autotune_factory=tuner, warmup=5)(jit)  # fmt: skip
    kernel["g"]("a", "c", 64, 64, 64)
    kernel["g"]("a", "c", 128, 64, 64)
    assert tuner.built == [{"configs": ["c1", "c2"], "key": ["M"], "warmup": 5}]  # built once
    assert tuner.calls == [("g", ("a", "c", 64, 64, 64)), ("g", ("a", "c", 128, 64, 64))]
    assert not jit.launches and kernel.choices[(64,)].source == "autotune"


def test_the_farm_lookup_answers_when_no_export_does(tmp_path: Path) -> None:
    export_file = tmp_path / "best.json"
    export_file.write_text(json_format.write(sample_export()))
    lookup = BestConfigLookup("matmul_demo", export=export_file, gpu="NVIDIA A100-SXM4-80GB", cache_file=None)
    jit, tuner = JitStandIn(), AutotuneStandIn()
    kernel = autotune(configs=[], key=["M", "N", "K"], kernel="matmul_demo", lookup=lookup, autotune_factory=tuner)(jit)
    kernel["g"]("a", "c", 4096, 4096, 4096)
    assert jit.launches[0][2] == {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "num_warps": 4, "num_stages": 3}
    assert kernel.choices[(4096, 4096, 4096)].source == "lookup:export" and not tuner.built


def test_shape_keys_whose_values_are_no_ascii_integer_are_text(tmp_path: Path) -> None:
    """A pinned file may come from elsewhere (vLLM's, a hand-edited one): ``"²"`` and ``"--5"`` once
    raised ValueError from int() when the decorator loaded the file, and ``"٣"`` (an Arabic-Indic 3)
    was read as the shape M=3."""
    shapes = {"M=²": {"BLOCK_SIZE_M": 1}, "M=--5": {"BLOCK_SIZE_M": 2}, "M=٣": {"BLOCK_SIZE_M": 3},
              "M=8": {"BLOCK_SIZE_M": 8}}  # fmt: skip
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(shapes))
    assert [triton.parse_shape_key(key) for key in shapes] == [{"M": "²"}, {"M": "--5"}, {"M": "٣"}, {"M": 8}]
    jit, tuner = JitStandIn(), AutotuneStandIn()
    kernel = autotune(configs=[], key=["M"], kernel="probe", export=path, autotune_factory=tuner)(jit)
    kernel["g"]("a", "c", 3, 1, 1)  # M=3 is not "٣": the nearest integer shape is M=8
    assert (kernel.choices[(3,)].shape_key, jit.launches[0][2]) == ("M=8", {"BLOCK_SIZE_M": 8})
