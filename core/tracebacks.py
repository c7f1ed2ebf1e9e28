"""Tracebacks that read the same on every host: a failure's traceback is stored with its trial and shown to
every reader of the job, so it names each file by its module path (``kernelfarm/kernels/manifest/cuda.py``,
``cupy/_core/core.pyx``), not by the folder this host installed it in."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path


def portable_traceback(exc: BaseException, frames: int, roots: Sequence[str] | None = None) -> str:
    """``exc``'s traceback (and its chained causes') as :func:`traceback.format_exception` writes it, each
    frame's file relative to the longest of ``roots`` (default: ``sys.path``) that holds it; a file under
    none of them (an uploaded module materialized in a cache folder) is named by its file name alone.

    Only the innermost ``frames`` frames of each: where it was raised (an uploaded reference's own line)
    says more than the child's request loop it was called from."""
    # The folder holding the kernelfarm package is a root too: an editable install imports it through a
    # finder, not sys.path, and its files would be named by their file names alone. The file system's root
    # holds every file and would name none: never a root here.
    if roots is None:
        roots = [*sys.path, str(Path(__file__).parents[2])]  # this file is kernelfarm/core/tracebacks.py
    found = {os.path.abspath(r) for r in roots if r}
    folders = sorted((f for f in found if f != os.path.abspath(os.sep)), key=len, reverse=True)
    report = traceback.TracebackException.from_exception(exc, limit=-frames)
    seen: set[int] = set()
    pending = [report]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for frame in current.stack:
            frame.filename = _portable(frame.filename, folders)
        pending += [c for c in (current.__cause__, current.__context__) if c is not None]
    return "".join(report.format())


def _portable(filename: str, folders: Sequence[str]) -> str:
    if not os.path.isabs(filename):
        return filename  # already portable: "<string>", an uploaded file compiled under its own name
    for folder in folders:
        if filename.startswith(folder.rstrip(os.sep) + os.sep):
            return os.path.relpath(filename, folder)
    return os.path.basename(filename)
