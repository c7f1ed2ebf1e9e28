"""The kernels a backend may be asked to measure, found by name.

The worker process may hold kernel specs that are not in the registry (the tests' fault kernel);
the processes it spawns (the measuring child, the program ncu profiles) get only names, so such a
kernel also travels as a reference ``"module:ATTR"`` that they import.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from kernelfarm.kernels.spec import KernelSpec


class KernelCatalogue:
    """Specs by name: those handed over, then those named by reference, then the registry."""

    def __init__(self, specs: Mapping[str, KernelSpec] | None = None, refs: Mapping[str, str] | None = None) -> None:
        """
        Args:
            specs: kernels by name, in this process.
            refs: kernel name -> ``"module:ATTR"`` of its KernelSpec (``ATTR`` defaults to ``SPEC``),
                for kernels outside the registry in processes that get only names.
        """
        self._specs = dict(specs or {})
        self.refs = dict(refs or {})

    def spec(self, name: str, version: int | None = None, bundle: str | None = None) -> KernelSpec:
        """The kernel called ``name`` (an uploaded one at ``version``).

        Args:
            name: the kernel.
            version: an uploaded kernel's version (None: the latest; ignored for the catalogue's).
            bundle: where an uploaded kernel's bundle is materialized: a process without database
                access (the measuring child, the profiled program) builds the spec from it.

        Raises:
            NotFound: no such kernel.
            TypeError: its reference names something that is not a KernelSpec.
        """
        if bundle is not None:
            from pathlib import Path

            from kernelfarm.kernels.uploaded import spec_from_directory

            return spec_from_directory(Path(bundle), version or 1)
        if name in self._specs:
            return self._specs[name]
        if name in self.refs:
            module, _, attr = self.refs[name].partition(":")
            spec = getattr(importlib.import_module(module), attr or "SPEC")
            if not isinstance(spec, KernelSpec):
                raise TypeError(f"{self.refs[name]} is not a KernelSpec")
            return spec
        from kernelfarm.kernels.registry import get_kernel

        return get_kernel(name, version)

    def all(self) -> list[KernelSpec]:
        """Every kernel this catalogue can name: the registry's and the extra ones."""
        from kernelfarm.kernels.registry import all_kernels

        by_name = dict(all_kernels())
        by_name |= {name: self.spec(name) for name in self.refs}
        by_name |= self._specs
        return list(by_name.values())
