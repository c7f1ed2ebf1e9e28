"""Which recorded landscapes are the same kernel on other GPUs: the families of the shared set.

A landscape's name is ``FAMILY_GPU`` (e.g. ``convolution_milo_W6600``); the family is the longest
known prefix, so ``convolution_milo_*`` is not taken for ``convolution_*``. Families are what
leave-one-family-out holds out and what cross-GPU warm start transfers within.
"""

from __future__ import annotations

from collections.abc import Iterable

FAMILIES = ("convolution_milo", "convolution", "dedispersion", "gemm", "pnpoly")


def family_of(name: str) -> str:
    """The family of landscape ``name`` (the name itself when it matches no known family)."""
    for family in sorted(FAMILIES, key=len, reverse=True):
        if name.startswith(family + "_"):
            return family
    return name


def by_family(names: Iterable[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in names:
        out.setdefault(family_of(name), []).append(name)
    return out
