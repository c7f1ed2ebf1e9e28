"""A checked bundle becomes a KernelSpec: its space, problem signature, the "cuda" implementation
and, when it carries a Kernel Tuner cache file, a "replay" implementation serving that recording."""

from __future__ import annotations

from pathlib import Path

from kernelfarm.core.capabilities import UPLOADED_PYTHON
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.landscape import load_landscape
from kernelfarm.kernels.manifest.bundle import Bundle, default_problem, problem_params, search_space
from kernelfarm.kernels.manifest.cuda import ManifestCudaKernel
from kernelfarm.kernels.recordings import Recordings
from kernelfarm.kernels.spec import Implementation, KernelSpec


def build_spec(bundle: Bundle, version: int, directory: Path | None = None) -> KernelSpec:
    """The KernelSpec of ``bundle`` as upload ``version``.

    Args:
        bundle: a checked bundle.
        version: the farm's version number of this upload (1, 2, ... per kernel name).
        directory: where to materialize the bundle: processes without database access (the
            measuring child) read it from there, and its recording is replayed from there. None:
            nowhere (no replay implementation; measurable only in this process).
    """
    manifest = bundle.manifest
    if directory is not None:
        bundle.write(directory)
    impls: dict[str, Implementation] = {"cuda": ManifestCudaKernel(bundle, directory)}
    if bundle.recording is not None and manifest.recording is not None and directory is not None:
        path = directory / manifest.recording.file
        landscape = load_landscape(path)
        recorded = {**default_problem(manifest), **(manifest.recording.problem or {})}
        impls["replay"] = Recordings(paths=(path,), problems=(recorded,),
                                     gpu_models=frozenset({model_slug(landscape.device_name)}))  # fmt: skip
    return KernelSpec(
        name=manifest.name,
        version=version,
        description=manifest.description or f"{manifest.name}: uploaded CUDA kernel ({manifest.source.files[0]})",
        space=search_space(manifest),
        problem_params=problem_params(manifest),
        default_problem=default_problem(manifest),
        impls=impls,
        requires=frozenset({UPLOADED_PYTHON}) if bundle.has_python else frozenset(),
    )
