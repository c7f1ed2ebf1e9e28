"""The CUDA Toolkit's headers for NVRTC (worker/cuda/toolkit_headers.py), without a GPU: what identifies
them in the cubin key, what the recorded options and a compile log say of their folders, and the extern "C"
wrap that keeps out of them. tests/gpu/test_nvrtc_includes.py compiles with them on the GPU machine."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.settings import Settings
from kernelfarm.kernels.manifest.cuda import compiled_text
from kernelfarm.worker.cuda.compiler import CompileJob
from kernelfarm.worker.cuda.toolkit_headers import PATHFINDER_LIBRARIES, ToolkitHeaders, find_toolkit_headers


def _toolkit(root: Path, fp16: str = "struct __half {};\n") -> list[Path]:
    """A toolkit's two include folders, the second inside the first, as the toolkit's include and its cccl/."""
    include = root / "include"
    (include / "cccl" / "cuda" / "std").mkdir(parents=True)
    (include / "cuda_fp16.h").write_text(fp16)
    (include / "cccl" / "cuda" / "std" / "cstdint").write_text("typedef unsigned int uint32_t;\n")
    return [include, include / "cccl"]


def test_the_fingerprint_is_of_the_headers_bytes_not_of_where_they_are(tmp_path: Path) -> None:
    here = ToolkitHeaders.from_dirs(_toolkit(tmp_path / "a"))
    elsewhere = ToolkitHeaders.from_dirs(_toolkit(tmp_path / "b"))
    assert here.dirs != elsewhere.dirs and here.fingerprint == elsewhere.fingerprint
    changed = ToolkitHeaders.from_dirs(_toolkit(tmp_path / "c", fp16="struct __half { short x; };\n"))
    assert changed.fingerprint != here.fingerprint
    added = _toolkit(tmp_path / "d")
    (added[1] / "nv").mkdir()
    (added[1] / "nv" / "target").write_text("\n")
    assert ToolkitHeaders.from_dirs(added).fingerprint != here.fingerprint
    # the search order is part of what NVRTC reads: the same folders the other way round differ
    assert ToolkitHeaders.from_dirs(_toolkit(tmp_path / "e")[::-1]).fingerprint != here.fingerprint


def test_the_cubin_key_takes_the_fingerprint_and_the_recorded_options_name_no_folder(tmp_path: Path) -> None:
    plain = CompileJob("src", (("A", "1"),), "sm_90")
    here = CompileJob("src", (("A", "1"),), "sm_90", toolkit=ToolkitHeaders.from_dirs(_toolkit(tmp_path / "a")))
    elsewhere = CompileJob("src", (("A", "1"),), "sm_90", toolkit=ToolkitHeaders.from_dirs(_toolkit(tmp_path / "b")))
    changed = CompileJob("src", (("A", "1"),), "sm_90",
                         toolkit=ToolkitHeaders.from_dirs(_toolkit(tmp_path / "c", fp16="int x;\n")))  # fmt: skip
    assert here.key == elsewhere.key
    assert len({plain.key, here.key, changed.key}) == 3
    # NVRTC is given the folders; provenance records them by role
    assert [o for o in here.options if o.startswith("--include-path=")] == [
        f"--include-path={(tmp_path / 'a' / 'include').resolve()}",
        f"--include-path={(tmp_path / 'a' / 'include' / 'cccl').resolve()}",
    ]
    assert here.recorded_options == elsewhere.recorded_options
    assert str(tmp_path) not in " ".join(here.recorded_options)
    assert here.recorded_options[-2:] == ("--include-path=<cuda-include-0>", "--include-path=<cuda-include-1>")
    assert plain.options == plain.recorded_options and not any("include-path" in o for o in plain.options)


def test_a_compile_log_names_the_folders_by_role(tmp_path: Path) -> None:
    headers = ToolkitHeaders.from_dirs(_toolkit(tmp_path))
    include, cccl = headers.dirs
    log = f"{cccl}/cuda/std/cstdint(1): error\n{include}/cuda_fp16.h(2): error\n"
    scrubbed = headers.scrub(log)
    assert scrubbed == "<cuda-include-1>/cuda/std/cstdint(1): error\n<cuda-include-0>/cuda_fp16.h(2): error\n"


def test_configured_folders_win_and_a_missing_one_is_refused_at_start(tmp_path: Path) -> None:
    dirs = _toolkit(tmp_path)
    found = find_toolkit_headers(dirs)
    assert found is not None and found.dirs == tuple(str(d.resolve()) for d in dirs)
    with pytest.raises(InvalidInput, match=r"KERNELFARM_CUDA_INCLUDE_DIRS: CUDA include folder .*no-such-folder"):
        find_toolkit_headers([tmp_path / "no-such-folder"])


def test_the_setting_reads_a_json_list_of_folders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELFARM_CUDA_INCLUDE_DIRS", f'["{tmp_path}/include", "{tmp_path}/include/cccl"]')
    assert Settings().cuda_include_dirs == [tmp_path / "include", tmp_path / "include" / "cccl"]


def test_without_cuda_pathfinder_nvrtc_gets_no_folder_and_the_worker_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)  # what `import` then raises: ImportError
    with caplog.at_level(logging.WARNING, logger="kernelfarm.worker.cuda.toolkit_headers"):
        assert find_toolkit_headers() is None
    assert "cuda.pathfinder is not installed" in caplog.text


def test_found_folders_are_pathfinders_in_order_each_once() -> None:
    pathfinder = pytest.importorskip("cuda.pathfinder", reason="cuda.pathfinder is not installed")
    expected: list[str] = []
    for library in PATHFINDER_LIBRARIES:
        folder = pathfinder.find_nvidia_header_directory(library)
        if folder is not None and str(Path(folder).resolve()) not in expected:
            expected.append(str(Path(folder).resolve()))
    if not expected:
        pytest.skip("no CUDA headers on this machine")
    found = find_toolkit_headers()
    assert found is not None and list(found.dirs) == expected


KERNEL = "__global__ void k(__half *x) { x[0] = __float2half(1.0f); }\n"


def test_auto_linkage_leaves_the_system_includes_outside_the_extern_c_block() -> None:
    # the CUDA headers are C++: inside extern "C" { } NVRTC refuses them (measured; compiled_text's docstring)
    source = '#include <cuda_fp16.h>\n#include "mine.h"\n#  include <cuda/std/cstdint>  // sizes\n' + KERNEL
    text = compiled_text(source, "auto")
    head, wrapped = text.split('extern "C" {\n')
    assert head == '#include <cuda_fp16.h>\n#include "mine.h"\n#  include <cuda/std/cstdint>  // sizes\n'
    assert wrapped == KERNEL + "\n}\n"


def test_auto_linkage_without_system_includes_wraps_everything_as_before() -> None:
    source = '#include "mine.h"\n' + KERNEL
    assert compiled_text(source, "auto") == 'extern "C" {\n' + source + "\n}\n"
    assert compiled_text("template <int N> " + KERNEL, "auto") == "template <int N> " + KERNEL
    assert compiled_text(source, "c++") == source
