"""The runtime lookup with no farm: an exported JSON file searched with /v1/best's fallback order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelfarm.core.exports import json_format
from kernelfarm.core.files import RefusedFile
from kernelfarm.sdk.lookup import BestConfigLookup, LookupMiss, find_in_export, problem_distance
from kernelfarm.testing.exports import sample_export

H100, A100 = "NVIDIA H100 80GB HBM3", "nvidia-a100-sxm4-80gb"


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    path = tmp_path / "matmul_demo.json"
    path.write_text(json_format.write(sample_export()))
    return path


def test_exact_then_nearest_problem_on_the_same_gpu_model(export_file: Path) -> None:
    lookup = BestConfigLookup("matmul_demo", export=export_file, gpu=H100, cache_file=None)
    exact = lookup.config({"M": 1024, "N": 1024, "K": 1024})
    assert (exact.match, exact.source, exact.config["block_size_m"]) == ("exact", "export", 64)
    default = lookup.config()  # the kernel's default problem (4096)
    assert (default.match, default.config["block_size_n"]) == ("exact", 256)
    near = lookup.config({"M": 1500, "N": 1024, "K": 1024})
    assert (near.match, near.problem["M"], near.gpu_model) == ("nearest_problem", 1024, "nvidia-h100-80gb-hbm3")


def test_same_architecture_then_a_miss_that_says_what_was_asked(export_file: Path) -> None:
    # An H800 is not in the export; its compute capability (9.0) is the H100's.
    h800 = BestConfigLookup(
        "matmul_demo", export=export_file, gpu="NVIDIA H800", compute_capability="9.0", cache_file=None
    )
    found = h800.config({"M": 4096, "N": 4096, "K": 4096})
    assert (found.match, found.gpu_model, found.config["block_size_n"]) == (
        "same_architecture",
        "nvidia-h100-80gb-hbm3",
        256,
    )
    unknown = BestConfigLookup(
        "matmul_demo", export=export_file, gpu="NVIDIA B200", compute_capability="10.0", cache_file=None
    )
    with pytest.raises(LookupMiss, match="nvidia-b200"):
        unknown.config()


def test_the_export_must_be_of_the_kernel(export_file: Path) -> None:
    with pytest.raises(ValueError, match="not 'softmax'"):
        BestConfigLookup("softmax", export=export_file, gpu=A100)
    with pytest.raises(ValueError, match="give a client"):
        BestConfigLookup("matmul_demo", gpu=A100)


def test_a_dimension_an_entry_leaves_out_reads_as_its_key_default() -> None:
    # An entry written before the kernel gained ``gelu`` (key default erf) has no gelu: it is the erf problem.
    base = sample_export()
    old = base.entries[0].model_copy(update={"problem": dict(base.entries[0].problem)})
    export = base.model_copy(
        update={"entries": [old], "default_problem": {**base.default_problem, "gelu": "erf"},
                "problem_key_defaults": {"gelu": "erf"}}
    )  # fmt: skip
    found = find_in_export(export, {**old.problem, "gelu": "erf"}, old.gpu_model, None)
    assert found is not None and found[1] == "exact"
    assert find_in_export(export, {**old.problem, "gelu": "tanh"}, old.gpu_model, None) is None
    assert problem_distance({"M": 8, "gelu": "erf"}, {"M": 8}, {"gelu": "erf"}) == 0.0


def test_an_export_that_is_no_regular_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    """A pinned export is read with the bound every client reads exports with (core/exports MAX_EXPORT_BYTES): a
    FIFO nobody writes to was waited on for good, and /dev/zero read until memory ran out."""
    fifo = tmp_path / "export.json"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(RefusedFile, match="not a regular file"):
            BestConfigLookup("convolution_kernel", export=path, gpu="nvidia-geforce-rtx-3090")
