"""Plugin kernels: installed Python packages that bring kernels through the ``kernelfarm.kernels``
entry-point group.

A plugin declares, in its package metadata::

    [project.entry-points."kernelfarm.kernels"]
    my_kernel = "my_package.kernels:SPEC"

The entry point names a :class:`KernelSpec`, a list of them, or a function returning either. Its
implementation may be for any backend ("cuda", "triton", ...): the spec says how it runs, the farm
only finds it. Each spec is marked as requiring its plugin at the installed version
(``plugin:<distribution>==<version>``), so only workers with that very version take its trials, and a
job on a farm where no live worker has it says so. Installed plugins are trusted as the package is:
an admin installed them on the host.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from importlib.metadata import EntryPoint, entry_points

from kernelfarm.core.capabilities import plugin_capability
from kernelfarm.kernels.spec import KernelSpec

logger = logging.getLogger(__name__)
GROUP = "kernelfarm.kernels"


class PluginError(Exception):
    """A plugin's entry point does not give kernel specs."""


def installed_plugins() -> dict[str, str]:
    """distribution name -> version of every installed distribution with a kernel entry point."""
    out: dict[str, str] = {}
    for point in entry_points(group=GROUP):
        if point.dist is not None:
            out[point.dist.name] = point.dist.version
    return out


def plugin_capabilities() -> list[str]:
    """What this host can run of the plugins: one capability per installed plugin."""
    return sorted(plugin_capability(name, version) for name, version in installed_plugins().items())


def plugin_specs() -> list[KernelSpec]:
    """Every plugin kernel, marked with the plugin it requires. A plugin that fails to load is
    logged and skipped: one broken package must not take the catalogue down."""
    specs: list[KernelSpec] = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        try:
            specs.extend(_load(point))
        except Exception:
            logger.exception("kernel plugin %s (%s) failed to load; skipped", point.name, point.value)
    return specs


def _load(point: EntryPoint) -> Iterable[KernelSpec]:
    loaded = point.load()
    if callable(loaded) and not isinstance(loaded, KernelSpec):
        loaded = loaded()
    items = [loaded] if isinstance(loaded, KernelSpec) else list(loaded)
    if not all(isinstance(item, KernelSpec) for item in items):
        raise PluginError(f"entry point {point.name} = {point.value} gives no KernelSpec")
    requires = frozenset({plugin_capability(point.dist.name, point.dist.version)}) if point.dist else frozenset()
    return [replace(item, requires=item.requires | requires) for item in items]
