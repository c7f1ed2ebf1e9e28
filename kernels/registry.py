"""The catalogue of tunable kernels, validated at load.

CUDA and Triton kernels live in ``kernels/<name>/spec.py`` and expose ``SPEC``; recorded kernels come from
``kernels/recorded/``; plugin kernels from installed packages' ``kernelfarm.kernels`` entry points
(kernels/plugins.py). Uploaded kernels (manifests stored in the database, kernels/uploaded.py) are
not part of the catalogue: :func:`get_kernel` finds them by name and version.

Validation: unique names, at least one implementation, each backend's implementation of the type
that backend runs, a default problem that normalizes, and a non-empty valid space for it. (The
kernel contract suite, tests/kernels/test_kernel_contract.py, checks more: launch shapes, the
problem signature, and on a GPU each kernel against its reference.)
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from kernelfarm.core.errors import NoSuchVersion, NotFound
from kernelfarm.core.gpu import model_slug
from kernelfarm.core.landscape import check_format, read_json_tolerant, recorded_device
from kernelfarm.core.settings import get_settings
from kernelfarm.kernels.cuda_kernel import CudaKernel
from kernelfarm.kernels.plugins import plugin_specs
from kernelfarm.kernels.recorded import recorded_specs
from kernelfarm.kernels.recordings import Recordings
from kernelfarm.kernels.spec import KernelSpec
from kernelfarm.kernels.triton_kernel import TritonKernel

logger = logging.getLogger(__name__)
_HERE = Path(__file__).parent
# The implementation type each known backend runs; a backend added later registers its own here.
IMPLEMENTATION_TYPES: dict[str, type] = {"cuda": CudaKernel, "replay": Recordings, "triton": TritonKernel}


class RegistryError(Exception):
    """A kernel spec is broken: a programming error, caught by the test suite."""


@lru_cache(maxsize=1)
def all_kernels() -> dict[str, KernelSpec]:
    specs = [*_cuda_specs(), *recorded_specs(), *plugin_specs()]
    registry: dict[str, KernelSpec] = {}
    for spec in specs:
        validate(spec)
        if spec.name in registry:
            raise RegistryError(f"two kernels are named {spec.name!r}")
        registry[spec.name] = spec
    return registry


def get_kernel(name: str, version: int | None = None) -> KernelSpec:
    """The kernel called ``name``: from the catalogue (and plugins), else an uploaded kernel at
    ``version`` (None: its latest), read from the farm's database.

    A catalogue or plugin kernel is the one installed here whatever ``version`` says: a plugin at
    another version is kept off this worker by its requirement (KernelSpec.requires).

    Raises:
        NoSuchVersion: an uploaded kernel of that name is stored, but not at ``version``.
        NotFound: no such kernel.
    """
    found = all_kernels().get(name)
    if found is not None:
        return found
    # Imported here, as uploaded_kernel below is: the database layer loads only for a name that is not
    # a catalogue kernel's.
    from kernelfarm.core.store.kernel_versions import possible_name

    if not possible_name(name):  # not a name any kernel can have: no database session at all
        raise NotFound(f"unknown kernel {name!r}")
    if get_settings().database_url:
        from kernelfarm.kernels.uploaded import uploaded_kernel

        try:
            return uploaded_kernel(name, version)
        except NoSuchVersion:
            raise  # the kernel exists: it is not "unknown", and the reader is told the versions it has
        except NotFound:
            pass
    raise NotFound(f"unknown kernel {name!r}; known: {sorted(all_kernels())} and the uploaded kernels")


def kernel_at_version(name: str, version: int | None) -> KernelSpec:
    """:func:`get_kernel`, held to ``version`` for a catalogue or plugin kernel too: one installed here at
    another version is NoSuchVersion, as an uploaded kernel without that version is (None: its current
    version). For readers asking for a version; the farm's own steps take get_kernel, which serves a
    catalogue kernel whatever version a job recorded.

    Raises:
        NoSuchVersion: the kernel is known, but not at ``version``.
        NotFound: no such kernel.
    """
    spec = get_kernel(name, version)
    if version is not None and spec.version != version:
        raise NoSuchVersion(name, version, [spec.version])
    return spec


def validate(spec: KernelSpec) -> None:
    """Raises:
    RegistryError: the spec is broken (see the module's docstring).
    InvalidInput: its default problem does not normalize.
    """
    if not spec.impls:
        raise RegistryError(f"{spec.name}: no implementation (impls is empty)")
    for backend, impl in spec.impls.items():
        kind = IMPLEMENTATION_TYPES.get(backend)
        if kind is not None and not isinstance(impl, kind):
            raise RegistryError(f"{spec.name}: the {backend!r} implementation must be a {kind.__name__}")
    problem = spec.normalize_problem(spec.default_problem)
    if len(spec.space.valid_indices(problem)) == 0:
        raise RegistryError(f"{spec.name}: no valid config for the default problem {problem}")
    too_long = spec.key_length_refusal()  # a plugin's, found as it loads rather than as its first job fails
    if too_long is not None:
        raise RegistryError(f"{spec.name}: {too_long}")


def _cuda_specs() -> list[KernelSpec]:
    specs = []
    for folder in sorted(p for p in _HERE.iterdir() if (p / "spec.py").is_file()):
        module = importlib.import_module(f"kernelfarm.kernels.{folder.name}.spec")
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, KernelSpec):
            raise RegistryError(f"kernels/{folder.name}/spec.py does not define SPEC")
        specs.append(_with_recordings(spec, folder / "landscapes"))
    return specs


def _with_recordings(spec: KernelSpec, directory: Path) -> KernelSpec:
    """Attach the kernel's own recorded landscapes (kernels/<name>/landscapes/) as its "replay"
    implementation: replay workers can then serve it on the GPU models it was measured on, without
    a GPU. Each of these files names its problem (a ``"problem"`` object).

    Each file is parsed once, for its problem and GPU: every process that loads the catalogue (API,
    coordinator, each worker and measuring child) did it twice, the second time building every
    recorded entry (load_landscape), which only a replay worker serving the kernel needs, later."""
    paths = tuple(sorted(directory.glob("*.json*"))) if directory.is_dir() else ()
    if not paths:
        return spec
    problems: list[dict] = []
    models: set[str] = set()
    for path in paths:
        data = read_json_tolerant(path)
        check_format(path, data)
        problem = spec.normalize_problem(data.get("problem"))
        if problem not in problems:
            problems.append(problem)
        models.add(model_slug(recorded_device(data)))
    recordings = Recordings(paths=paths, problems=tuple(problems), gpu_models=frozenset(models))
    return replace(spec, impls={**spec.impls, "replay": recordings})
