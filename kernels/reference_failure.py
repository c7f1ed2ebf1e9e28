"""A kernel's own reference that cannot be built: every config of it fails the same way, before it runs.

The measuring child reports it as a COMPILE failure (worker/measuring/child.py), not a crash: the
reference is source the kernel's owner wrote (a manifest's naive CUDA kernel), and the owner fixes it
from the compiler's log. That log is stored with each trial and shown to every reader of the job, so
the host's folders in it (the child's temporary file, the bundle's folder, the include folders CuPy
adds) are replaced by names that read the same on every host.
"""

from __future__ import annotations

from collections.abc import Sequence

_INCLUDE_PREFIXES = ("--include-path=", "-I")


class ReferenceDoesNotCompile(Exception):
    """The reference's source does not compile; the message is the scrubbed compiler log."""


def scrubbed_compile_log(
    log: str, *, source_name: str, compiled_as: str | None, options: Sequence[str], bundle_dir: str | None
) -> str:
    """``log`` with the host's paths replaced.

    Args:
        log: the compiler's log.
        source_name: the reference's file name in the upload (stands for ``compiled_as``).
        compiled_as: the path the compiler was given for the source (CuPy writes it to a temporary
            folder), or None.
        options: the compiler's options: each include folder in them becomes ``<include-N>``.
        bundle_dir: the materialized bundle's folder, shown as ``<bundle>``.
    """
    names: dict[str, str] = {}
    if compiled_as:
        names[compiled_as] = source_name
    if bundle_dir:
        names[bundle_dir.rstrip("/")] = "<bundle>"
    folders = [o[len(p) :] for o in options for p in _INCLUDE_PREFIXES if o.startswith(p) and len(o) > len(p)]
    others = [f for f in dict.fromkeys(f.rstrip("/") for f in folders) if f not in names]
    names.update({folder: f"<include-{i}>" for i, folder in enumerate(others)})
    # Longest first: a path inside another (the temporary file in a folder also named) keeps its own name.
    for path in sorted(names, key=len, reverse=True):
        log = log.replace(path, names[path])
    return log
