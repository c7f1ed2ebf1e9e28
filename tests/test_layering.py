"""api, tuner and worker talk through rows and task names, never by importing each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "api": {"tuner", "worker", "kernelfarm"},
    "tuner": {"api", "worker", "kernelfarm"},
    "worker": {"api", "tuner", "kernelfarm"},
    "core": {"api", "tuner", "worker", "kernelfarm"},
    "kernels": {"api", "tuner", "worker", "kernelfarm"},
}


PACKAGES = {"api", "core", "kernels", "tuner", "worker", "migrations"}


def component(module: str) -> str:
    """kernelfarm.core.db -> core; kernelfarm.cli (the CLI and the stack) -> kernelfarm."""
    parts = module.split(".")
    if parts[0] != "kernelfarm":
        return parts[0]
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "kernelfarm"


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {component(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(component(node.module))
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_forbidden_imports(package: str) -> None:
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_packages(path) & FORBIDDEN[package])
        for path in (REPO / package).rglob("*.py")
        if imported_packages(path) & FORBIDDEN[package]
    }
    assert not offenders, offenders
