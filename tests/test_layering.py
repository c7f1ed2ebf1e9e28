"""The layering rules of docs/ARCHITECTURE.md, checked on the source so that breaking one fails the suite.

1. core imports nothing of kernels, api, tuner, worker or the CLI layer: it is what everything stands on.
2. kernels imports only core: a kernel is data plus small functions, usable without a farm around it.
3. api, tuner and worker import core and kernels, never each other nor the CLI layer: they talk through
   rows and task names, so each can be deployed, restarted and scaled alone.
4. Configuration is read only through ``kernelfarm.core.settings.Settings`` (one typed place that fails
   fast), never from ``os.environ`` / ``os.getenv`` elsewhere in the runtime packages.

The CLI layer (kernelfarm/*.py, kernelfarm/commands/) is the composition root: it may import anything.
Every rule is checked by parsing files, not by importing them, and sees every import form: ``import
kernelfarm.x``, ``from kernelfarm import x``, relative imports, imports inside functions or under
``TYPE_CHECKING`` (a type-only dependency is still a dependency) and ``importlib.import_module`` of a
literal name. The self-tests at the bottom prove that each rule can fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "kernelfarm"
# The card's folders: each lives at the repository root and is installed as kernelfarm.<folder>.
CARD_FOLDERS = ("api", "core", "kernels", "tuner", "worker", "migrations")
CLI = "cli"  # every other kernelfarm.<name>: the command line, the stack, the launcher
# The repository's own folders that are not installed: the runtime never imports them.
NOT_INSTALLED = ("tests", "benchmarks")

# What each runtime layer may import of the package (itself included); everything else is forbidden.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "kernels": frozenset({"core", "kernels"}),
    "api": frozenset({"core", "kernels", "api"}),
    "tuner": frozenset({"core", "kernels", "tuner"}),
    "worker": frozenset({"core", "kernels", "worker"}),
    "migrations": frozenset({"core", "migrations"}),
}

SETTINGS_MODULE = "kernelfarm.core.settings"
# Modules whose only use is declaring settings; only the Settings module may import them.
SETTINGS_LIBRARIES = frozenset({"pydantic_settings", "dotenv"})
# Variables that are not kernelfarm's configuration, with the reason a runtime module may read them.
THIRD_PARTY_VARIABLES: dict[str, str] = {
    "CUDA_VISIBLE_DEVICES": (
        "set by whoever starts the worker and obeyed by the CUDA runtime itself; NVML numbers devices "
        "differently, so the worker must read the very value the runtime reads, not a copy in Settings"
    ),
}
# Ways to use os.environ that read no variable: copying it whole (a child's environment) or writing it.
ENVIRON_METHODS_THAT_WRITE_OR_COPY = frozenset({"copy", "update", "__setitem__", "__delitem__"})
ENVIRON_READ_METHODS = frozenset({"get", "setdefault", "pop", "__getitem__", "__contains__"})
GETENV_NAMES = frozenset({"getenv", "getenvb"})
ENVIRON_NAMES = frozenset({"environ", "environb"})


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


# --- which layer a module belongs to -------------------------------------------------------------------


def module_name(path: Path) -> str:
    """The import name of a source file: core/store/best.py -> kernelfarm.core.store.best."""
    relative = path.relative_to(REPO).with_suffix("")
    parts = list(relative.parts)
    if parts[0] != PACKAGE:  # a card folder, installed under the package
        parts.insert(0, PACKAGE)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    """kernelfarm.core.db -> core; kernelfarm.stack -> cli; a third-party module or the bare package -> None."""
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) == 1:
        return None
    if parts[1] in CARD_FOLDERS:
        return parts[1]
    if parts[1].startswith("__") and parts[1] != "__main__":
        return None  # an attribute of the package itself, such as __version__
    return CLI


# --- what a module imports ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    target: str  # absolute dotted name, as precise as the statement says
    line: int


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in ``module``."""
    anchor = module.split(".") if is_package else module.split(".")[:-1]
    base = anchor[: len(anchor) - (level - 1)] if level > 1 else anchor
    return ".".join([*base, name] if name else base)


def literal_prefix(node: ast.expr) -> str | None:
    """The text a string expression surely starts with: all of a literal, the head of an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value.rstrip(".")
    return None


def imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[Import]:
    """Every import in the tree, wherever it is (module level, functions, TYPE_CHECKING blocks)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = resolve_relative(module, is_package, node.level, node.module) if node.level else node.module or ""
            for alias in node.names:
                # `from kernelfarm import api` imports kernelfarm.api: keep the name to see the layer.
                yield Import(base if alias.name == "*" else f"{base}.{alias.name}", node.lineno)
        elif isinstance(node, ast.Call) and node.args and _is_dynamic_import(node.func):
            prefix = literal_prefix(node.args[0])
            if prefix:
                yield Import(prefix, node.lineno)


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in {"import_module", "__import__"}


def import_violations(source: str, module: str, is_package: bool = False, path: str = "") -> list[Violation]:
    layer = layer_of(module)
    assert layer in MAY_IMPORT, f"{module} is not in a runtime layer"
    where = path or module
    found = []
    for imported in imports(ast.parse(source), module, is_package):
        top = imported.target.split(".")[0]
        target_layer = layer_of(imported.target)
        if top in CARD_FOLDERS:
            found.append(
                Violation(where, imported.line, f"imports the bare name {imported.target!r}: use {PACKAGE}.{top}")
            )
        elif top in NOT_INSTALLED:
            found.append(Violation(where, imported.line, f"imports {imported.target!r}, which is not installed"))
        elif top in SETTINGS_LIBRARIES and module != SETTINGS_MODULE:
            found.append(
                Violation(where, imported.line, f"imports {top}: settings are declared only in {SETTINGS_MODULE}")
            )
        elif target_layer is not None and target_layer not in MAY_IMPORT[layer]:
            found.append(Violation(where, imported.line, f"{layer} imports {imported.target} (layer {target_layer})"))
    return found


# --- environment reads --------------------------------------------------------------------------------


def environment_violations(source: str, path: str = "<snippet>") -> list[Violation]:
    """Reads of the process environment outside Settings.

    os.environ may be copied whole (``dict(os.environ)``, ``os.environ.copy()``, ``{**os.environ}``,
    ``env=os.environ``) and written; any other use of it, and every os.getenv, is a read. A read is allowed
    only for a literal name in :data:`THIRD_PARTY_VARIABLES`.
    """
    tree = ast.parse(source)
    os_names, environ_names, getenv_names = _os_bindings(tree)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}

    def is_environ(node: ast.AST) -> TypeGuard[ast.Attribute | ast.Name]:
        if isinstance(node, ast.Attribute):
            return node.attr in ENVIRON_NAMES and isinstance(node.value, ast.Name) and node.value.id in os_names
        return isinstance(node, ast.Name) and node.id in environ_names

    def is_getenv(node: ast.AST) -> TypeGuard[ast.Attribute | ast.Name]:
        if isinstance(node, ast.Attribute):
            return node.attr in GETENV_NAMES and isinstance(node.value, ast.Name) and node.value.id in os_names
        return isinstance(node, ast.Name) and node.id in getenv_names

    found = []
    for node in ast.walk(tree):
        if is_getenv(node):
            call = parents.get(node)
            name = call.args[0] if isinstance(call, ast.Call) and call.func is node and call.args else None
            problem = _unlisted_read(name)
        elif is_environ(node):
            problem = _environ_use(node, parents)
        else:
            continue
        if problem:
            found.append(Violation(path, node.lineno, problem))
    return found


def _os_bindings(tree: ast.Module) -> tuple[set[str], set[str], set[str]]:
    """Local names bound to the os module, to os.environ and to os.getenv (``import os as o`` and friends)."""
    os_names: set[str] = set()
    environ_names: set[str] = set()
    getenv_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_names |= {alias.asname or alias.name for alias in node.names if alias.name == "os"}
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and not node.level:
            for alias in node.names:
                if alias.name in ENVIRON_NAMES:
                    environ_names.add(alias.asname or alias.name)
                elif alias.name in GETENV_NAMES:
                    getenv_names.add(alias.asname or alias.name)
    return os_names, environ_names, getenv_names


def _environ_use(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """Why this use of os.environ reads configuration, or None when it only copies or writes it."""
    parent = parents.get(node)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "dict":
        return None  # dict(os.environ, EXTRA="1"): a copy
    if isinstance(parent, ast.Dict) and any(
        key is None and value is node for key, value in zip(parent.keys, parent.values, strict=True)
    ):
        return None  # {**os.environ, ...}: a copy
    if isinstance(parent, ast.keyword) and parent.arg == "env":
        return None  # handed whole to a child process
    if isinstance(parent, ast.Subscript) and parent.value is node:
        if isinstance(parent.ctx, ast.Store | ast.Del):
            return None
        return _unlisted_read(parent.slice)
    if isinstance(parent, ast.Compare) and node in parent.comparators:
        return _unlisted_read(parent.left)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        if parent.attr in ENVIRON_METHODS_THAT_WRITE_OR_COPY:
            return None
        call = parents.get(parent)
        if parent.attr in ENVIRON_READ_METHODS and isinstance(call, ast.Call) and call.args:
            return _unlisted_read(call.args[0])
        return f"os.environ.{parent.attr} reads the environment: declare the setting in {SETTINGS_MODULE}"
    return f"os.environ used as a mapping outside Settings: read it through {SETTINGS_MODULE}, or copy it whole"


def _unlisted_read(name: ast.AST | None) -> str | None:
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        if name.value in THIRD_PARTY_VARIABLES:
            return None
        return f"reads {name.value} from the environment: declare it in {SETTINGS_MODULE}"
    return f"reads an environment variable named at run time: declare it in {SETTINGS_MODULE}"


# --- the real tree ------------------------------------------------------------------------------------


def runtime_files(layer: str) -> list[Path]:
    return sorted((REPO / layer).rglob("*.py"))


def tree_import_violations(layer: str) -> list[Violation]:
    found = []
    for path in runtime_files(layer):
        found += import_violations(
            path.read_text(), module_name(path), path.name == "__init__.py", str(path.relative_to(REPO))
        )
    return found


def tree_environment_violations() -> list[Violation]:
    found = []
    for layer in MAY_IMPORT:
        for path in runtime_files(layer):
            if module_name(path) != SETTINGS_MODULE:
                found += environment_violations(path.read_text(), str(path.relative_to(REPO)))
    return found


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    assert runtime_files(layer), f"no source found for {layer}: the check would pass vacuously"
    violations = tree_import_violations(layer)
    assert not violations, "\n".join(map(str, violations))


def test_configuration_is_read_only_through_settings() -> None:
    violations = tree_environment_violations()
    assert not violations, "\n".join(map(str, violations))


# --- self-tests: each rule flags a synthetic breach, and copies/allowed reads stay unflagged ---------------

BREACHES = {
    "core imports kernels": ("kernelfarm.core.store.kernels", "from kernelfarm.kernels.spec import KernelSpec"),
    "core imports the CLI layer": ("kernelfarm.core.db", "from kernelfarm.stack import StackState"),
    "core imports commands": ("kernelfarm.core.db", "import kernelfarm.commands.serve"),
    "import kernelfarm.x form": ("kernelfarm.core.db", "import kernelfarm.api.deps"),
    "from kernelfarm import x form": ("kernelfarm.core.db", "from kernelfarm import worker"),
    "relative import": ("kernelfarm.core.db", "from ..api import deps"),
    "relative import of a sibling layer": ("kernelfarm.core.store.best", "from ...tuner.tasks import advance"),
    "import inside a function": ("kernelfarm.core.db", "def f():\n    from kernelfarm.tuner import tasks\n"),
    "type-only import": (
        "kernelfarm.core.store.best",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kernelfarm.kernels.spec import KernelSpec\n",
    ),
    "dynamic import": ("kernelfarm.core.db", "import importlib\nimportlib.import_module('kernelfarm.api.app')"),
    "dynamic import, f-string": (
        "kernelfarm.core.db",
        "import importlib\nimportlib.import_module(f'kernelfarm.worker.{x}')",
    ),
    "kernels imports api": ("kernelfarm.kernels.registry", "from kernelfarm.api.errors import x"),
    "kernels imports tuner": ("kernelfarm.kernels.registry", "from kernelfarm import tuner"),
    "api imports tuner": ("kernelfarm.api.jobs_service", "from kernelfarm.tuner.tasks import advance"),
    "api imports worker": ("kernelfarm.api.app", "import kernelfarm.worker.tasks"),
    "api imports the CLI layer": ("kernelfarm.api.app", "from kernelfarm.context import cli_context"),
    "tuner imports worker": ("kernelfarm.tuner.coordinator", "from kernelfarm.worker import runner"),
    "tuner imports api": ("kernelfarm.tuner.tasks", "from ..api import deps"),
    "worker imports api": ("kernelfarm.worker.runner", "def f():\n    import kernelfarm.api.deps\n"),
    "worker imports tuner": ("kernelfarm.worker.tasks", "from kernelfarm.tuner.tasks import advance"),
    "worker imports the CLI layer": ("kernelfarm.worker.tasks", "from kernelfarm import services"),
    "bare card folder": ("kernelfarm.worker.tasks", "from core.settings import get_settings"),
    "the test suite": ("kernelfarm.worker.backends.fake", "from tests.kernels import fake_child"),
    "the benchmarks": ("kernelfarm.core.db", "def f():\n    import benchmarks.reliability.chaos\n"),
    "a second settings class": ("kernelfarm.worker.tasks", "from pydantic_settings import BaseSettings"),
}


@pytest.mark.parametrize("case", sorted(BREACHES))
def test_checker_flags_each_forbidden_import(case: str) -> None:
    module, source = BREACHES[case]
    assert import_violations(source, module), f"{case}: not flagged"


ALLOWED_IMPORTS = {
    "core imports core, relatively": ("kernelfarm.core.store.best", "from ..models import Job\nfrom . import workers"),
    "kernels imports core": ("kernelfarm.kernels.spec", "from kernelfarm.core.space import SearchSpace"),
    "worker imports kernels": ("kernelfarm.worker.runner", "from kernelfarm.kernels.registry import get_kernel"),
    "the package attribute": ("kernelfarm.api.app", "from kernelfarm import __version__"),
    "the settings module": (SETTINGS_MODULE, "from pydantic_settings import BaseSettings"),
    "third-party": ("kernelfarm.core.db", "import sqlalchemy\nfrom celery import Celery"),
}


@pytest.mark.parametrize("case", sorted(ALLOWED_IMPORTS))
def test_checker_allows_permitted_imports(case: str) -> None:
    module, source = ALLOWED_IMPORTS[case]
    assert import_violations(source, module) == []


def test_relative_imports_resolve_against_the_package() -> None:
    assert resolve_relative("kernelfarm.core.db", False, 2, "api") == "kernelfarm.api"
    assert resolve_relative("kernelfarm.core.store", True, 1, "best") == "kernelfarm.core.store.best"
    assert resolve_relative("kernelfarm.core.store.best", False, 1, None) == "kernelfarm.core.store"


ENVIRONMENT_READS = {
    "os.environ.get": "import os\nlevel = os.environ.get('KERNELFARM_CHILD_LOG', 'WARNING')",
    "os.environ[...]": "import os\ncache = os.environ['KERNELFARM_CUDA_CACHE']",
    "os.getenv": "import os\nurl = os.getenv('DATABASE_URL')",
    "in os.environ": "import os\nif 'KERNELFARM_DEBUG' in os.environ:\n    pass",
    "from os import environ": "from os import environ\nx = environ.get('KERNELFARM_X')",
    "from os import getenv": "from os import getenv as g\nx = g('KERNELFARM_X')",
    "import os as alias": "import os as o\nx = o.environ.setdefault('KERNELFARM_X', '1')",
    "inside a function": "import os\ndef f():\n    return os.environ.get('KERNELFARM_X')",
    "a name chosen at run time": "import os\ndef f(name):\n    return os.environ.get(name)",
    "an alias of environ": "import os\nenv = os.environ\nx = env.get('KERNELFARM_X')",
    "iterating it": "import os\nfound = [k for k in os.environ.keys() if k.startswith('KERNELFARM_')]",
}


@pytest.mark.parametrize("case", sorted(ENVIRONMENT_READS))
def test_checker_flags_each_environment_read(case: str) -> None:
    assert environment_violations(ENVIRONMENT_READS[case]), f"{case}: not flagged"


ENVIRONMENT_COPIES = {
    "dict(os.environ)": "import os\nenv = dict(os.environ)",
    "os.environ.copy()": "import os\nenv = os.environ.copy()",
    "{**os.environ}": "import os\nenv = {**os.environ, 'OMP_NUM_THREADS': '1'}",
    "env=os.environ": "import os, subprocess\nsubprocess.run(['true'], env=os.environ)",
    "a write": "import os\nos.environ['OMP_NUM_THREADS'] = '1'\nos.environ.update({'A': 'b'})",
    "an allowed third-party variable": "import os\nvisible = os.environ.get('CUDA_VISIBLE_DEVICES', '')",
    "a local named environ": "def environ():\n    return {}\nx = environ().get('KERNELFARM_X')",
}


@pytest.mark.parametrize("case", sorted(ENVIRONMENT_COPIES))
def test_checker_allows_copies_writes_and_listed_variables(case: str) -> None:
    assert environment_violations(ENVIRONMENT_COPIES[case]) == []


def test_module_names_follow_the_installed_package() -> None:
    assert module_name(REPO / "core" / "store" / "best.py") == "kernelfarm.core.store.best"
    assert module_name(REPO / "core" / "store" / "__init__.py") == "kernelfarm.core.store"
    assert layer_of(module_name(REPO / "kernelfarm" / "stack.py")) == CLI
