"""Loading the deployment files, and pulling out the commands and environment names they use.

The deploy tests check these files without Docker or Kubernetes: everything here is plain YAML,
INI-style unit files and Dockerfile text.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE_FILES = [REPO / "docker-compose.yml", *sorted((DEPLOY / "compose").glob("*.yml"))]
DOCKERFILES = sorted((DEPLOY / "docker").glob("*.Dockerfile"))
SYSTEMD_UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
ENV_FILES = [DEPLOY / "systemd" / "kernelfarm.env.example"]
DOCS = REPO / "docs" / "DEPLOY.md"
OUR_IMAGES = ("kernelfarm/api", "kernelfarm/gpu-worker")


@dataclass(frozen=True)
class CommandUse:
    """One command line found in a deployment file: ``where`` names it in failure messages."""

    where: str
    argv: tuple[str, ...]


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def k8s_documents() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(K8S.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document:
                yield path, document


def k8s_objects() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object (the kustomization file is kustomize's input, not an object)."""
    return [(p, d) for p, d in k8s_documents() if d.get("kind") != "Kustomization"]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
        return obj["spec"]["template"]["spec"]
    return None


def containers(obj: dict[str, Any], include_init: bool = True) -> list[dict[str, Any]]:
    spec = pod_spec(obj)
    if spec is None:
        return []
    return [*(spec.get("initContainers", []) if include_init else []), *spec["containers"]]


def compose_services(path: Path) -> dict[str, dict[str, Any]]:
    return load_yaml(path)["services"]


def runs_our_image(service: dict[str, Any]) -> bool:
    return str(service.get("image", "")).startswith(OUR_IMAGES)


def as_argv(command: str | list[str]) -> tuple[str, ...]:
    return tuple(shlex.split(command)) if isinstance(command, str) else tuple(str(a) for a in command)


def systemd_unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Sections → (key, value) pairs in order; repeated keys (Environment=) are kept, unlike
    configparser, and continuation lines are joined."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, f"{path.name}: {line!r} outside any section"
        key, _, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return sections


def systemd_values(path: Path, section: str, key: str) -> list[str]:
    return [value for k, value in systemd_unit(path).get(section, []) if k == key]


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):  # comment inside a continued instruction
            continue
        line = pending + stripped
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        keyword, _, rest = line.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


def command_uses() -> list[CommandUse]:
    """Every command line any deployment file runs in a kernelfarm image or unit."""
    uses: list[CommandUse] = []
    for path in COMPOSE_FILES:
        for name, service in compose_services(path).items():
            if not runs_our_image(service):
                continue
            if "command" in service:
                uses.append(CommandUse(f"{path.name}:{name}", as_argv(service["command"])))
            test = service.get("healthcheck", {}).get("test")
            if isinstance(test, list) and test and test[0] == "CMD":
                uses.append(CommandUse(f"{path.name}:{name}:healthcheck", tuple(test[1:])))
    for path, obj in k8s_objects():
        for container in containers(obj):
            where = f"{path.name}:{obj['metadata']['name']}:{container['name']}"
            argv = (*container.get("command", ()), *container.get("args", ()))
            if argv:
                uses.append(CommandUse(where, tuple(argv)))
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                if "exec" in container.get(probe, {}):
                    uses.append(CommandUse(f"{where}:{probe}", tuple(container[probe]["exec"]["command"])))
    for path in SYSTEMD_UNITS:
        for value in systemd_values(path, "Service", "ExecStart"):
            # %i is the instance (a GPU index); any digit stands in for it.
            argv = tuple(shlex.split(value.lstrip("-@:+!").replace("%i", "1")))
            uses.append(CommandUse(f"{path.name}:ExecStart", (Path(argv[0]).name, *argv[1:])))
    for path in DOCKERFILES:
        for keyword, rest in dockerfile_instructions(path):
            if keyword == "CMD" and rest.startswith("["):
                uses.append(CommandUse(f"{path.name}:CMD", tuple(json.loads(rest))))
    return uses


def documented_commands() -> list[CommandUse]:
    """``kernelfarm ...`` lines inside the fenced code blocks of docs/DEPLOY.md."""
    if not DOCS.exists():
        return []
    uses: list[CommandUse] = []
    fenced = False
    for number, line in enumerate(DOCS.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            continue
        # A command name, then a subcommand word (so `useradd ... kernelfarm` is not a command),
        # and not the namespace of `kubectl -n kernelfarm ...`.
        pattern = r"(?:^|[\s;&|(`'\"/])(?<!-n )(kernelfarm(?:-healthcheck)? [a-z][^\n;&|)`'\"#\\]*)"
        code = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]  # shell comments are prose
        for match in re.finditer(pattern, code):
            argv = tuple(shlex.split(match.group(1)))
            if argv:
                uses.append(CommandUse(f"DEPLOY.md:{number}", argv))
    return uses


def load_script(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # Registered first: dataclasses look their module up while the class is being created.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@cache
def healthcheck_module() -> ModuleType:
    """deploy/healthcheck.py is a script (copied into the images), not a package module."""
    return load_script("kernelfarm_healthcheck", DEPLOY / "healthcheck.py")


@cache
def wheelhouse_module() -> ModuleType:
    return load_script("kernelfarm_wheelhouse", DEPLOY / "wheelhouse.py")


def environment_names() -> list[tuple[str, str]]:
    """(where, NAME) for every environment variable set for a kernelfarm process."""
    names: list[tuple[str, str]] = []
    for path in COMPOSE_FILES:
        for service_name, service in compose_services(path).items():
            if runs_our_image(service):
                env = service.get("environment", {})
                keys = env.keys() if isinstance(env, dict) else (item.split("=", 1)[0] for item in env)
                names += [(f"{path.name}:{service_name}", key) for key in keys]
    for path, obj in k8s_objects():
        if obj["kind"] == "ConfigMap":
            names += [(f"{path.name}:{obj['metadata']['name']}", key) for key in obj.get("data", {})]
        if obj["kind"] == "Secret":
            data = {**obj.get("data", {}), **obj.get("stringData", {})}
            names += [(f"{path.name}:{obj['metadata']['name']}", key) for key in data]
        for container in containers(obj):
            names += [(f"{path.name}:{container['name']}", item["name"]) for item in container.get("env", [])]
    for path in SYSTEMD_UNITS:
        for value in systemd_values(path, "Service", "Environment"):
            for assignment in shlex.split(value):
                names.append((path.name, assignment.split("=", 1)[0]))
    for path in ENV_FILES:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                names.append((path.name, line.split("=", 1)[0].strip()))
    for path in DOCKERFILES:
        for keyword, rest in dockerfile_instructions(path):
            if keyword == "ENV":
                names += [(path.name, token.split("=", 1)[0]) for token in shlex.split(rest)]
    return names
