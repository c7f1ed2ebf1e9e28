"""KernelSpec's implementations: the typed accessor, the derived names, what the registry rejects."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.core import landscape
from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.space import Parameter
from kernelfarm.kernels import registry
from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.faultinject.kernel import SPEC as FAULT_SPEC
from kernelfarm.kernels.recordings import Recordings
from kernelfarm.kernels.registry import RegistryError, all_kernels, validate
from kernelfarm.kernels.spec import Implementation, MissingImplementation

RECORDINGS = Recordings(paths=(Path("x.json"),), problems=({"n": 1 << 20},), gpu_models=frozenset({"gpu-a"}))


class NewBackendImpl:
    """A stand-in for a backend's implementation type that the spec does not know."""

    def fingerprint(self) -> bytes:
        return b"def kernel(): ..."


def test_impl_returns_the_typed_implementation_or_says_what_is_missing() -> None:
    assert isinstance(FAULT_SPEC.impl("cuda", CudaKernel), CudaKernel)
    with pytest.raises(MissingImplementation, match=r"no 'replay' implementation; it has \['cuda'\]"):
        FAULT_SPEC.impl("replay", Recordings)
    with pytest.raises(TypeError, match="not a"):
        FAULT_SPEC.impl("cuda", Recordings)


def test_a_new_backend_slots_in_without_changing_the_spec() -> None:
    spec = replace(FAULT_SPEC, impls={**FAULT_SPEC.impls, "opencl": NewBackendImpl()})
    validate(spec)
    assert spec.backends == frozenset({"cuda", "opencl"})
    assert isinstance(spec.impl("opencl", NewBackendImpl), Implementation)
    assert spec.source_hash != FAULT_SPEC.source_hash  # its code is part of what a measurement depends on
    assert not spec.replay_only


def test_recordings_beside_code_leave_the_source_hash_alone() -> None:
    with_recordings = replace(FAULT_SPEC, impls={**FAULT_SPEC.impls, "replay": RECORDINGS})
    assert with_recordings.recordings is RECORDINGS and not with_recordings.replay_only
    assert with_recordings.source_hash == FAULT_SPEC.source_hash
    assert with_recordings.normalize_problem({"n": 7}) == {"n": 7}  # any problem: the code can run it


def test_a_replay_only_kernel_is_limited_to_its_recordings() -> None:
    replay_only = replace(FAULT_SPEC, impls={"replay": RECORDINGS})
    assert replay_only.replay_only and replay_only.backends == frozenset({"replay"})
    assert replay_only.normalize_problem(None) == {"n": 1 << 20}
    with pytest.raises(InvalidInput, match="replay-only"):
        replay_only.normalize_problem({"n": 7})
    other = replace(replay_only, impls={"replay": replace(RECORDINGS, paths=(Path("y.json"),))})
    assert other.source_hash != replay_only.source_hash  # the recordings are its source


@pytest.mark.parametrize(
    "impls,message",
    [({}, "no implementation"), ({"cuda": RECORDINGS}, "must be a CudaKernel"), ({"replay": object()}, "Recordings")],
)
def test_the_registry_rejects_missing_or_mistyped_implementations(impls: dict, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        validate(replace(FAULT_SPEC, impls=impls))


def test_catalogue_kernels_with_landscapes_are_served_by_replay_too() -> None:
    spec = all_kernels()["matmul_fp32"]
    recordings = spec.impl("replay", Recordings)
    assert spec.backends == frozenset({"cuda", "replay"}) and not spec.replay_only
    assert {"M": 4096, "N": 4096, "K": 4096} in [dict(p) for p in recordings.problems]
    assert "nvidia-h100-80gb-hbm3" in recordings.gpu_models


def test_the_catalogue_parses_each_kernels_recording_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """kernels/<name>/landscapes/: one parse per file for its problem and GPU, and no Landscape built (every
    process loading the catalogue paid both; a replay worker serving the kernel loads it when asked)."""
    reads: Counter[Path] = Counter()
    built: list[Path] = []
    read, load = registry.read_json_tolerant, landscape._load_landscape

    def counting_read(path: Path) -> dict[str, Any]:
        reads[path] += 1
        return read(path)

    def recording_load(path: Path) -> landscape.Landscape:
        built.append(path)
        return load(path)

    monkeypatch.setattr(registry, "read_json_tolerant", counting_read)
    monkeypatch.setattr(landscape, "_load_landscape", recording_load)
    specs = {spec.name: spec for spec in registry._cuda_specs()}
    assert "nvidia-h100-80gb-hbm3" in specs["matmul_fp32"].impl("replay", Recordings).gpu_models
    assert len(reads) >= 10 and set(reads.values()) == {1}
    assert built == []


def test_a_kernels_recording_outside_the_cache_format_is_refused_at_load(tmp_path: Path) -> None:
    recording: dict[str, Any] = {"problem": {"n": 7}, "device_name": "GPU A", "tune_params_keys": [],
                                 "tune_params": {}}  # fmt: skip
    (tmp_path / "gpu_n7.json").write_text(json.dumps(recording))
    with pytest.raises(InvalidInput, match="missing field 'cache'"):
        registry._with_recordings(FAULT_SPEC, tmp_path)
    (tmp_path / "gpu_n7.json").write_text(json.dumps(recording | {"cache": {}}))
    assert registry._with_recordings(FAULT_SPEC, tmp_path).impl("replay", Recordings).gpu_models == {"gpu-a"}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"# a README, given by mistake\n", "JSONDecodeError"),
        (b"\x1f\x8b not gzip after all", "BadGzipFile"),
        (b"\xff\xfe{}", "UnicodeDecodeError"),
        (b"[" * 100_000, "RecursionError"),
        (b"[1, 2]", ""),  # JSON, but no object
    ],
)
def test_a_file_that_is_no_cache_file_is_refused_saying_so(tmp_path: Path, content: bytes, reason: str) -> None:
    """They raised the parser's own exception (a traceback from `kernelfarm bench-strategies`)."""
    path = tmp_path / "not-a-cache.json"
    path.write_bytes(content)
    with pytest.raises(InvalidInput, match=r"not-a-cache\.json: not a Kernel Tuner cache file") as refused:
        registry.read_json_tolerant(path)
    assert reason in str(refused.value)


@pytest.mark.parametrize("make", [lambda p: None, lambda p: p.mkdir()], ids=["missing", "a folder"])
def test_a_file_that_cannot_be_read_is_refused_as_unreadable_not_as_no_cache_file(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    path = tmp_path / "recording.json"
    make(path)
    with pytest.raises(InvalidInput, match=r"recording\.json: cannot be read \((No such file|Is a directory)"):
        registry.read_json_tolerant(path)


def test_recorded_times_that_are_no_time_are_failures(tmp_path: Path) -> None:
    """A replay worker serves a recording's times as measurements: -1 ms was published as a best config,
    and NaN, which no result row can store (PostgreSQL's JSON has none), ended its trial as "worker lost"."""
    entries = {"1": 2.5, "2": -1.0, "3": 0, "4": float("nan"), "5": float("inf"), "6": True, "7": "InvalidConfig"}
    cache = {k: {"x": int(k), "time": t, "times": [t]} for k, t in entries.items()}
    cache["1"]["times"] = [2.0, float("nan"), -3.0, 3.0]
    recording = {"device_name": "GPU A", "tune_params_keys": ["x"], "tune_params": {"x": list(range(1, 8))},
                 "problem_size": [1], "cache": cache}  # fmt: skip
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(recording))  # Python's json writes NaN and Infinity, as Kernel Tuner's may
    recorded = landscape._load_landscape(path).entries
    assert recorded["1"].failure is None and recorded["1"].times_ms == (2.0, 3.0) and recorded["1"].time_ms == 2.5
    for key in ("2", "3", "4", "5"):
        assert recorded[key].failure is not None and "not a positive number" in (recorded[key].failure_message or "")
    assert recorded["6"].failure_message == "no time recorded"
    assert [k for k, r in recorded.items() if r.failure is None] == ["1"]


def test_the_registry_rejects_a_kernel_whose_config_key_cannot_be_stored() -> None:
    """A plugin whose space holds a value too long for trials.config_key is refused as it loads (its first
    job's first trial failed to insert: core/key_lengths.py)."""
    long_value = "v" * 1100
    space = replace(FAULT_SPEC.space, parameters=(*FAULT_SPEC.space.parameters, Parameter("variant", (long_value,))))
    with pytest.raises(RegistryError, match=r"can be 1\d{3} characters long, more than the 1024 a trial stores"):
        validate(replace(FAULT_SPEC, space=space))
