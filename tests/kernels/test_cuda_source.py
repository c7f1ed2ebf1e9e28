"""CudaSource: a template and every header it includes, found transitively, as NVRTC gets them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelfarm.kernels.cuda_source import INCLUDE_DIR, CudaSource, MissingHeader, included_names


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_headers_are_found_transitively_once_each_and_sorted(tmp_path: Path) -> None:
    include = tmp_path / "include"
    write(include / "kf/b.cuh", '#include "kf/c.cuh"\n#include "kf/a.cuh"\n')
    write(include / "kf/a.cuh", '#include "kf/c.cuh"\n')
    write(include / "kf/c.cuh", '#include "kf/a.cuh"  // a cycle, guarded in real headers\n')
    template = write(tmp_path / "k" / "k.cu", '#include "kf/b.cuh"\n#include <cuda_fp16.h>\n')
    source = CudaSource.from_file(template, (include,))
    assert [name for name, _ in source.headers] == ["kf/a.cuh", "kf/b.cuh", "kf/c.cuh"]
    assert dict(source.headers)["kf/b.cuh"] == (include / "kf/b.cuh").read_text()
    assert source.name == "k.cu" and source.path == template


def test_the_kernels_own_folder_is_searched_first(tmp_path: Path) -> None:
    include = tmp_path / "include"
    write(include / "tiles.cuh", "// shared\n")
    write(tmp_path / "k" / "tiles.cuh", "// the kernel's own\n")
    template = write(tmp_path / "k" / "k.cu", '#include "tiles.cuh"\n')
    assert CudaSource.from_file(template, (include,)).headers == (("tiles.cuh", "// the kernel's own\n"),)


def test_a_missing_header_names_the_includer_and_the_search_path(tmp_path: Path) -> None:
    write(tmp_path / "include" / "kf/a.cuh", '#include "kf/gone.cuh"\n')
    template = write(tmp_path / "k.cu", '#include "kf/a.cuh"\n')
    with pytest.raises(MissingHeader, match=r'kf/a.cuh: #include "kf/gone.cuh" is in none of'):
        CudaSource.from_file(template, (tmp_path / "include",))


def test_only_quoted_include_lines_count() -> None:
    text = '#include "a.cuh"\n  #  include "b.cuh"\n#include <c.h>\n// #include "d.cuh"\nint x; // "e.cuh"\n'
    assert included_names(text) == ["a.cuh", "b.cuh"]


def test_fingerprint_is_the_text_alone_without_headers_and_covers_each_header() -> None:
    plain = CudaSource("k.cu", "text")
    assert plain.fingerprint() == b"text"
    one = CudaSource("k.cu", "text", (("kf/a.cuh", "A"),))
    other_text = CudaSource("k.cu", "text", (("kf/a.cuh", "B"),))
    other_name = CudaSource("k.cu", "text", (("kf/b.cuh", "A"),))
    assert len({plain.fingerprint(), one.fingerprint(), other_text.fingerprint(), other_name.fingerprint()}) == 4


def test_where_a_source_was_read_from_is_no_part_of_its_identity(tmp_path: Path) -> None:
    a = CudaSource.from_file(write(tmp_path / "a" / "k.cu", '#include "kf/bf16.cuh"\n'))
    b = CudaSource.from_file(write(tmp_path / "b" / "k.cu", '#include "kf/bf16.cuh"\n'))
    assert a.path != b.path and a == b and a.fingerprint() == b.fingerprint()


def test_the_shared_headers_are_guarded_and_named_by_their_path() -> None:
    headers = sorted(INCLUDE_DIR.rglob("*.cuh"))
    assert headers
    for header in headers:
        guard = "KF_" + header.stem.upper() + "_CUH"
        text = header.read_text()
        assert f"#ifndef {guard}\n#define {guard}\n" in text and text.rstrip().endswith(f"#endif  // {guard}")
        for name in included_names(text):
            assert (INCLUDE_DIR / name).is_file(), (header, name)
