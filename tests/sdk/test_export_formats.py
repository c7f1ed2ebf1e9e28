"""The best-config writers on a hand-built export (several GPU models and problems): the json schema
round-trips, the header compiles with a C and a C++ compiler and gives each target its values, the
triton files read back. The trial formats are round-tripped against a real farm in
tests/e2e/test_exports_client_ci.py (Kernel Tuner loads the cache there)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports import header, json_format, triton
from kernelfarm.core.exports.model import BestExport
from kernelfarm.testing.exports import sample_export

PROGRAM = """
#include <stdio.h>
#include "matmul_demo.h"
int main(void) {
    printf("%d %d %d %d\\n", MATMUL_DEMO_BLOCK_SIZE_M, MATMUL_DEMO_BLOCK_SIZE_N,
           MATMUL_DEMO_NUM_WARPS, MATMUL_DEMO_NUM_STAGES);
    printf("%d %d\\n", MATMUL_DEMO_M1024_N1024_K1024_BLOCK_SIZE_M, MATMUL_DEMO_M4096_N4096_K4096_BLOCK_SIZE_M);
    return 0;
}
"""


def test_json_round_trips() -> None:
    export = sample_export()
    assert json_format.read(json_format.write(export)) == export


def test_json_refuses_other_files_with_a_reason() -> None:
    with pytest.raises(InvalidInput, match=r"not a kernelfarm\.best-export"):
        json_format.read('{"kernel": "x"}')
    newer = sample_export().model_copy(update={"schema_version": "2.0"})
    with pytest.raises(InvalidInput, match=r"version 2\.0 is not readable"):
        json_format.read(newer.model_dump_json())


def compile_and_run(
    compiler: str, source_suffix: str, folder: Path, export: BestExport, *defines: str
) -> list[list[int]]:
    (folder / "matmul_demo.h").write_text(header.write(export))
    source = folder / f"main{source_suffix}"
    source.write_text(PROGRAM)
    binary = folder / f"main-{compiler}-{'-'.join(defines) or 'default'}"
    flags = ["-Wall", "-Werror", "-pedantic"] + [f"-D{d}" for d in defines]
    built = subprocess.run([compiler, *flags, "-o", str(binary), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    return [[int(x) for x in line.split()] for line in out.splitlines()]


@pytest.mark.parametrize(("compiler", "suffix"), [("gcc", ".c"), ("g++", ".cpp")])
def test_header_compiles_and_selects_by_target(compiler: str, suffix: str, tmp_path: Path) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    export = sample_export()
    h100 = compile_and_run(compiler, suffix, tmp_path, export, "KERNELFARM_TARGET_NVIDIA_H100_80GB_HBM3")
    assert h100 == [[128, 256, 8, 3], [64, 128]]  # default problem (4096) unsuffixed; per-problem macros
    a100 = compile_and_run(compiler, suffix, tmp_path, export, "KERNELFARM_TARGET_NVIDIA_A100_SXM4_80GB")
    assert a100 == [[128, 128, 4, 3], [128, 128]]  # 1024 not measured on the A100: its own default
    default = compile_and_run(compiler, suffix, tmp_path, export)
    assert default == [[128, 128, 4, 3], [128, 128]]  # best on most GPU models and problems (A100 and L4)


def test_header_names_every_target_and_the_measurements() -> None:
    text = header.write(sample_export())
    for model in ("NVIDIA_H100_80GB_HBM3", "NVIDIA_A100_SXM4_80GB", "NVIDIA_L4"):
        assert f"defined(KERNELFARM_TARGET_{model})" in text
    assert "#else" in text and "0.5 ms for M=4096,N=4096,K=4096" in text


def test_triton_files_per_device_round_trip() -> None:
    export = sample_export()
    files = triton.write(export)
    assert sorted(files) == [
        "matmul_demo,device_name=NVIDIA_A100-SXM4-80GB.json",
        "matmul_demo,device_name=NVIDIA_H100_80GB_HBM3.json",
        "matmul_demo,device_name=NVIDIA_L4.json",
    ]
    h100 = triton.read(files["matmul_demo,device_name=NVIDIA_H100_80GB_HBM3.json"])
    assert h100 == {
        "M=1024,N=1024,K=1024": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "num_warps": 4, "num_stages": 4},
        "M=4096,N=4096,K=4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "num_warps": 8, "num_stages": 3},
    }
    assert triton.parse_shape_key("M=1024,dtype=bf16") == {"M": 1024, "dtype": "bf16"}
    assert triton.parse_shape_key("256") == {"": 256}  # vLLM's batch-size keys
    with pytest.raises(InvalidInput):
        triton.read("[1, 2]")
