"""The job page draws with two builds of plotly.js at once: the vendored cartesian partial bundle and the
`plotly` wheel's full bundle. They must be the same plotly.js version (api/ui/vendor/README.md)."""

from __future__ import annotations

import re
from importlib.resources import files

HEADER = re.compile(r"plotly\.js (?:\([a-z0-9]+ - minified\) )?v(\d+\.\d+\.\d+)")


def _version(path: object) -> str:
    head = path.read_text(encoding="utf-8")[:300]  # type: ignore[attr-defined]
    found = HEADER.search(head)
    assert found, f"no plotly.js version in the header of {path}"
    return found.group(1)


def test_the_cartesian_bundle_matches_the_wheels_plotly_js() -> None:
    cartesian = files("kernelfarm.api.ui") / "vendor" / "plotly-cartesian.min.js"
    full = files("plotly") / "package_data" / "plotly.min.js"
    assert "(cartesian - minified)" in cartesian.read_text(encoding="utf-8")[:200]
    assert _version(cartesian) == _version(full)


def test_the_cartesian_bundle_ships_with_its_licence() -> None:
    licence = (files("kernelfarm.api.ui") / "vendor" / "LICENSE.plotly.js").read_text(encoding="utf-8")
    assert licence.startswith("MIT License") and "Plotly" in licence
