"""docker-compose.yml and deploy/compose/*.yml: structure, the compose-spec schema, and
`docker compose config` where a compose binary exists (the machine has no Docker engine; the
config command does not need one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.sources import COMPOSE_FILES, DOCKERFILES, REPO, as_argv, compose_services, load_yaml

MAIN = REPO / "docker-compose.yml"
# Override files only add to services of the main file (merged with -f docker-compose.yml -f ...).
OVERRIDES = [REPO / "deploy" / "compose" / "expose-backends.yml"]
STANDALONE = [path for path in COMPOSE_FILES if path not in OVERRIDES]
# What `docker compose config` needs to interpolate the files (real values come from .env).
COMPOSE_ENV = {
    "POSTGRES_PASSWORD": "pw",
    "REDIS_PASSWORD": "rp",
    "FLOWER_BASIC_AUTH": "admin:pw",
    "KF_BIND_ADDRESS": "127.0.0.1",
    "DATABASE_URL": "postgresql+psycopg2://kernelfarm:pw@control:5432/kernelfarm",
    "REDIS_URL": "redis://:rp@control:6379/0",
}


def kernelfarm_argv(service: dict[str, Any]) -> tuple[str, ...]:
    return as_argv(service.get("command", ()))


def is_gpu_worker(service: dict[str, Any]) -> bool:
    argv = kernelfarm_argv(service)
    return argv[:2] == ("kernelfarm", "worker") and "cuda" in argv


@pytest.mark.parametrize("path", STANDALONE, ids=lambda p: p.name)
def test_every_service_has_a_healthcheck(path: Path) -> None:
    for name, service in compose_services(path).items():
        check = service.get("healthcheck")
        assert check and check.get("test") and not check.get("disable"), f"{path.name}: {name} has no healthcheck"


@pytest.mark.parametrize("path", OVERRIDES, ids=lambda p: p.name)
def test_overrides_only_touch_services_of_the_main_file(path: Path) -> None:
    assert set(compose_services(path)) <= set(compose_services(MAIN))


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.name)
def test_each_gpu_worker_reserves_exactly_one_distinct_gpu(path: Path) -> None:
    seen: dict[str, str] = {}
    workers = {n: s for n, s in compose_services(path).items() if is_gpu_worker(s)}
    if path == MAIN:
        assert workers, "the main compose file runs no GPU worker"
    for name, service in workers.items():
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert len(devices) == 1, name
        device = devices[0]
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"], name
        # One process per GPU: one device per container, never two containers on one device.
        assert len(device["device_ids"]) == 1, f"{name} reserves {device['device_ids']}"
        gpu = str(device["device_ids"][0])
        assert gpu not in seen, f"{name} and {seen.get(gpu)} share GPU {gpu}"
        seen[gpu] = name
        argv = kernelfarm_argv(service)
        # The container sees only its reserved GPU, as device 0.
        assert argv[argv.index("--gpu") + 1] == "0", name


def test_migration_runs_before_everything_that_uses_the_schema() -> None:
    services = compose_services(MAIN)
    migrate = services["migrate"]
    assert kernelfarm_argv(migrate) == ("kernelfarm", "db", "upgrade")
    assert migrate.get("restart") == "no", "a one-shot migration must not be restarted"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    users = [n for n, s in services.items() if n != "migrate" and kernelfarm_argv(s)[:1] == ("kernelfarm",)]
    assert {"api", "tuner", "worker-gpu0"} <= set(users)
    for name in users:
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_roles_and_health_signals() -> None:
    services = compose_services(MAIN)
    assert kernelfarm_argv(services["api"])[:2] == ("kernelfarm", "serve-api")
    assert services["api"]["healthcheck"]["test"][-1].endswith(":8765/ready")
    assert kernelfarm_argv(services["tuner"])[:2] == ("kernelfarm", "coordinator")
    assert services["tuner"]["healthcheck"]["test"][1:3] == ["kernelfarm-healthcheck", "celery"]
    # No separate beat: the coordinator runs its own housekeeping schedule.
    assert not any("beat" in kernelfarm_argv(s) for s in services.values())
    assert services["flower"].get("profiles") == ["flower"], "flower is optional"
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")


def test_images_are_built_from_the_dockerfiles_in_deploy() -> None:
    dockerfiles = {p.relative_to(REPO).as_posix() for p in DOCKERFILES}
    built = set()
    for path in COMPOSE_FILES:
        for service in compose_services(path).values():
            if "build" in service:
                assert service["build"]["context"] == "."
                assert service["build"]["dockerfile"] in dockerfiles
                built.add(service["build"]["dockerfile"])
    assert built == dockerfiles


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.name)
def test_compose_spec_schema(path: Path) -> None:
    """The compose-spec JSON schema (vendored by check-jsonschema) catches misspelt keys and
    wrong shapes, which is what `docker compose config` would reject first."""
    pytest.importorskip("check_jsonschema", reason="check-jsonschema (dev extra) not installed")
    from importlib.resources import files

    import jsonschema

    schema = json.loads(files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(load_yaml(path)), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def compose_command() -> list[str] | None:
    """`docker compose` (the CLI plugin) or a standalone `docker-compose` v2, if either exists."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    beside = Path(sys.executable).with_name("docker-compose")
    standalone = shutil.which("docker-compose") or (str(beside) if beside.exists() else None)
    if standalone:
        version = subprocess.run([standalone, "version", "--short"], capture_output=True, text=True)
        if version.returncode == 0 and not version.stdout.startswith("1."):
            return [standalone]
    return None


@pytest.mark.parametrize(
    "files",
    [["docker-compose.yml"], ["docker-compose.yml", "deploy/compose/expose-backends.yml"],
     ["deploy/compose/gpu-worker-host.yml"]],
    ids=["main", "main+expose-backends", "gpu-worker-host"],
)  # fmt: skip
def test_docker_compose_config(files: list[str]) -> None:
    command = compose_command()
    if command is None:
        pytest.skip("no docker compose plugin or docker-compose v2 binary here")
    env = {**os.environ, **COMPOSE_ENV}
    # --env-file: a developer's own .env must not change what is checked.
    args = [*command, "--project-directory", str(REPO), "--env-file", os.devnull]
    for name in files:
        args += ["-f", str(REPO / name)]
    result = subprocess.run([*args, "--profile", "*", "config", "--format", "json"],
                            capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    resolved = json.loads(result.stdout)
    for name, service in resolved["services"].items():
        assert service.get("healthcheck"), name
    # Without the passwords the stack refuses to start rather than run with a default one.
    if files == ["docker-compose.yml"]:
        bare = {k: v for k, v in os.environ.items() if k not in COMPOSE_ENV}
        refused = subprocess.run([*args, "config", "-q"], capture_output=True, text=True, env=bare, timeout=60)
        assert refused.returncode != 0 and "POSTGRES_PASSWORD" in refused.stderr
