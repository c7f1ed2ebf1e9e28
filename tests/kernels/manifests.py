"""Manifest kernels for the tests: the user kernel in tests/data/user_kernel/ and Kernel Tuner's
examples in docs/examples/kernel_tuner/ (their .cu files are not in the repository: a stand-in that
declares the entry function lets the tests check the manifest itself)."""

from __future__ import annotations

from pathlib import Path

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
