"""What a tunable kernel is: its search space, its problem signature, and one implementation per backend.

A :class:`KernelSpec` is pure data plus small functions; the registry validates every spec at load
time so a broken kernel fails the test suite, not a worker at 3 a.m. How a backend runs the kernel
is the implementation it finds under its name in ``spec.impls``: a
:class:`~kernelfarm.kernels.cuda_kernel.CudaKernel` for ``"cuda"``, a
:class:`~kernelfarm.kernels.recordings.Recordings` for ``"replay"``; a new backend (``"triton"``)
brings its own implementation type and nothing here changes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from kernelfarm.core.errors import InvalidInput, NotFound
from kernelfarm.core.key_lengths import PROBLEM_KEY_LENGTH
from kernelfarm.core.space import SearchSpace
from kernelfarm.kernels.recordings import Recordings

ImplT = TypeVar("ImplT")


@runtime_checkable
class Implementation(Protocol):
    """How one backend runs a kernel. Each backend defines its own implementation type (what it
    needs to compile, launch, verify or replay); the spec only asks every one for its fingerprint."""

    def fingerprint(self) -> bytes:
        """The bytes a measurement by this backend depends on besides config and problem: its
        source text and every file that source includes (recordings: their file names)."""
        ...


class MissingImplementation(NotFound):
    """The kernel has no implementation for the backend asked for."""


# A string problem value (a dtype, a layout) is written into the problem key ("M=1024,dtype=float16"),
# which trials, /v1/best and the exports match on: a comma or "=" in one made two problems one key
# (A="x,B=y" with B="z" read back as A="x", B="z"), and the exports write the key into C comments and
# macro names. So: 1-64 characters, a letter or digit first, then letters, digits and _ . + -.
PROBLEM_TEXT_LENGTH = 64
PROBLEM_TEXT = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.+-]{{0,{PROBLEM_TEXT_LENGTH - 1}}}")
PROBLEM_TEXT_RULE = f"1-{PROBLEM_TEXT_LENGTH} letters, digits and _ . + - (starting with a letter or digit)"


# The measuring child keeps two input sets of a problem at once: the job's seed's, and the second
# seed's that a config is verified on again when it is the fastest so far (worker/measuring/session.py).
INPUT_SETS = 2


def format_bytes(count: int) -> str:
    """``4398046511104`` -> ``"4.0 TiB"``: a byte count as an error message shows it."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class ProblemParam:
    """One dimension of a kernel's problem (``M``, ``dtype``, ...)."""

    name: str
    kind: str = "int"  # "int" or "str"
    choices: tuple[Any, ...] | None = None
    minimum: int = 1
    maximum: int = 1 << 20
    # The kernel has no tail handling along this dimension: a problem must be a multiple of this
    # (refused with that reason, rather than as "no config fits").
    multiple_of: int = 1
    # A parameter added to a kernel after problems of it were stored: at this value it is left out of
    # the problem key (and a stored problem without it reads as this value), so the keys of problems
    # stored before it existed still name the same problems. None: always in the key.
    key_default: Any = None

    def normalize(self, value: Any) -> Any:
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInput(f"problem.{self.name} must be an integer, got {_shown(value)}")
            if not self.minimum <= value <= self.maximum:
                raise InvalidInput(f"problem.{self.name}={value} is outside [{self.minimum}, {self.maximum}]")
            if value % self.multiple_of:
                raise InvalidInput(
                    f"problem.{self.name}={value} must be a multiple of {self.multiple_of}: this kernel "
                    "handles no partial tiles along it"
                )
        elif not isinstance(value, str):
            raise InvalidInput(f"problem.{self.name} must be a string, got {_shown(value)}")
        if self.choices is not None and value not in self.choices:  # the choices keep the rule below
            raise InvalidInput(f"problem.{self.name}={_shown(value)} is not one of {list(self.choices)}")
        if isinstance(value, str) and not PROBLEM_TEXT.fullmatch(value):
            raise InvalidInput(f"problem.{self.name}={_shown(value)}: a string problem value has {PROBLEM_TEXT_RULE}")
        return value

    @property
    def longest_text(self) -> int:
        """The most characters a value :meth:`normalize` accepts has as text (as a problem key writes
        it): the longest choice; else, for an integer, the longer of its bounds (the longest decimal
        of a range is at one of its ends), for a string the most :data:`PROBLEM_TEXT` matches."""
        if self.choices is not None:
            return max(len(str(choice)) for choice in self.choices)
        if self.kind == "int":
            return max(len(str(self.minimum)), len(str(self.maximum)))
        return PROBLEM_TEXT_LENGTH


def longest_problem_key(params: Sequence[ProblemParam]) -> int:
    """The most characters :meth:`KernelSpec.problem_key` gives for any problem of ``params``: each
    parameter's ``name=value`` at its longest value, and a comma between two (a parameter at its
    ``key_default`` is left out of a key, which only makes that key shorter)."""
    return sum(len(p.name) + 1 + p.longest_text for p in params) + len(params) - 1


def problem_key_refusal(params: Sequence[ProblemParam]) -> str | None:
    """Why a problem of ``params`` may have a key too long for a job to store, or None when every key
    fits: a job of such a problem failed its INSERT (a 500 at submission)."""
    longest = longest_problem_key(params)
    if longest <= PROBLEM_KEY_LENGTH:
        return None
    return (
        f"a problem's key (name=value of each problem parameter, comma-joined) can be {longest} characters "
        f"long, more than the {PROBLEM_KEY_LENGTH} a job stores; use fewer or shorter parameter names, or "
        "narrower bounds"
    )


def _shown(value: Any) -> str:
    """A refused value as an error message quotes it: abbreviated (reprlib), so a 100 kB string sent as
    a problem parameter is not echoed back whole."""
    return reprlib.repr(value)


@dataclass(frozen=True)
class KernelSpec:
    """Attributes:
    name, version, description: identity; bump ``version`` when the meaning of a config changes.
    space: the tunable parameters and their constraints.
    problem_params: the problem signature (``M``, ``dtype``, ...).
    default_problem: the problem a job tunes when it names none; must normalize.
    impls: backend name -> that backend's implementation (read-only).
    test_problems: small problems the kernel contract suite verifies on the GPU, shaped to reach the
        kernel's edge cases (ragged tails, each dtype, causal masks) yet leaving a rich space to
        sample configs from; empty: the default problem.
    requires: capabilities a worker must have to measure it (core/capabilities.py): a plugin
        kernel requires its plugin at the same version, a kernel with uploaded Python requires
        workers that opted in. Empty: every worker of its backend can.
    """

    name: str
    version: int
    description: str
    space: SearchSpace
    problem_params: tuple[ProblemParam, ...]
    default_problem: Mapping[str, Any]
    impls: Mapping[str, Implementation]
    test_problems: tuple[Mapping[str, Any], ...] = ()
    requires: frozenset[str] = frozenset()

    @property
    def backends(self) -> frozenset[str]:
        """Names of the backends that can run this kernel."""
        return frozenset(self.impls)

    # ``kind`` is a class; typed as a callable because mypy refuses abstract classes (CudaKernel)
    # where ``type[T]`` is expected.
    def impl(self, backend: str, kind: Callable[..., ImplT]) -> ImplT:
        """The implementation for ``backend``, checked to be an instance of the class ``kind``
        (``spec.impl("cuda", CudaKernel)``).

        Raises:
            MissingImplementation: the kernel has no implementation for ``backend``.
            TypeError: it has one, but not a ``kind`` (a programming error).
        """
        found = self.impls.get(backend)
        if found is None:
            raise MissingImplementation(
                f"kernel {self.name!r} has no {backend!r} implementation; it has {sorted(self.impls)}"
            )
        if not (isinstance(kind, type) and isinstance(found, kind)):
            raise TypeError(f"{self.name}: the {backend!r} implementation is a {type(found).__name__}, not a {kind}")
        return cast(ImplT, found)

    @property
    def recordings(self) -> Recordings | None:
        """The replay implementation, if the kernel was recorded."""
        found = self.impls.get("replay")
        return found if isinstance(found, Recordings) else None

    @property
    def replay_only(self) -> bool:
        """Known only through recordings: jobs are limited to the recorded problems and GPU models."""
        return self.recordings is not None and len(self.impls) == 1

    @property
    def source_hash(self) -> str:
        """Hash of everything a measurement depends on in the spec: the code of each implementation
        (sources and every header they include), the space and the version. Recordings replay
        measurements of that code, so they count only for a kernel with no code of its own."""
        code = [impl for _, impl in sorted(self.impls.items()) if not isinstance(impl, Recordings)]
        digest = hashlib.sha256()
        for impl in code:
            digest.update(impl.fingerprint())
        digest.update(json.dumps(self.space.to_dict(), sort_keys=True).encode())
        digest.update(str(self.version).encode())
        if not code and self.recordings is not None:
            digest.update(self.recordings.fingerprint())
        return digest.hexdigest()[:16]

    def normalize_problem(self, problem: Mapping[str, Any] | None, *, recorded_only: bool = True) -> dict[str, Any]:
        """Fill defaults, check names and types.

        Args:
            recorded_only: refuse a problem never recorded for a replay-only kernel (a job could not
                measure it). False for lookups, which fall back to the nearest recorded problem.

        Raises:
            InvalidInput: unknown or ill-typed problem values, or (``recorded_only``) a problem never
                recorded for a replay-only kernel.
        """
        given = dict(problem or {})
        known = {p.name for p in self.problem_params}
        unknown = set(given) - known
        if unknown:
            raise InvalidInput(f"kernel {self.name!r} has no problem parameters {sorted(unknown)}")
        out = {}
        for param in self.problem_params:
            out[param.name] = param.normalize(given.get(param.name, self.default_problem.get(param.name)))
        recordings = self.recordings
        if recorded_only and self.replay_only and recordings is not None and not recordings.covers(out):
            raise InvalidInput(f"kernel {self.name!r} is replay-only; recorded problems: {list(recordings.problems)}")
        return out

    def device_bytes(self, problem: Mapping[str, Any]) -> int | None:
        """Device memory the farm needs to measure ``problem`` (normalized): :data:`INPUT_SETS` input
        sets (inputs, outputs and the reference outputs: ``GpuKernel.input_set_bytes``) of whichever
        implementation declares the most. None when no implementation declares one: a replay-only
        kernel (recordings replay what was measured), an implementation that does not say (a plugin's,
        written before the method existed). Not counted: the CUDA context, libraries' workspaces, the
        L2 flush buffer, and transients while inputs, references and errors are computed."""
        declared = []
        for impl in self.impls.values():
            method = getattr(impl, "input_set_bytes", None)
            value = method(problem) if callable(method) else None
            if value is not None:
                declared.append(int(value))
        return INPUT_SETS * max(declared) if declared else None

    def memory_refusal(self, problem: Mapping[str, Any], limit_bytes: int, limit: str) -> str | None:
        """Why ``problem`` cannot be measured within ``limit_bytes`` of device memory (``limit`` says
        whose limit it is, e.g. "the 80.0 GiB of GPU model 'x'"), or None when it fits or declares
        no footprint."""
        needed = self.device_bytes(problem)
        if needed is None or needed <= limit_bytes:
            return None
        return (
            f"problem {self.problem_key(problem)} of kernel {self.name!r} needs {format_bytes(needed)} "
            f"({needed} bytes) of device memory ({INPUT_SETS} input sets: inputs, outputs and reference), "
            f"more than {limit} ({limit_bytes} bytes)"
        )

    def stored_problem(self, problem: Mapping[str, Any]) -> dict[str, Any]:
        """A problem as stored, with each parameter added after it was stored (one with a
        ``key_default``) filled in as that value: the problem its key names. Exports and filters
        compare these, so a problem stored before the parameter existed matches one that names it."""
        return {**self.problem_key_defaults(), **problem}

    def problem_key_defaults(self) -> dict[str, Any]:
        """Each parameter that reads as its ``key_default`` where a stored problem leaves it out."""
        return {p.name: p.key_default for p in self.problem_params if p.key_default is not None}

    def problem_key(self, problem: Mapping[str, Any]) -> str:
        return ",".join(
            f"{p.name}={problem[p.name]}"
            for p in self.problem_params
            if p.key_default is None or problem[p.name] != p.key_default
        )

    def key_length_refusal(self) -> str | None:
        """Why a problem or a config of this kernel may have a key too long to store (core/key_lengths.py),
        or None when all of them fit."""
        return problem_key_refusal(self.problem_params) or self.space.key_length_refusal()

    def problem_distance(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
        """Distance between two problems for the 'nearest problem' fallback: sum of |log2 ratio| of
        the integer dimensions; infinite when a non-integer dimension (dtype, layout) differs."""
        total = 0.0
        for p in self.problem_params:
            x, y = a.get(p.name, p.key_default), b.get(p.name, p.key_default)
            if p.kind == "int" and isinstance(x, int) and isinstance(y, int) and x > 0 and y > 0:
                total += abs(math.log2(x / y))
            elif x != y:
                return math.inf
        return total
