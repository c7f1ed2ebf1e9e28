"""Manifest kernels for the tests: the user kernel in tests/data/user_kernel/ and Kernel Tuner's
examples in docs/examples/kernel_tuner/ (their .cu files are not in the repository: a stand-in that
declares the entry function lets the tests check the manifest itself)."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.bundle import Bundle, check_bundle, parse_manifest_text
from kernelfarm.kernels.spec import KernelSpec

REPO = Path(__file__).resolve().parents[2]
USER_KERNEL = REPO / "tests" / "data" / "user_kernel"
USER_MANIFEST = USER_KERNEL / "axpb.toml"
USER_FILES = ("axpb.cu", "axpb_common.h", "axpb_naive.cu")
# The same kernel in float16, including <cuda_fp16.h> from the CUDA Toolkit (worker/cuda/toolkit_headers.py)
HALF_MANIFEST = USER_KERNEL / "haxpb.toml"
HALF_FILES = ("haxpb.cu", "haxpb_naive.cu")
KT_EXAMPLES = REPO / "docs" / "examples" / "kernel_tuner"


def user_uploads() -> dict[str, bytes]:
    return {name: (USER_KERNEL / name).read_bytes() for name in USER_FILES}


def user_manifest() -> dict:
    return parse_manifest_text(USER_MANIFEST.read_bytes(), USER_MANIFEST.name)


def user_bundle() -> Bundle:
    return check_bundle(user_manifest(), user_uploads())


def user_spec(version: int = 1) -> KernelSpec:
    return build_spec(user_bundle(), version)


def half_bundle() -> Bundle:
    uploads = {name: (USER_KERNEL / name).read_bytes() for name in HALF_FILES}
    return check_bundle(parse_manifest_text(HALF_MANIFEST.read_bytes(), HALF_MANIFEST.name), uploads)


def example_bundle(name: str) -> tuple[Bundle, bool]:
    """A Kernel Tuner example's manifest with its .cu file when present (True), else a stand-in."""
    manifest = parse_manifest_text((KT_EXAMPLES / f"{name}.toml").read_bytes(), f"{name}.toml")
    source = manifest["source"]["files"][0]
    path = KT_EXAMPLES / source
    if path.is_file():
        return check_bundle(manifest, {source: path.read_bytes()}), True
    entry = manifest["source"]["entry"]["name"]
    stand_in = f"__global__ void {entry}(float *a, float *b, float *c) {{}}\n".encode()
    return check_bundle(manifest, {source: stand_in}), False


# A problem parameter of an upload at its widest: a 64-character name (the most a manifest's names have)
# and values up to 2**31 (10 digits): 1 + 64 + 1 + 10 characters of its kernel's problem keys, comma included.
WIDE_MAXIMUM = 1 << 31
NAME_LENGTH = 64


def with_problem_params(manifest: dict[str, Any], lengths: list[int]) -> dict[str, Any]:
    """``manifest`` with one more problem parameter per name length in ``lengths``, each of
    ``default = 2**31, minimum = 1, maximum = 2**31``; the kernel uses none of them."""
    out = copy.deepcopy(manifest)
    for index, length in enumerate(lengths):
        prefix = f"extra{index}_"
        assert len(prefix) <= length <= NAME_LENGTH, length
        name = (prefix + "x" * NAME_LENGTH)[:length]
        out["problem"][name] = {"default": WIDE_MAXIMUM, "minimum": 1, "maximum": WIDE_MAXIMUM}
    return out


def longest_problem(manifest: dict[str, Any]) -> dict[str, Any]:
    """The problem of ``manifest`` whose key is the longest: each parameter at its longest value."""
    problem: dict[str, Any] = {}
    for name, param in manifest["problem"].items():
        if param.get("choices"):
            candidates = param["choices"]
        elif param.get("kind") == "str":
            candidates = ["x" * NAME_LENGTH]  # the longest string problem value
        else:
            candidates = [param.get("minimum", 1), param.get("maximum", WIDE_MAXIMUM)]
        problem[name] = max(candidates, key=lambda value: len(str(value)))
    return problem


def with_problem_key_of(manifest: dict[str, Any], length: int) -> dict[str, Any]:
    """``manifest`` with problem parameters added until the key of its :func:`longest_problem` is
    ``length`` characters (as few parameters as it takes)."""
    key = ",".join(f"{name}={value}" for name, value in longest_problem(manifest).items())
    missing = length - len(key)
    per_param = 1 + 1 + len(str(WIDE_MAXIMUM))  # the comma, "=" and the value
    count = math.ceil(missing / (per_param + NAME_LENGTH))
    names = missing - count * per_param
    lengths = [names // count + (1 if i < names % count else 0) for i in range(count)]
    return with_problem_params(manifest, lengths)


def longest_config(manifest: dict[str, Any]) -> dict[str, Any]:
    """The config of ``manifest`` whose key is the longest (valid or not): each parameter at its
    longest value as text."""
    return {name: max(values, key=lambda value: len(str(value))) for name, values in manifest["tune_params"].items()}


def with_config_key_of(manifest: dict[str, Any], length: int, letter: str = "v") -> dict[str, Any]:
    """``manifest`` with a tune parameter ``variant`` of the values "w" and ``letter`` repeated, as many
    times as make the key of its :func:`longest_config` ``length`` characters."""
    key = ",".join(str(value) for value in longest_config(manifest).values())
    out = copy.deepcopy(manifest)
    out["tune_params"]["variant"] = ["w", letter * (length - len(key) - 1)]
    return out
