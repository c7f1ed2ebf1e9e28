"""Kernel manifests (kernels/manifest/): the format, its checks, and the KernelSpec it becomes.

Every bad-manifest case is refused with an InvalidManifest naming the field and why (the HTTP test,
tests/e2e/test_byok_http.py, sends the same cases to POST /v1/kernels)."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.bundle import InvalidManifest, check_bundle, parse_manifest_text
from kernelfarm.kernels.manifest.cuda import ManifestCudaKernel
from kernelfarm.kernels.manifest.model import manifest_json_schema, shipped_schema
from kernelfarm.worker.cuda.compiler import CompileJob
from tests.configs import integer
from tests.kernels.manifests import (
    REPO,
    example_bundle,
    user_bundle,
    user_manifest,
    user_spec,
    user_uploads,
    with_problem_params,
)

Mutation = Callable[[dict[str, Any], dict[str, bytes]], object]  # what it returns is ignored


def _set(path: str, value: Any) -> Mutation:
    def mutate(manifest: dict[str, Any], uploads: dict[str, bytes]) -> None:
        *parents, last = path.split(".")
        node: Any = manifest
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _drop_file(name: str) -> Mutation:
    return lambda manifest, uploads: uploads.pop(name)


def _add_file(name: str, data: bytes) -> Mutation:
    return lambda manifest, uploads: uploads.__setitem__(name, data)


def _include(line: str) -> Mutation:
    """Add ``line`` to the uploaded header (axpb.cu includes it)."""
    return lambda manifest, uploads: uploads.__setitem__("axpb_common.h", uploads["axpb_common.h"] + line.encode())


def _rename_header(name: str) -> Mutation:
    """Upload the header as ``name`` (the manifest and the source's #include follow)."""

    def mutate(manifest: dict[str, Any], uploads: dict[str, bytes]) -> None:
        manifest["source"]["files"][1] = name
        uploads[name] = uploads.pop("axpb_common.h")
        uploads["axpb.cu"] = uploads["axpb.cu"].replace(b'"axpb_common.h"', f'"{name}"'.encode())

    return mutate


def _record_as(name: str) -> Mutation:
    """A valid recording, uploaded as ``name``."""

    def mutate(manifest: dict[str, Any], uploads: dict[str, bytes]) -> None:
        manifest["recording"] = {"file": name}
        uploads[name] = recording_of(manifest, {})

    return mutate


def _recorded_time(value: float) -> Mutation:
    """A recording (cache.json) whose one config took ``value`` ms."""

    def mutate(manifest: dict[str, Any], uploads: dict[str, bytes]) -> None:
        manifest["recording"] = {"file": "cache.json"}
        uploads["cache.json"] = recording_of(manifest, {"16,1,1,1": {"block_size_x": 16, "time": value}})

    return mutate


def _then(*steps: Mutation) -> Mutation:
    """The mutations one after another."""

    def mutate(manifest: dict[str, Any], uploads: dict[str, bytes]) -> None:
        for step in steps:
            step(manifest, uploads)

    return mutate


def recording_of(manifest: dict[str, Any], cache: dict[str, Any]) -> bytes:
    """A Kernel Tuner cache file of the manifest's parameters holding ``cache``."""
    keys = list(manifest["tune_params"])
    return json.dumps({"device_name": "NVIDIA GeForce RTX 3090", "tune_params_keys": keys, "cache": cache}).encode()


# (case, mutation, the field the error must name, a word of the reason)
BAD_MANIFESTS: list[tuple[str, Mutation, str, str]] = [
    ("unknown format", _set("format", "kernelfarm.kernel/9"), "manifest.format", "kernelfarm.kernel/1"),
    ("unknown field", _set("speed", "fast"), "manifest.speed", "not permitted"),
    ("bad name", _set("name", "Bad Name!"), "manifest.name", "pattern"),
    ("no tune params", _set("tune_params", {}), "manifest.tune_params", "at least 1"),
    ("repeated value", _set("tune_params.tile_size_x", [1, 1]), "manifest.tune_params", "twice"),
    ("restriction on unknown name", _set("restrictions.0", "block_size_z * 2 > 1"), "manifest.restrictions.0",
     "block_size_z"),
    ("restriction does not parse", _set("restrictions.1", "block_size_x *"), "manifest.restrictions.1", "parse"),
    ("restriction calls a function", _set("restrictions.0", "__import__('os')"), "manifest.restrictions.0",
     "called"),
    ("empty space", _set("restrictions", ["block_size_x > 4096"]), "manifest.restrictions", "no config"),
    ("grid divisor on unknown name", _set("launch.grid_div_x", ["block_size_x", "tile_x"]),
     "manifest.launch.grid_div_x.1", "tile_x"),
    ("problem size on a tune-only name", _set("launch.problem_size", ["N", "rows"]),
     "manifest.launch.problem_size.1", "rows"),
    ("shape uses a tune parameter", _set("arguments.0.shape", ["M", "block_size_x"]), "manifest.arguments.0.shape.1",
     "block_size_x"),
    ("buffer without shape", _set("arguments.1", {"name": "x"}), "manifest.arguments.1", "shape"),
    ("scalar without value", _set("arguments.3", {"name": "alpha", "kind": "scalar"}), "manifest.arguments.3",
     "value"),
    ("unknown dtype", _set("arguments.0.dtype", "float128"), "manifest.arguments.0.dtype", "float32"),
    ("output is not a buffer", _set("outputs", ["alpha"]), "manifest.outputs.0", "not a buffer"),
    ("problem default out of bounds", _set("problem.M", {"default": 0, "minimum": 1}), "manifest.problem.M",
     "outside"),
    ("clashing names", _set("problem.tile_size_x", {"default": 1}), "manifest.tune_params", "problem parameters"),
    ("two references", _set("reference.builtin", "matmul"), "manifest.reference", "exactly one"),
    ("reference entry missing", _set("reference.entry", None), "manifest.reference", "entry"),
    ("compiler option reads host files", _set("source.compiler_options", ["--include-path=/etc"]),
     "manifest.source.compiler_options", "not allowed"),
    ("entry not in the source", _set("source.entry", {"name": "missing_kernel"}), "manifest.source.entry.name",
     "no function"),
    ("source not uploaded", _drop_file("axpb_common.h"), "manifest.source.files.1", "not uploaded"),
    ("reference source not uploaded", _drop_file("axpb_naive.cu"), "manifest.reference.source", "not uploaded"),
    ("stray file", _add_file("notes.txt", b"hello"), "files", "not named"),
    ("source too large", _add_file("axpb.cu", b"//" + b"x" * (600 << 10)), "files.axpb.cu", "limit"),
    ("source not text", _add_file("axpb.cu", b"\xff\xfe\x00"), "files.axpb.cu", "UTF-8"),
    # PostgreSQL stores neither: a NUL in the description was accepted and broke every later job (a 500)
    ("NUL in a string", _set("description", "alpha \x00 beta"), "manifest.description", "NUL"),
    ("lone surrogate in a string", _set("description", "alpha \ud800"), "manifest.description", "surrogate"),
    ("NUL in a key", _set("problem.M\x00", {"default": 1}), "manifest.problem key", "NUL"),
    ("NUL byte in a source", lambda m, u: u.__setitem__("axpb.cu", u["axpb.cu"] + b"\x00"), "files.axpb.cu", "NUL"),
    # A config is keyed by its values' text joined by commas: these made two configs one key, and a job hung.
    ("values that read the same", _set("tune_params.tile_size_y", ["1", 1]), "manifest.tune_params.tile_size_y",
     "read the same"),
    ("a comma in a value", _set("tune_params.tile_size_y", ["1,2", "3"]), "manifest.tune_params.tile_size_y",
     "comma"),
    # The dashboard shows tune values: 2**53 + 1 showed as 2**53, a right-to-left override reversed a label.
    ("an integer beyond 2**53", _set("tune_params.tile_size_y", [1, 2**53 + 1]), "manifest.tune_params.tile_size_y.1",
     "2**53"),
    ("a right-to-left override in a value", _set("tune_params.tile_size_y", ["a", "\u202eb"]),
     "manifest.tune_params.tile_size_y.1", "U+202E"),
    ("a Hangul filler in a value", _set("tune_params.tile_size_y", ["a", "a\u3164"]),
     "manifest.tune_params.tile_size_y.1", "U+3164"),
    ("NaN tune value", _set("tune_params.tile_size_y", [float("nan"), 1]), "manifest.tune_params.tile_size_y.0",
     "finite"),
    # A job's problem key and a trial's config key are stored in columns of 512 and 1024 characters, the
    # config key in an index of 2704 bytes (core/key_lengths.py): these were accepted, then every job of the
    # first was a 500, and every job of the others failed at its coordinator's steps.
    ("a problem key longer than a job stores", lambda m, u: m.update(with_problem_params(m, [64] * 14)),
     "manifest.problem", "more than the 512"),
    ("a config key longer than a trial stores", _set("tune_params.variant", ["v" * 1100]), "manifest.tune_params",
     "more than the 1024"),
    ("a config key of more bytes than a trial's index holds", _set("tune_params.variant", ["\u4e2d" * 1000]),
     "manifest.tune_params", "more than the 2600"),
    # A problem is keyed by "name=value" pairs joined by commas, written into the exports' C comments too:
    # a comma or "=" made two problems one key, "*/" ended a header comment, a newline a line.
    ("a comma in a string problem value", _set("problem.dt", {"kind": "str", "default": "x,B=y"}),
     "manifest.problem.dt", "string problem value"),
    ("a comment end in a problem choice", _set("problem.dt", {"kind": "str", "default": "f32", "choices": ["f32",
     "*/ int x; /*"]}), "manifest.problem.dt", "string problem value"),
    ("an empty string problem value", _set("problem.dt", {"kind": "str", "default": ""}), "manifest.problem.dt",
     "string problem value"),
    ("infinite tolerance", _set("tolerance", float("inf")), "manifest.tolerance", "finite"),
    # Shapes are evaluated at the default problem: these parsed, and failed only on a GPU worker.
    ("negative shape", _set("arguments.0.shape", ["-M", "N"]), "manifest.arguments.0.shape.0", ">= 1"),
    ("fractional shape", _set("arguments.0.shape", ["M / 3", "N"]), "manifest.arguments.0.shape.0", "not an integer"),
    ("enormous buffers", _set("arguments.0.shape", ["M * M * M", "N"]), "manifest.arguments", "more than"),
    ("nested too deeply", _set("description", [[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]), "manifest.description",
     "deeper than"),
    ("include of a file not uploaded", _add_file("axpb_common.h", b'#include "secret.h"\n'), "files.axpb_common.h",
     "secret.h"),
    # What NVRTC would read on a worker: every one of these reached it, and its log (the trial's stored,
    # shown failure) quotes what it includes.
    ("an angle include of a host file", _include("#include </proc/self/environ>\n"), "files.axpb_common.h",
     "outside the upload"),
    ("a quoted include leaving the upload", _include('#include "../../etc/passwd"\n'), "files.axpb_common.h",
     "outside the upload"),
    ("an angle include leaving the upload", _include("#include <../x/../../etc/passwd>\n"), "files.axpb_common.h",
     "outside the upload"),
    ("an include a macro computes", _include('#define HOST_FILE "/etc/passwd"\n#include HOST_FILE\n'),
     "files.axpb_common.h", "macro"),
    ("a comment hiding an include", _include('#/* x */include "/etc/passwd"\n'), "files.axpb_common.h", "comment"),
    ("an include spliced over two lines", _include('#inc\\\nlude </etc/passwd>\n'), "files.axpb_common.h",
     "outside the upload"),
    ("an include after a comment", _include("/* a\n b */ #include </etc/passwd>\n"), "files.axpb_common.h",
     "outside the upload"),
    ("an include by the digraph of #", _include("%:include </etc/passwd>\n"), "files.axpb_common.h",
     "outside the upload"),
    ("an include by the trigraph of #", _include("??=include </etc/passwd>\n"), "files.axpb_common.h",
     "outside the upload"),
    ("include_next of a host file", _include("#include_next </etc/passwd>\n"), "files.axpb_common.h",
     "outside the upload"),
    ("a host file's existence asked", _include('#if __has_include("/etc/shadow")\n#endif\n'),
     "files.axpb_common.h", "outside the upload"),
    ("an include in the reference source",
     lambda m, u: u.__setitem__("axpb_naive.cu", b"#include </etc/passwd>\n" + u["axpb_naive.cu"]),
     "files.axpb_naive.cu", "outside the upload"),
    # Names the bundle's directory cannot hold side by side (Bundle.write)
    ("a header called manifest.json", _rename_header("manifest.json"), "files.manifest.json", "bundle's own"),
    ("a recording called manifest.json", _record_as("Manifest.json"), "files.Manifest.json", "bundle's own"),
    ("a recording that is a source", _record_as("axpb_naive.cu"), "manifest.recording.file", "also a source"),
    ("names differing only in case", _rename_header("AXPB.cu"), "files", "differ only in case"),
    ("a header over the source limit named like a recording",
     _then(_rename_header("big.json"), _add_file("big.json", b"//" + b"x" * (600 << 10))),
     "files.big.json", "limit of 524288"),
    ("two compiler options in one", _set("source.compiler_options", ["-std=c++17 -I/etc"]),
     "manifest.source.compiler_options.0", "not one option"),
    ("an option after a compiler option's value", _set("source.compiler_options", ["-ftz=true --include-path=/"]),
     "manifest.source.compiler_options.0", "not one option"),
    ("recording of other parameters",
     _then(_set("recording", {"file": "cache.json"}),
           _add_file("cache.json", json.dumps({"device_name": "X", "tune_params_keys": ["a"], "cache": {}}).encode())),
     "manifest.recording.file", "records parameters"),
    # A replay worker serves recorded times as measurements: -1 ms became the best config, NaN a trial
    # no row could store ("worker lost" three times).
    *[(f"recorded time {value}", _recorded_time(value), "manifest.recording.file", "a time is a positive number")
      for value in (-1.0, 0, float("nan"), float("inf"))],
    ("recording not a cache file",
     _then(_set("recording", {"file": "cache.json"}), _add_file("cache.json", b"[1, 2]")),
     "manifest.recording.file", "Kernel Tuner cache"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "mutate", "field", "reason"), BAD_MANIFESTS, ids=[c[0] for c in BAD_MANIFESTS])
def test_a_bad_manifest_is_refused_naming_the_field(case: str, mutate: Mutation, field: str, reason: str) -> None:
    manifest, uploads = copy.deepcopy(user_manifest()), user_uploads()
    mutate(manifest, uploads)
    with pytest.raises(InvalidManifest) as refused:
        check_bundle(manifest, uploads)
    message = str(refused.value)
    assert message.startswith(field), message
    assert reason.lower() in message.lower(), message


def test_unparseable_manifests_are_refused() -> None:
    with pytest.raises(InvalidManifest, match="not valid TOML"):
        parse_manifest_text(b"name = ", "m.toml")
    with pytest.raises(InvalidManifest, match="not valid JSON"):
        parse_manifest_text(b"{", "m.json")
    with pytest.raises(InvalidManifest, match="larger than"):
        parse_manifest_text(b" " * (65 << 10), "m.json")
    # Each of these raised past the parser's own errors (RecursionError, ValueError): a 500 at upload.
    with pytest.raises(InvalidManifest, match="JSON nested deeper than"):
        parse_manifest_text(b'{"a":' * 5000 + b"1" + b"}" * 5000, "m.json")
    with pytest.raises(InvalidManifest, match="TOML nested deeper than"):
        parse_manifest_text(b"a = " + b"[" * 3000 + b"]" * 3000, "m.toml")
    for text, kind in ((b'{"format": ' + b"9" * 5000 + b"}", "m.json"), (b"default = " + b"9" * 5000, "m.toml")):
        with pytest.raises(InvalidManifest, match="an integer of more than 4300 digits"):
            parse_manifest_text(text, kind)


def test_the_shipped_json_schema_is_the_models_schema() -> None:
    assert shipped_schema() == json.loads(json.dumps(manifest_json_schema()))


def test_the_published_json_schema_is_the_shipped_one() -> None:
    published = REPO / "docs" / "kernel-manifest.schema.json"
    assert json.loads(published.read_text()) == shipped_schema()


def test_the_user_kernel_becomes_a_spec_read_as_kernel_tuner_reads_it() -> None:
    spec = user_spec()
    problem = spec.normalize_problem(None)
    assert problem == {"M": 2048, "N": 4096}
    impl = spec.impl("cuda", ManifestCudaKernel)
    config = {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 8}
    assert spec.space.contains(config, problem)
    launch = impl.launch(config, problem)
    # grid = ceil(problem_size / prod(grid_div)), block from block_size_names
    assert launch.grid == (4096 // 64, 2048 // 32, 1) and launch.block == (32, 4, 1)
    assert impl.defines(config, problem) == config  # every tune parameter is a -D, as in Kernel Tuner
    assert impl.source.text.startswith('extern "C" {')  # "auto" linkage: wrapped as Kernel Tuner does
    assert dict(impl.source.headers)["axpb_common.h"] == user_uploads()["axpb_common.h"].decode()
    assert impl.name_expression(config, problem) is None
    assert impl.flops(problem) == 2 * 2048 * 4096
    assert not spec.space.contains({**config, "tile_size_x": 4, "block_size_x": 256}, {"M": 2048, "N": 1000})


def test_a_cpp_entry_is_looked_up_through_a_name_expression() -> None:
    manifest, uploads = user_manifest(), user_uploads()
    source = uploads["axpb.cu"].decode().replace("__global__ void axpb(", "template <int U>\n__global__ void axpb(")
    uploads["axpb.cu"] = source.encode()
    manifest["source"]["entry"] = {"name": "axpb", "linkage": "c++", "name_expression": "axpb<{tile_size_x}>"}
    spec = build_spec(check_bundle(manifest, uploads), 1)
    impl = spec.impl("cuda", ManifestCudaKernel)
    config = {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 8}
    assert impl.name_expression(config, spec.normalize_problem(None)) == "axpb<2>"
    job = CompileJob.for_config(spec, config, spec.normalize_problem(None), "sm_90")
    assert job.name_expressions == ("axpb<2>",)
    assert not impl.source.text.startswith('extern "C"')


def test_content_hash_covers_manifest_sources_and_headers() -> None:
    base = user_bundle().content_hash
    assert user_bundle().content_hash == base  # stable
    uploads = user_uploads()
    uploads["axpb_common.h"] += b"// edited\n"
    assert check_bundle(user_manifest(), uploads).content_hash != base
    manifest = user_manifest()
    manifest["tolerance"] = 1e-5
    assert check_bundle(manifest, user_uploads()).content_hash != base
    # the same manifest as TOML or JSON is the same content
    as_json = parse_manifest_text(json.dumps(user_manifest()).encode(), "m.json")
    assert check_bundle(as_json, user_uploads()).content_hash == base
    assert user_spec().source_hash != build_spec(check_bundle(manifest, user_uploads()), 1).source_hash


def test_a_recording_gives_a_replay_implementation(tmp_path: Any) -> None:
    manifest, uploads = user_manifest(), user_uploads()
    manifest["recording"] = {"file": "cache.json.gz"}
    cache = {
        "device_name": "NVIDIA GeForce RTX 3090",
        "kernel_name": "axpb",
        "problem_size": [4096, 2048],
        "tune_params_keys": list(manifest["tune_params"]),
        "tune_params": manifest["tune_params"],
        "cache": {"32,4,2,8": {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 8,
                                "time": 0.5, "times": [0.5, 0.5]}},
    }  # fmt: skip
    uploads["cache.json.gz"] = gzip.compress(json.dumps(cache).encode())
    spec = build_spec(check_bundle(manifest, uploads), 3, tmp_path / "bundle")
    assert spec.version == 3
    assert spec.recordings is not None
    assert spec.recordings.gpu_models == frozenset({"nvidia-geforce-rtx-3090"})
    assert spec.recordings.covers({"M": 2048, "N": 4096})
    assert (tmp_path / "bundle" / "manifest.json").is_file()


@pytest.mark.parametrize("name", ["matmul", "convolution"])
def test_kernel_tuner_examples_are_valid_manifests(name: str) -> None:
    bundle, _ = example_bundle(name)
    spec = build_spec(bundle, 1)
    problem = spec.normalize_problem(None)
    valid = spec.space.valid_configs(problem)
    # the space Kernel Tuner tunes for these examples: its restrictions and at most 1024 threads per block
    assert len(valid) == {"matmul": 40, "convolution": 342}[name]
    impl = spec.impl("cuda", ManifestCudaKernel)
    for config in valid:
        launch = impl.launch(config, problem)
        assert launch.threads <= 1024
        size = (512, 512) if name == "matmul" else (4096, 4096)
        tile = (
            integer(config, "block_size_x") * integer(config, "tile_size_x"),
            integer(config, "block_size_y") * integer(config, "tile_size_y"),
        )
        covered = (launch.grid[0] * tile[0], launch.grid[1] * tile[1])
        # Kernel Tuner's grid: ceil(problem_size / divisors) blocks, every element and less than a tile more
        assert all(size[d] <= covered[d] < size[d] + tile[d] for d in range(2)), (config, launch)
    if name == "convolution":
        assert impl.constant_memory() == {"d_filter": "filter"}


def test_a_stored_version_the_upload_checks_would_now_refuse_is_still_read() -> None:
    """Checks added later apply to new uploads: a stored version they refuse (here a NUL in its
    description, accepted before) must not make its kernel's versions unreadable."""
    manifest = user_manifest() | {"description": "stored before \x00 was refused"}
    with pytest.raises(InvalidManifest, match="NUL"):
        check_bundle(manifest, user_uploads())
    assert check_bundle(manifest, user_uploads(), stored=True).name == "user-axpb"


def test_a_string_problem_value_a_key_cannot_hold_is_refused_at_submission() -> None:
    """A free string problem dimension (no choices) takes what a job or a lookup sends: "x,B=y" with
    B="z" had the key of A="x", B="z" (a lookup of a problem never measured answered "exact")."""
    manifest = copy.deepcopy(user_manifest())
    manifest["problem"]["dt"] = {"kind": "str", "default": "f32"}
    spec = build_spec(check_bundle(manifest, user_uploads()), 1)
    assert spec.normalize_problem({"dt": "bf16"})["dt"] == "bf16"
    for value in ("x,B=y", "a=b", "a\nb", "", "*/", "f32 x", "x" * 65, "\u202ef32"):
        with pytest.raises(InvalidInput, match="a string problem value has 1-64 letters"):
            spec.normalize_problem({"dt": value})


def test_includes_of_uploaded_files_and_nvrtc_headers_are_accepted() -> None:
    """The include confinement refuses what reads outside the upload, not the ways sources include."""
    manifest, uploads = user_manifest(), user_uploads()
    uploads["axpb_common.h"] += (
        b"#include <cuda_fp16.h>\n#  include <cuda/std/cstdint>\n"
        b'#if defined(__has_include)\n#if __has_include(<cuda_bf16.h>) && __has_include( "axpb_common.h" )\n'
        b"#endif /* has */\n#endif\n#define KF_STR(x) #x\n#pragma unroll\n"
    )
    uploads["axpb.cu"] = b'%:include "axpb_common.h" // the digraph of #\n' + uploads["axpb.cu"]
    bundle = check_bundle(manifest, uploads)
    assert "#include <cuda_fp16.h>" in bundle.files["axpb_common.h"]


def test_a_bundle_written_over_on_the_host_is_refused_by_the_measuring_child(tmp_path: Any) -> None:
    """The measuring child builds an uploaded kernel from its bundle in the host's shared cache (a folder
    named by the content hash, by default under the temp folder): files changed there were measured as
    the version the job pinned."""
    from kernelfarm.kernels.uploaded import spec_from_directory

    bundle = user_bundle()
    directory = tmp_path / bundle.content_hash
    build_spec(bundle, 1, directory)
    assert spec_from_directory(directory, 1).source_hash == user_spec().source_hash
    (directory / "axpb_common.h").write_text("#define AXPB_COMMON_H\n/* someone else's header */\n")
    with pytest.raises(InvalidManifest, match="not the content it is named for"):
        spec_from_directory(directory, 2)  # another version number: not the process's cached spec


def test_a_stored_version_whose_compiler_option_is_not_one_whole_option_no_longer_builds() -> None:
    """Compiler options reach NVRTC (CompileJob.for_config), so the whole-option check applies to stored
    versions too: one stored under the older prefix check with `-ftz=true --include-path=/` (one argument
    to NVRTC: it would read host files) is refused as it is read back, not compiled."""
    manifest = user_manifest()
    manifest = manifest | {"source": manifest["source"] | {"compiler_options": ["-ftz=true --include-path=/"]}}
    with pytest.raises(InvalidManifest, match=r"compiler_options\.0.*not one option"):
        check_bundle(manifest, user_uploads(), stored=True)


def test_a_cuda_reference_finds_the_uploads_headers_in_the_bundles_folder(tmp_path: Path) -> None:
    """A naive reference may `#include "name"` an uploaded header (the upload check allows those names only): it
    is compiled with the materialized bundle's folder on NVRTC's include path (tests/gpu/test_manifest_headers.py
    runs one on the GPU); a kernel read without a folder has none to give."""
    bundle = user_bundle()
    folder = tmp_path / bundle.content_hash
    with_folder = build_spec(bundle, 1, folder).impl("cuda", ManifestCudaKernel)
    without = build_spec(bundle, 1).impl("cuda", ManifestCudaKernel)
    problem = {"M": 64, "N": 64}
    assert with_folder.reference_options(problem) == ("-std=c++17", f"--include-path={folder}")
    assert without.reference_options(problem) == ("-std=c++17",)
