"""A kernel plugin written on the fly, for tests: an installed distribution (a dist-info with an
``entry_points.txt``) on a folder the test puts on a component's PYTHONPATH, so a process sees the
plugin exactly as it would see a pip-installed one, and nothing is installed into the environment.

Its kernel is a replay kernel (a copy of a recorded Kernel Tuner landscape under another name), so
CPU-only replay workers can measure it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

PLUGIN_MODULE = """
from dataclasses import replace
from pathlib import Path

from kernelfarm.kernels.recorded import recorded_specs

SPEC = replace(recorded_specs(Path(__file__).parent / "recordings")[0], name={kernel!r},
               description="a plugin kernel (tests): a recorded landscape under another name")
"""


def write_plugin(site: Path, *, distribution: str, version: str, kernel: str, recording: Path) -> Path:
    """Write the plugin into ``site`` (a folder for PYTHONPATH); returns ``site``."""
    module = distribution.replace("-", "_")
    package = site / module
    (package / "recordings").mkdir(parents=True)
    shutil.copy(recording, package / "recordings" / recording.name)
    (package / "__init__.py").write_text(PLUGIN_MODULE.format(kernel=kernel))
    info = site / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[kernelfarm.kernels]\n{module} = {module}:SPEC\n")
    return site
