"""The compile log of a kernel's own reference that does not build, as it is stored with every trial: the host's
folders replaced (tests/gpu/test_manifest_headers.py has NVRTC write a real one)."""

from __future__ import annotations

from kernelfarm.kernels.reference_failure import scrubbed_compile_log

LOG = (
    '/tmp/tmpab12/kern.cu(5): error: identifier "axpb_value_missing" is undefined\n'
    "/srv/cache/kernels/0f3c/axpb_common.h(2): warning: declared but never referenced\n"
    "/opt/venv/lib/cupy/_core/include/cupy/complex.cuh(9): note: here\n"
    "/usr/local/cuda/include/cuda_fp16.h(1): note: there\n"
)
OPTIONS = (
    "-std=c++17",
    "--include-path=/srv/cache/kernels/0f3c",
    "-I/opt/venv/lib/cupy/_core/include",
    "-I/usr/local/cuda/include/",
    "-I",
)


def scrub(log: str = LOG) -> str:
    return scrubbed_compile_log(
        log, source_name="axpb_naive.cu", compiled_as="/tmp/tmpab12/kern.cu", options=OPTIONS,
        bundle_dir="/srv/cache/kernels/0f3c",
    )  # fmt: skip


def test_the_temporary_source_file_reads_as_the_uploaded_file() -> None:
    assert scrub().splitlines()[0] == 'axpb_naive.cu(5): error: identifier "axpb_value_missing" is undefined'


def test_the_bundle_folder_and_every_include_folder_get_placeholders() -> None:
    lines = scrub().splitlines()
    assert lines[1] == "<bundle>/axpb_common.h(2): warning: declared but never referenced"
    assert lines[2] == "<include-0>/cupy/complex.cuh(9): note: here"
    assert lines[3] == "<include-1>/cuda_fp16.h(1): note: there"
    assert "/srv" not in scrub() and "/opt" not in scrub() and "/usr" not in scrub() and "/tmp" not in scrub()


def test_a_log_without_host_paths_is_unchanged() -> None:
    plain = 'kern(3): error: expected a ";"\n'
    assert scrubbed_compile_log(plain, source_name="r.cu", compiled_as=None, options=(), bundle_dir=None) == plain
