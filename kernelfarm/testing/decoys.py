"""Decoy packages, for a working directory that must not be imported from.

A component started with the caller's directory first on ``sys.path`` would import a project's own
``core/`` or ``kernels/`` instead of the installed package (issue 13: the API died at start-up in a
project folder that had a ``core/``). A farm whose components run in a directory of these decoys fails
loudly if any of them imports from its working directory.

The card's folder names catch a bare ``import core``; ``kernelfarm`` catches a process that put its
working directory first on ``sys.path`` (a ``python -m`` without ``-P``), as a clone of this repository
would shadow the installed package.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

DECOY_NAMES = ("kernelfarm", "core", "api", "kernels", "tuner", "worker", "migrations")


def write_decoy_packages(directory: Path, names: Iterable[str] = DECOY_NAMES) -> Path:
    """Create ``directory`` holding one package per name in ``names`` whose import raises ImportError.
    Returns ``directory``."""
    for name in names:
        package = directory / name
        package.mkdir(parents=True, exist_ok=True)
        message = f"decoy {name!r} imported from {directory}: a process put its working directory on sys.path"
        (package / "__init__.py").write_text(f"raise ImportError({message!r})\n")
    return directory
