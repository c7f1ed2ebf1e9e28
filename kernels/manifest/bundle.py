"""A manifest with its files, checked as a whole and content-addressed.

Everything a bad upload can get wrong is found here, before anything is stored, and reported as an
:class:`InvalidManifest` naming the field (``manifest.launch.grid_div_x.1``) and why: the schema, every
expression (it parses, and names only what is defined where it is used), restrictions over real
parameters, a non-empty space for the default problem, files present and within size limits, a
recording of this very kernel.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from kernelfarm.core.errors import ConstraintError, InvalidInput
from kernelfarm.core.landscape import is_a_time
from kernelfarm.core.space import MAX_CARTESIAN, Parameter, SearchSpace
from kernelfarm.core.store.text import invisible_character, unstorable
from kernelfarm.kernels.manifest.expressions import Expr
from kernelfarm.kernels.manifest.model import WHOLE_COMPILER_OPTION, Manifest
from kernelfarm.kernels.spec import ProblemParam, problem_key_refusal

MAX_MANIFEST_BYTES = 64 << 10
MAX_SOURCE_BYTES = 512 << 10
MAX_TOTAL_BYTES = 2 << 20
MAX_RECORDING_BYTES = 8 << 20
MAX_RECORDING_UNPACKED = 64 << 20
MANIFEST_FILE = "manifest.json"
MAX_MANIFEST_DEPTH = 16  # the schema's deepest field is 4 levels down
# Operands each built-in reference reads (required, then optional).
BUILTIN_OPERANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "matmul": (("a", "b"), ()),
    "layernorm": (("x",), ("weight", "bias")),
    "softmax": (("x",), ()),
    "conv2d": (("input", "weight"), ()),
    "attention": (("q", "k", "v"), ()),
}


class InvalidManifest(InvalidInput):
    """The manifest or its files are unusable; the message names the field and why (HTTP 422)."""


def parse_manifest_text(raw: bytes, filename: str = MANIFEST_FILE) -> dict[str, Any]:
    """A manifest's text as a dict: TOML for ``*.toml``, else JSON.

    Raises:
        InvalidManifest: too large, not UTF-8, or not valid TOML/JSON.
    """
    if len(raw) > MAX_MANIFEST_BYTES:
        raise InvalidManifest(f"manifest: larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidManifest("manifest: not UTF-8 text") from None
    kind = "TOML" if filename.lower().endswith(".toml") else "JSON"
    try:
        data = tomllib.loads(text) if kind == "TOML" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InvalidManifest(f"manifest: not valid {kind}: {exc}") from None
    except RecursionError:
        raise InvalidManifest(f"manifest: {kind} nested deeper than {MAX_MANIFEST_DEPTH} levels") from None
    except ValueError as exc:  # above all an integer longer than Python converts
        too_long = "integer string" in str(exc)
        reason = f"an integer of more than {sys.get_int_max_str_digits()} digits" if too_long else exc
        raise InvalidManifest(f"manifest: not valid {kind}: {reason}") from None
    if not isinstance(data, dict):
        raise InvalidManifest("manifest: must be an object")
    return data


def _check_storable(data: Mapping[str, Any]) -> None:
    """Refuse what PostgreSQL cannot store or a reply cannot encode, naming the field: a NUL character
    or a lone surrogate (JSON's ``\\u0000`` and ``\\ud800`` parse to both) in a key or value, a
    non-finite number, and nesting no manifest field has. Stored, a NUL broke every later job of the
    kernel (a 500), and a NaN every job submission."""
    reason = unstorable(dict(data), "manifest", MAX_MANIFEST_DEPTH)
    if reason:
        raise InvalidManifest(reason)


def validated_model(data: Mapping[str, Any]) -> Manifest:
    """Raises:
    InvalidManifest: the first schema error, as ``manifest.<field path>: <why>``.
    """
    try:
        return Manifest.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidManifest(f"manifest.{where}: {first['msg']}{more}") from None


@dataclass(frozen=True)
class Bundle:
    """A checked manifest and the files it names (texts by name; the recording as bytes)."""

    manifest: Manifest
    files: Mapping[str, str]
    recording: bytes | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @cached_property
    def content_hash(self) -> str:
        """sha256 over the canonical manifest, every file (name and bytes) and the recording."""
        digest = hashlib.sha256(canonical_json(self.manifest_dict).encode())
        for name in sorted(self.files):
            digest.update(f"\0{name}\0".encode())
            digest.update(self.files[name].encode())
        if self.recording is not None:
            digest.update(b"\0recording\0")
            digest.update(self.recording)
        return digest.hexdigest()

    @property
    def manifest_dict(self) -> dict[str, Any]:
        return self.manifest.model_dump(mode="json", exclude_none=True)

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def has_python(self) -> bool:
        """Carries Python (host code): admin-only uploads, run only by workers that opted in."""
        return self.manifest.reference.python is not None

    def write(self, directory: Path) -> Path:
        """Materialize the bundle in ``directory`` (its files, the recording, then manifest.json).

        The directory is named by the content hash and shared by a host's workers: each file appears
        whole (written aside, then renamed), manifest.json last, so a directory with a manifest is
        complete and is not written again.
        """
        if (directory / MANIFEST_FILE).is_file():
            return directory
        directory.mkdir(parents=True, exist_ok=True)
        contents: dict[str, bytes] = {name: text.encode() for name, text in self.files.items()}
        if self.recording is not None and self.manifest.recording is not None:
            contents[self.manifest.recording.file] = self.recording
        contents[MANIFEST_FILE] = canonical_json(self.manifest_dict).encode()
        for name, data in contents.items():
            aside = directory / f".{name}.{os.getpid()}.{threading.get_ident()}"
            aside.write_bytes(data)
            aside.replace(directory / name)
        return directory


def canonical_json(data: Any) -> str:
    """Compact JSON in the data's own key order: the order of ``tune_params`` is the order of a
    config's key (Kernel Tuner's cache keys), so it is part of the content."""
    return json.dumps(data, separators=(",", ":"))


def read_bundle(directory: Path) -> Bundle:
    """A bundle written by :meth:`Bundle.write` (the worker's local cache), checked again."""
    manifest = parse_manifest_text((directory / MANIFEST_FILE).read_bytes())
    files: dict[str, bytes] = {}
    for path in directory.iterdir():
        if path.is_file() and path.name != MANIFEST_FILE and not path.name.startswith("."):
            files[path.name] = path.read_bytes()
    return check_bundle(manifest, files, stored=True)


def check_bundle(manifest_data: Mapping[str, Any], uploads: Mapping[str, bytes], *, stored: bool = False) -> Bundle:
    """Check a manifest with its uploaded files.

    Args:
        manifest_data: the parsed manifest.
        uploads: file name -> bytes: the sources and headers, the reference source and the
            recording the manifest names.
        stored: the bundle is a stored version read back. The checks added after versions were
            first stored (what PostgreSQL can hold, shapes at the default problem) are for new
            uploads only: one old version they would refuse must not make every version of its
            kernel unreadable (the versions listing builds each). Tune values a config key cannot
            tell apart are refused either way, by the search space itself: no job of them can run;
            so are an ``#include`` of a file outside the upload and a compiler option that is not one
            whole allowed option (versions stored under the older prefix check): both reach NVRTC,
            and no worker may compile them.

    Returns:
        The bundle, ready to store and to build a KernelSpec from.

    Raises:
        InvalidManifest: which field is wrong and why.
    """
    if not stored:
        _check_storable(manifest_data)
    manifest = validated_model(manifest_data)
    recording_name = manifest.recording.file if manifest.recording else None
    if not stored:
        _check_sizes(uploads, recording_name)
    extra = [name for name in (manifest.reference.source, manifest.reference.python) if name is not None]
    named = [*manifest.source.files, *extra]
    for index, name in enumerate(manifest.source.files):
        if name not in uploads:
            raise InvalidManifest(f"manifest.source.files.{index}: {name!r} was not uploaded")
    for field_name in ("source", "python"):
        name = getattr(manifest.reference, field_name)
        if name is not None and name not in uploads:
            raise InvalidManifest(f"manifest.reference.{field_name}: {name!r} was not uploaded")
    if recording_name is not None and recording_name not in uploads:
        raise InvalidManifest(f"manifest.recording.file: {recording_name!r} was not uploaded")
    unexpected = sorted(set(uploads) - set(named) - {recording_name})
    if unexpected:
        raise InvalidManifest(f"files: {unexpected} are not named by the manifest (source.files, reference, recording)")
    if not stored:
        _check_file_names(named, recording_name)
    texts: dict[str, str] = {}
    for name in named:
        try:
            texts[name] = uploads[name].decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidManifest(f"files.{name}: not UTF-8 text") from None
        if not stored and "\x00" in texts[name]:
            raise InvalidManifest(f"files.{name}: contains a NUL byte (sources are text)")
    _check_source(manifest, texts)
    _check_names(manifest)
    _check_compiler_options(manifest)  # passed to NVRTC (CompileJob.for_config): stored versions too
    if not stored:
        _check_shapes(manifest)
        _check_tune_values(manifest)
        _check_key_lengths(manifest)
    bundle = Bundle(manifest, texts, uploads[recording_name] if recording_name else None)
    if bundle.recording is not None:
        check_recording(manifest, bundle.recording)
    return bundle


def _check_sizes(uploads: Mapping[str, bytes], recording_name: str | None) -> None:
    """Each file within its limit, and all of them together. Only the file the manifest names as its
    recording has the recording's limit: by a name with ".json" in it, any source had it (8 MiB, not
    512 KiB)."""
    total = 0
    for name, data in uploads.items():
        limit = MAX_RECORDING_BYTES if name == recording_name else MAX_SOURCE_BYTES
        if len(data) > limit:
            raise InvalidManifest(f"files.{name}: {len(data)} bytes, more than the limit of {limit}")
        total += len(data)
    if total > MAX_TOTAL_BYTES + MAX_RECORDING_BYTES:
        raise InvalidManifest(f"files: {total} bytes in all, more than the limit")


def _check_file_names(named: list[str], recording_name: str | None) -> None:
    """Names a bundle's directory can hold side by side (``Bundle.write``): none is ``manifest.json``,
    which the bundle's own manifest overwrote (a header of that name was missing on every worker, and
    a recording of that name was read as the manifest), the recording is no source, and no two names
    differ only in case (one file on a case-insensitive file system)."""
    if recording_name is not None and recording_name in named:
        raise InvalidManifest(
            f"manifest.recording.file: {recording_name!r} is also a source; a recording is a file of its own"
        )
    seen: dict[str, str] = {}
    for name in [*named, *([recording_name] if recording_name is not None else [])]:
        if name.lower() == MANIFEST_FILE:
            raise InvalidManifest(f"files.{name}: the name {MANIFEST_FILE!r} is the bundle's own; rename the file")
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise InvalidManifest(f"files: {other!r} and {name!r} differ only in case (one file on some file systems)")


# What NVRTC would read from the worker's host is confined here: an #include (or __has_include) names
# an uploaded file ("name") or a relative <name> (which NVRTC looks for only in the CUDA Toolkit's header
# folders a worker gives it, worker/cuda/toolkit_headers.py: docs/SECURITY.md), never a path that leaves
# them. Before, only a line starting `#include "` was checked: `#include </etc/passwd>`, `%:include`,
# `#/**/include`, a spliced `#inc\<newline>lude` and `#include MACRO` reached NVRTC, whose error log
# (the trial's failure, stored and shown to every reader) quotes what it read, /proc/self/environ (the
# compile process's environment, the worker's secrets) included. The scan splices backslash-newlines
# as the preprocessor does (also with white space before the newline, as GCC accepts, and the trigraph
# ??/), knows the digraph %: and trigraph ??= of #, and looks at every `#` in the text, not only at a
# line's start: no comment or string literal it could misread hides a directive (a `#include` inside
# a string is checked too, which costs nothing). A comment inside the directive, which would need a
# real lexer to see past, is refused instead.
_SPLICE = re.compile(r"(?:\\|\?\?/)[ \t]*\r?\n")
_BLANK = r"[ \t\f\v]*"
_HEADER_NAME = r'("[^"\n]*"|<[^>\n]*>)?'
_INCLUDE_DIRECTIVE = re.compile(
    rf"(?:#|%:|\?\?=){_BLANK}(?:(/\*)|(include_next|include|import|embed)\b{_BLANK}{_HEADER_NAME})"
)
_HAS_INCLUDE = re.compile(rf"(__has_include\w*){_BLANK}(?:(/\*)|\({_BLANK}{_HEADER_NAME})")


def _include_refusal(directive: str, operand: str | None, uploaded: Mapping[str, str]) -> str | None:
    """Why ``directive`` (``#include``, ``__has_include``, ...) of ``operand`` (``"name"``, ``<name>``;
    None: anything else) is refused; None: it reads only uploaded files and NVRTC's own headers."""
    if operand is None:
        return f'{directive} not followed by a "name" or <name> (a macro, a comment) cannot be checked; write the name'
    name = operand[1:-1].strip()
    if not name or name.startswith("/") or "\\" in name or ".." in name.split("/"):
        return f"{directive} {operand} reads outside the upload (an absolute path, '..' or a backslash)"
    if directive.startswith("#") and operand.startswith('"') and operand[1:-1] not in uploaded:
        return f"{directive} {operand} names no uploaded file"
    return None


def _check_includes(name: str, text: str, uploaded: Mapping[str, str]) -> None:
    spliced = _SPLICE.sub("", text)
    for match in _INCLUDE_DIRECTIVE.finditer(spliced):
        if match[1] is not None:
            raise InvalidManifest(f"files.{name}: a comment right after # hides which directive it is; remove it")
        if (reason := _include_refusal(f"#{match[2]}", match[3], uploaded)) is not None:
            raise InvalidManifest(f"files.{name}: {reason}")
    for match in _HAS_INCLUDE.finditer(spliced):
        operand = None if match[2] is not None else match[3]
        if (reason := _include_refusal(match[1], operand, uploaded)) is not None:
            raise InvalidManifest(f"files.{name}: {reason}")


def _check_source(manifest: Manifest, texts: Mapping[str, str]) -> None:
    main = texts[manifest.source.files[0]]
    entry = manifest.source.entry
    plain_name = entry.name.split("<")[0].split("::")[-1]
    if not re.search(rf"\b{re.escape(plain_name)}\s*[(<]", main):
        raise InvalidManifest(f"manifest.source.entry.name: no function {plain_name!r} in {manifest.source.files[0]!r}")
    if entry.linkage == "c" and 'extern "C"' not in main:
        raise InvalidManifest('manifest.source.entry.linkage: "c", but the source has no extern "C"')
    python = manifest.reference.python
    if python is not None:
        try:
            compile(texts[python], python, "exec")
        except SyntaxError as exc:
            raise InvalidManifest(f"files.{python}: not valid Python: {exc.msg} (line {exc.lineno})") from None
        except (ValueError, RecursionError, MemoryError):
            raise InvalidManifest(f"files.{python}: not valid Python") from None
    for name, text in texts.items():
        if name != python:
            _check_includes(name, text, texts)


MAX_BUFFER_BYTES = 32 << 30  # all buffers together, at the default problem: within one GPU's memory


def _check_shapes(manifest: Manifest) -> None:
    """Every buffer's shape at the default problem (the one a job gets without naming one) is whole
    positive numbers, and the buffers fit a GPU: a negative, fractional or enormous shape parsed,
    and only failed later, on a worker."""
    problem = default_problem(manifest)
    total = 0
    for index, arg in enumerate(manifest.arguments):
        if arg.kind != "buffer" or arg.shape is None:
            continue
        elements = 1
        for axis, text in enumerate(arg.shape):
            where = f"manifest.arguments.{index}.shape.{axis}"
            try:
                size = Expr.parse(where, text, frozenset(problem)).integer(problem)
            except ConstraintError as exc:
                raise InvalidManifest(f"{exc} (at the default problem {problem})") from None
            if size < 1:
                raise InvalidManifest(f"{where}: {text!r} = {size} at the default problem {problem}; sizes are >= 1")
            elements *= size
        total += elements * int(np.dtype(arg.dtype).itemsize)
    if total > MAX_BUFFER_BYTES:
        raise InvalidManifest(
            f"manifest.arguments: the buffers take {total} bytes at the default problem, more than {MAX_BUFFER_BYTES}"
        )


def _scope_names(manifest: Manifest) -> tuple[frozenset[str], frozenset[str]]:
    problem = frozenset(manifest.problem)
    tune = frozenset(manifest.tune_params)
    clash = problem & tune
    if clash:
        raise InvalidManifest(f"manifest.tune_params: {sorted(clash)} are problem parameters too")
    return problem, tune


# The largest integer a browser's (and JSON's usual) numbers hold exactly: 2**53 + 1 showed as 2**53 on
# the dashboard, and narrowing a job's space to it was refused ("not in" the values).
MAX_EXACT_INTEGER = 2**53


def _check_tune_values(manifest: Manifest) -> None:
    """Tune values the pages show as they are: integers a browser holds exactly, and text without
    invisible or reordering characters (a right-to-left override showed the rest of a label reversed)."""
    for name, values in manifest.tune_params.items():
        for index, value in enumerate(values):
            where = f"manifest.tune_params.{name}.{index}"
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INTEGER:
                raise InvalidManifest(
                    f"{where}: {value} is beyond 2**53, which a browser's numbers do not hold exactly"
                )
            if isinstance(value, str) and (invisible := invisible_character(value)) is not None:
                raise InvalidManifest(f"{where}: contains {invisible} (an invisible or control character)")


def _check_key_lengths(manifest: Manifest) -> None:
    """Every problem key and config key of the kernel fits the column that stores it: a problem of 14
    parameters with 64-character names was accepted, and every job of it was a 500; a tune value of
    1100 characters, and every job of it failed at its coordinator's steps."""
    if (reason := problem_key_refusal(problem_params(manifest))) is not None:
        raise InvalidManifest(f"manifest.problem: {reason}")
    if (reason := search_space(manifest).key_length_refusal()) is not None:
        raise InvalidManifest(f"manifest.tune_params: {reason}")


def _check_compiler_options(manifest: Manifest) -> None:
    for index, option in enumerate(manifest.source.compiler_options):
        if not WHOLE_COMPILER_OPTION.fullmatch(option):
            raise InvalidManifest(
                f"manifest.source.compiler_options.{index}: {option!r} is not one option of the allowed ones "
                "(-use_fast_math, -lineinfo, --extra-device-vectorization, -ftz/-prec-div/-prec-sqrt/-fmad=true|false, "
                "--maxrregcount=N, -std=c++17|c++20, -restrict)"
            )


def _check_names(manifest: Manifest) -> None:
    problem, tune = _scope_names(manifest)
    both = problem | tune
    try:
        for index, text in enumerate(manifest.launch.problem_size):
            Expr.parse(f"manifest.launch.problem_size.{index}", text, both)
        for axis in "xyz":
            for index, text in enumerate(getattr(manifest.launch, f"grid_div_{axis}") or ()):
                Expr.parse(f"manifest.launch.grid_div_{axis}.{index}", text, both)
        Expr.parse("manifest.launch.shared_memory", manifest.launch.shared_memory, both)
        for name, text in manifest.source.defines.items():
            Expr.parse(f"manifest.source.defines.{name}", text, both)
        args = {}
        for index, arg in enumerate(manifest.arguments):
            if arg.name in args:
                raise InvalidManifest(f"manifest.arguments.{index}.name: {arg.name!r} is listed twice")
            args[arg.name] = arg
            for dim, text in enumerate(arg.shape or ()):
                Expr.parse(f"manifest.arguments.{index}.shape.{dim}", text, problem)
            if arg.value is not None:
                Expr.parse(f"manifest.arguments.{index}.value", arg.value, problem)
        buffers = {name for name, arg in args.items() if arg.kind == "buffer"}
        for index, name in enumerate(manifest.outputs):
            if name not in buffers:
                raise InvalidManifest(f"manifest.outputs.{index}: {name!r} is not a buffer argument")
        for symbol, name in manifest.constant_memory.items():
            if name not in buffers:
                raise InvalidManifest(f"manifest.constant_memory.{symbol}: {name!r} is not a buffer argument")
        _check_reference(manifest, problem, buffers, set(args))
        Expr.parse("manifest.flops", manifest.flops, problem)
        Expr.parse("manifest.bytes", manifest.bytes, problem)
    except ConstraintError as exc:
        raise InvalidManifest(str(exc)) from None
    space = search_space(manifest)
    defaults = default_problem(manifest)
    if space.cartesian_size > MAX_CARTESIAN:
        raise InvalidManifest(f"manifest.tune_params: {space.cartesian_size} configs, more than {MAX_CARTESIAN}")
    try:
        valid = space.valid_indices(defaults)
    except InvalidInput as exc:
        raise InvalidManifest(f"manifest.restrictions: {exc}") from None
    if len(valid) == 0:
        raise InvalidManifest(
            f"manifest.restrictions: no config of tune_params satisfies them for the default problem {defaults}"
        )


def _check_reference(manifest: Manifest, problem: frozenset[str], buffers: set[str], args: set[str]) -> None:
    reference = manifest.reference
    if reference.builtin is not None:
        required, optional = BUILTIN_OPERANDS[reference.builtin]
        for operand in required:
            if operand not in reference.inputs:
                raise InvalidManifest(f"manifest.reference.inputs: the {reference.builtin} reference needs {operand!r}")
        for operand, name in reference.inputs.items():
            if operand not in required + optional:
                raise InvalidManifest(
                    f"manifest.reference.inputs.{operand}: the {reference.builtin} reference reads "
                    f"{list(required + optional)}"
                )
            if name not in buffers:
                raise InvalidManifest(f"manifest.reference.inputs.{operand}: {name!r} is not a buffer argument")
        if len(manifest.outputs) != 1:
            raise InvalidManifest("manifest.outputs: a built-in reference computes exactly one output")
        return
    if reference.python is not None:
        return
    for index, text in enumerate(reference.grid or ()):
        Expr.parse(f"manifest.reference.grid.{index}", text, problem)
    for index, text in enumerate(reference.block or ()):
        Expr.parse(f"manifest.reference.block.{index}", text, problem)
    for name, text in reference.defines.items():
        Expr.parse(f"manifest.reference.defines.{name}", text, problem)
    for index, name in enumerate(reference.arguments or ()):
        if name not in args:
            raise InvalidManifest(f"manifest.reference.arguments.{index}: {name!r} is not an argument")


def search_space(manifest: Manifest) -> SearchSpace:
    """The tune parameters and restrictions; the problem parameters are the restrictions' context."""
    parameters = []
    for name, values in manifest.tune_params.items():
        try:
            parameters.append(Parameter(name, tuple(values)))
        except InvalidInput as exc:
            raise InvalidManifest(f"manifest.tune_params.{name}: {exc}") from None
    try:
        restrictions = tuple(manifest.restrictions) + thread_limit(manifest)
        return SearchSpace(tuple(parameters), restrictions, context_names=frozenset(manifest.problem))
    except ConstraintError as exc:
        index = next((i for i, text in enumerate(manifest.restrictions) if repr(text.strip()) in str(exc)), None)
        where = f"manifest.restrictions.{index}" if index is not None else "manifest.restrictions"
        raise InvalidManifest(f"{where}: {exc}") from None
    except InvalidInput as exc:
        raise InvalidManifest(f"manifest.tune_params: {exc}") from None


MAX_THREADS_PER_BLOCK = 1024


def thread_limit(manifest: Manifest) -> tuple[str, ...]:
    """The restriction Kernel Tuner adds by itself: at most 1024 threads per block (over the block
    dimensions that are tune parameters)."""
    tuned = [name for name in manifest.launch.block_size_names if name in manifest.tune_params]
    return (f"{' * '.join(tuned)} <= {MAX_THREADS_PER_BLOCK}",) if tuned else ()


def problem_params(manifest: Manifest) -> tuple[ProblemParam, ...]:
    """The problem signature of the kernel, as its spec has it."""
    return tuple(
        ProblemParam(
            name, kind=p.kind, choices=tuple(p.choices) if p.choices else None, minimum=p.minimum, maximum=p.maximum
        )
        for name, p in manifest.problem.items()
    )


def default_problem(manifest: Manifest) -> dict[str, Any]:
    return {name: param.default for name, param in manifest.problem.items()}


def check_recording(manifest: Manifest, data: bytes) -> dict[str, Any]:
    """The recording must be a Kernel Tuner cache file of this kernel's parameters.

    Returns:
        The parsed cache file.

    Raises:
        InvalidManifest: not a cache file, or one of other parameters.
    """
    assert manifest.recording is not None
    where = "manifest.recording.file"
    try:
        raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    except (OSError, EOFError):
        raise InvalidManifest(f"{where}: not a readable gzip file") from None
    if len(raw) > MAX_RECORDING_UNPACKED:
        raise InvalidManifest(f"{where}: more than {MAX_RECORDING_UNPACKED} bytes unpacked")
    try:
        text = raw.decode("utf-8").strip()
        try:
            cache = json.loads(text)
        except json.JSONDecodeError:
            cache = json.loads(text.rstrip().rstrip(",") + "}}")  # an unterminated Kernel Tuner cache
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InvalidManifest(f"{where}: not a Kernel Tuner cache file (JSON)") from None
    if not isinstance(cache, dict) or not {"tune_params_keys", "cache", "device_name"} <= set(cache):
        raise InvalidManifest(f"{where}: not a Kernel Tuner cache file (needs device_name, tune_params_keys, cache)")
    if list(cache["tune_params_keys"]) != list(manifest.tune_params):
        raise InvalidManifest(
            f"{where}: records parameters {list(cache['tune_params_keys'])}, the manifest tunes "
            f"{list(manifest.tune_params)} (same names, same order)"
        )
    problem = manifest.recording.problem or default_problem(manifest)
    unknown = set(problem) - set(manifest.problem)
    if unknown:
        raise InvalidManifest(f"manifest.recording.problem: {sorted(unknown)} are not problem parameters")
    _check_recorded_times(cache["cache"], where)
    return cache


def _check_recorded_times(entries: Any, where: str) -> None:
    """Each recorded time is a positive number or a failure marker (a string). A replay worker serves
    them as measurements: -1 ms was published as the best config, NaN failed every write of its trial."""
    if not isinstance(entries, dict):
        raise InvalidManifest(f"{where}: its cache is not an object of configs")
    for key, entry in entries.items():
        value = entry.get("time") if isinstance(entry, dict) else None
        if isinstance(value, bool) or (isinstance(value, int | float) and not is_a_time(value)):
            raise InvalidManifest(f"{where}: config {key!r} records {value!r} ms (a time is a positive number)")
