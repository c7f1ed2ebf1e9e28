"""Output poisoning and the check of an output against its reference: by norm AND element by element.

Shared by every GPU backend: the measuring child poisons a kernel's outputs before its verifying run
and compares them with the reference of the kernel's implementation afterwards (see
:class:`~kernelfarm.kernels.tolerance.Tolerance` for what each bound means and how a kernel derives
it).

Why both checks: a relative-L2 norm over a whole tensor averages a local fault away. A flash-attention
config with 110 of 262,144 query rows zeroed passed a norm tolerance of 2e-2 (its real error is
2.3e-3); every element of those rows misses by the size of the value itself, which the element-wise
bound sees at once.

The functions take CuPy arrays (in the child) or NumPy arrays (CPU tests) and compute in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernelfarm.kernels.tolerance import Tolerance


def poison(array: Any) -> None:
    """Fill with all-ones bytes: NaN for every float type, so an unwritten element fails the check."""
    array.view("uint8").fill(0xFF)


@dataclass(frozen=True)
class Errors:
    """How far an output is from its reference.

    Attributes:
        norm: ||out - ref||_2 / ||ref||_2.
        element: max_i |out_i - ref_i| / (|ref_i| + rms(ref)): the worst element, relative to its own
            size, with the output's rms as the floor (an element whose reference is near zero is
            judged on the output's scale, as a sum that cancels should be).
        max_abs: max_i |out_i - ref_i|.
        max_rel: max_i |out_i - ref_i| / |ref_i| over elements with |ref_i| >= rms(ref) (0 if none):
            reported, not checked.
        worst_index: flat index of the element that set ``element``.
        finite: every output element is finite (an unwritten, poisoned element is NaN).
    """

    norm: float
    element: float
    max_abs: float
    max_rel: float
    worst_index: int
    finite: bool

    @classmethod
    def infinite(cls) -> Errors:
        return cls(math.inf, math.inf, math.inf, math.inf, -1, False)

    def merge(self, other: Errors) -> Errors:
        """The worse of two outputs' errors, field by field."""
        worst_index = self.worst_index if self.element >= other.element else other.worst_index
        return Errors(
            max(self.norm, other.norm),
            max(self.element, other.element),
            max(self.max_abs, other.max_abs),
            max(self.max_rel, other.max_rel),
            worst_index,
            self.finite and other.finite,
        )

    def as_metrics(self) -> dict[str, float]:
        return {
            "rel_error": self.norm,
            "element_error": self.element,
            "max_abs_error": self.max_abs,
            "max_rel_error": self.max_rel,
        }


def errors(out: Any, ref: Any) -> Errors:
    """The errors of ``out`` against ``ref`` (same shape; bf16 as uint16 bits). A shape mismatch or
    any non-finite output element gives infinite errors."""
    xp = _array_module(out)
    a = as_float(out).astype(xp.float64).ravel()
    b = as_float(ref).astype(xp.float64).ravel()
    if a.shape != b.shape or a.size == 0:
        return Errors.infinite()
    if not bool(xp.isfinite(a).all()):
        return Errors.infinite()
    difference = xp.abs(a - b)
    magnitude = xp.abs(b)
    denominator = float(xp.linalg.norm(b))
    rms = denominator / math.sqrt(b.size)
    norm = float(xp.linalg.norm(a - b)) / denominator if denominator > 0 else float(xp.linalg.norm(a - b))
    floor = rms if rms > 0 else 1.0
    relative = difference / (magnitude + floor)
    worst = int(relative.argmax())
    large = magnitude >= floor
    max_rel = float((difference[large] / magnitude[large]).max()) if bool(large.any()) else 0.0
    return Errors(norm, float(relative[worst]), float(difference.max()), max_rel, worst, True)


@dataclass(frozen=True)
class Verdict:
    errors: Errors
    tolerance: Tolerance

    @property
    def ok(self) -> bool:
        e, t = self.errors, self.tolerance
        return e.finite and e.norm <= t.norm and e.element <= t.element

    def reason(self) -> str:
        """Why it failed, in words (empty when it passed)."""
        e, t = self.errors, self.tolerance
        if not e.finite:
            return "output has NaN/inf (an element left unwritten, or a different shape)"
        parts = []
        if not e.norm <= t.norm:
            parts.append(f"relative error {e.norm:.3g} > tolerance {t.norm:.3g}")
        if not e.element <= t.element:
            parts.append(
                f"element error {e.element:.3g} > tolerance {t.element:.3g} at flat index {e.worst_index} "
                f"(max abs error {e.max_abs:.3g})"
            )
        return "; ".join(parts)


def verify(outputs: dict[str, Any], references: dict[str, Any], tolerance: Tolerance | float) -> Verdict:
    """Check every output against its reference.

    Args:
        outputs: the kernel's output buffers by name.
        references: the expected values by the same names.
        tolerance: the kernel's bounds; a bare float is a norm bound only (an implementation that
            has not declared its element bound yet) and leaves the element check off.
    """
    bound = tolerance if isinstance(tolerance, Tolerance) else Tolerance(norm=float(tolerance), element=math.inf)
    worst: Errors | None = None
    for name, out in outputs.items():
        found = errors(out, references[name])
        worst = found if worst is None else worst.merge(found)
    return Verdict(worst or Errors.infinite(), bound)


def relative_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| in float64; NaN/inf anywhere gives inf."""
    return errors(out, ref).norm


def as_float(array: Any) -> Any:
    """bf16 is stored as uint16 (CuPy has no bfloat16): widen it to float32 by a shift."""
    xp = _array_module(array)
    if array.dtype == xp.uint16:
        return (array.astype(xp.uint32) << 16).view(xp.float32)
    return array


def _array_module(array: Any) -> Any:
    """CuPy for a CuPy array (imported only then: the worker process never loads it), else NumPy."""
    if type(array).__module__.startswith("cupy"):
        import cupy

        return cupy
    import numpy

    return numpy
