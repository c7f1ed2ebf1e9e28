"""A CUDA kernel's source as NVRTC compiles it: the template's text and every header it includes.

Shared device code lives in ``.cuh`` headers under ``kernels/include/`` (``#include "kf/bf16.cuh"``).
The headers are read with the template and travel with it as text: the compile job hands them to
NVRTC by include name, and the kernel's source hash and the cubin cache key cover their contents,
so editing a header recompiles and re-identifies every kernel that includes it. A source given as
text rather than files (a kernel uploaded later, say) is the same value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: The shared headers' root: ``#include "kf/<name>.cuh"`` finds ``kernels/include/kf/<name>.cuh``.
INCLUDE_DIR = Path(__file__).with_name("include")

# Quoted includes only: <...> names NVRTC's built-in headers, which belong to the NVRTC version
# (recorded with every measurement), not to the kernel.
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


class MissingHeader(Exception):
    """A ``#include "..."`` names no file in the search path: a broken kernel, caught at load."""


@dataclass(frozen=True)
class CudaSource:
    """Attributes:
    name: the template's file name (for people reading logs; no part of what is compiled).
    text: the template.
    headers: ``(include name, text)`` of every header the template includes, directly or through
        another header, each once, sorted by name.
    path: the file the template was read from; None for a source given as text. Where the text
        came from is no part of the source's identity: two installs compare equal.
    """

    name: str
    text: str
    headers: tuple[tuple[str, str], ...] = ()
    path: Path | None = field(default=None, compare=False)

    @classmethod
    def from_file(cls, path: Path, include_dirs: Sequence[Path] = (INCLUDE_DIR,)) -> CudaSource:
        """Read a template and, transitively, the headers it includes.

        An include name is looked up in the template's own folder, then in ``include_dirs``, in
        that order, also from inside a header (names are relative to those roots, never to the
        including header: ``kf/rowwise.cuh`` includes ``"kf/bf16.cuh"``). Every quoted include
        counts, also one inside an ``#if`` branch that the defines switch off.

        Raises:
            MissingHeader: an include name found in no folder of the search path.
            OSError: the template cannot be read.
        """
        text = path.read_text()
        roots = (path.parent, *include_dirs)
        headers: dict[str, str] = {}
        pending = [(name, path.name) for name in included_names(text)]
        while pending:
            name, included_from = pending.pop()
            if name in headers:
                continue
            found = next((root / name for root in roots if (root / name).is_file()), None)
            if found is None:
                searched = ", ".join(str(root) for root in roots)
                raise MissingHeader(f'{included_from}: #include "{name}" is in none of {searched}')
            headers[name] = found.read_text()
            pending.extend((inner, name) for inner in included_names(headers[name]))
        return cls(path.name, text, tuple(sorted(headers.items())), path)

    def fingerprint(self) -> bytes:
        """The template and each header (name and text): what a cubin of this source depends on
        besides the compile options. A template without headers gives just its text, the value
        that source hashes were computed from before headers existed."""
        parts = [self.text.encode()]
        for name, text in self.headers:
            parts.extend((b"\0", name.encode(), b"\0", text.encode()))
        return b"".join(parts)


def included_names(text: str) -> list[str]:
    """The names of the quoted ``#include`` lines of a source, in order."""
    return _QUOTED_INCLUDE.findall(text)
