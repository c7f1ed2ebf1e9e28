"""deploy/wheelhouse.py: target tags, exclusions, and a complete offline build-and-install of a
small project whose dependencies are local wheels (no index is contacted)."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.deploy.sources import DOCS, REPO, wheelhouse_module

wh = wheelhouse_module()


def test_manylinux_tags_cover_every_older_glibc_and_the_legacy_aliases() -> None:
    tags = wh.manylinux_platforms("2.28")
    assert tags[0] == "manylinux_2_28_x86_64"
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags
    assert wh.expand_platforms(["manylinux_2_17_aarch64", "win_amd64"])[:2] == (
        "manylinux_2_17_aarch64",
        "manylinux_2_16_aarch64",
    )
    assert wh.expand_platforms(["linux_x86_64"]) == ("linux_x86_64",)
    with pytest.raises(argparse.ArgumentTypeError):
        wh.manylinux_platforms("3.1")


@pytest.mark.parametrize("text", ["3.12", "312", "cp312", "CP3.12"])
def test_python_version_spellings(text: str) -> None:
    assert wh.parse_python_version(text) == "3.12"


def test_exclusions_accept_names_and_a_pip_freeze(tmp_path: Path) -> None:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("# from the node\nNumPy==2.1.0\nscikit_learn==1.9.1\n-e git+https://example.invalid/x#egg=x\n")
    exclusions = wh.Exclusions.read(["cupy-cuda13x"], [freeze])
    assert "numpy" in exclusions and "scikit-learn" in exclusions and "cupy-cuda13x" in exclusions
    assert "pip" in exclusions  # the installer is never carried
    # Pinned versions constrain the resolution, so carried wheels fit what the node has.
    assert exclusions.constraints() == ["numpy==2.1.0", "scikit-learn==1.9.1"]
    assert exclusions.expected_on_target() == ["cupy-cuda13x", "numpy==2.1.0", "scikit-learn==1.9.1"]


def test_reads_kernelfarm_dependencies_and_extras_from_pyproject() -> None:
    project = wh.read_project(REPO)
    assert project.name == "kernelfarm"
    names = {wh.requirement_name(r) for r in project.requirements(["gpu"])}
    assert {"celery", "sqlalchemy", "alembic", "cupy-cuda13x"} <= names
    assert "cupy-cuda13x" not in {wh.requirement_name(r) for r in project.requirements([])}
    with pytest.raises(SystemExit):
        project.requirements(["no-such-extra"])


def test_the_gpu_node_exclusion_list_names_real_dependencies() -> None:
    project = wh.read_project(REPO)
    direct = {wh.requirement_name(r) for r in project.requirements(["gpu"])}
    listed = wh.Exclusions.read([], [REPO / "deploy" / "gpu-node-preinstalled.txt"])
    assert set(listed.versions) - {"pip"} <= direct


# --- an offline end-to-end run -------------------------------------------------------------


def write_wheel(
    directory: Path, name: str, version: str, requires: tuple[str, ...] = (), extras: tuple[str, ...] = ()
) -> Path:
    """A minimal valid pure-Python wheel (one module), written by hand."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    metadata = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
    metadata += [f"Provides-Extra: {e}\n" for e in extras]
    metadata += [f"Requires-Dist: {r}\n" for r in requires]
    files = {
        f"{module}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist_info}/METADATA": "".join(metadata),
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    wheel = directory / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


# An in-tree PEP 517 backend that needs nothing from an index (setuptools would).
BACKEND = """
import sys, zipfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheelwriter import write_wheel

def get_requires_for_build_wheel(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    requires = ("kfdep-a>=1", "kfdep-heavy", 'kfdep-gpu; extra == "gpu"')
    return write_wheel(Path(wheel_directory), "kfdemo", "1.2.3", requires, ("gpu",)).name
"""


def make_project(root: Path) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "kfdemo"\nversion = "1.2.3"\ndependencies = ["kfdep-a>=1", "kfdep-heavy"]\n\n'
        '[project.optional-dependencies]\ngpu = ["kfdep-gpu"]\n'
    )
    (root / "backend.py").write_text(BACKEND)
    source = Path(__file__).read_text()
    start = source.index("def write_wheel")
    (root / "wheelwriter.py").write_text(
        "import base64, hashlib, zipfile\nfrom pathlib import Path\n\n\n"
        + source[start : source.index("# An in-tree PEP 517")]
    )
    return root


@pytest.fixture
def isolated_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pip configuration from this machine: no index, no extra find-links, no constraints."""
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")


@pytest.mark.usefixtures("isolated_pip")
def test_offline_build_and_install(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    write_wheel(index, "kfdep-a", "1.0", ("kfdep-b>=1",))
    write_wheel(index, "kfdep-b", "1.0")
    write_wheel(index, "kfdep-b", "2.0")
    write_wheel(index, "kfdep-heavy", "1.0")
    write_wheel(index, "kfdep-gpu", "1.0")
    project = make_project(tmp_path / "kfdemo")
    dest = tmp_path / "house"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"

    code = wh.main([
        "--project", str(project), "--dest", str(dest), "--python-version", version, "--extra", "gpu",
        # The target has kfdep-heavy, and kfdep-b at 1.0: neither is carried, and b pins the resolution.
        "--exclude", "kfdep-heavy", "--exclude", "kfdep-b==1.0",
        "--pip-option=--no-index", f"--pip-option=--find-links={index}",
    ])  # fmt: skip
    assert code == 0

    wheels = sorted(p.name for p in dest.glob("*.whl"))
    assert wheels == ["kfdemo-1.2.3-py3-none-any.whl", "kfdep_a-1.0-py3-none-any.whl", "kfdep_gpu-1.0-py3-none-any.whl"]
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["excluded"] == ["kfdep-b==1.0", "kfdep-heavy"]
    assert manifest["python"] == "cp" + version.replace(".", "")
    assert manifest["platforms"][0] == "manylinux_2_28_x86_64"
    assert "--hash=sha256:" in (dest / "requirements.lock").read_text()
    assert len((dest / "SHA256SUMS").read_text().splitlines()) == len(wheels)
    script = (dest / "install.sh").read_text()
    assert "--no-index --find-links" in script and "'kfdemo[gpu]==1.2.3'" in script

    # What the target already has, standing in for its site-packages.
    target_has = tmp_path / "target-has"
    target_has.mkdir()
    for name in ("kfdep_heavy-1.0", "kfdep_b-1.0"):
        (target_has / f"{name}-py3-none-any.whl").write_bytes((index / f"{name}-py3-none-any.whl").read_bytes())
    site = tmp_path / "site"
    env = {**os.environ, "PYTHON": sys.executable}
    install = subprocess.run(["sh", str(dest / "install.sh"), "--quiet", "--target", str(site),
                              "--find-links", str(target_has)],
                             capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    assert {"kfdemo", "kfdep_a", "kfdep_b", "kfdep_gpu", "kfdep_heavy"} <= {p.name for p in site.iterdir()}
    assert (site / "kfdep_b" / "__init__.py").read_text() == "VERSION = '1.0'\n"

    # A tampered wheel is refused before pip runs.
    (dest / "kfdep_a-1.0-py3-none-any.whl").write_bytes(b"tampered")
    tampered = subprocess.run(["sh", str(dest / "install.sh"), "--target", str(tmp_path / "site2")],
                              capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert tampered.returncode != 0


def test_the_copied_project_keeps_the_package_links(tmp_path: Path) -> None:
    # git lists kernelfarm/core as a link; a copy without it builds a wheel of the CLI alone.
    tree = wh.copy_tree(REPO, tmp_path / "src")
    for name in ("api", "core", "kernels", "tuner", "worker", "migrations"):
        assert (tree / "kernelfarm" / name).is_symlink(), name
    assert (tree / "kernelfarm" / "core" / "settings.py").read_text() == (REPO / "core" / "settings.py").read_text()


def test_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(SystemExit):
        wh.build(wh.parser().parse_args(["--dest", str(tmp_path)]))


class RecordingPip:
    """Stands in for pip's process: records each command line, writes an empty resolver report."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, args: list[str]) -> None:
        self.calls.append(args)
        report = Path(args[args.index("--report") + 1])
        report.write_text(json.dumps({"install": []}))


def test_resolution_for_another_target_passes_target_for_old_pips() -> None:
    """pip < 23.3 refuses --platform/--python-version for `install` without --target, even with
    --dry-run (seen with pip 23.2: "Can not use any platform or abi specific options unless
    installing via '--target'"). tests/deploy/test_wheelhouse.py::test_resolution_with_pip_23_2 runs
    the real pip 23.2 where one is installed."""
    pip = RecordingPip()
    target = wh.Target("3.12", wh.manylinux_platforms("2.28"))
    assert wh.resolve(pip, target, ["celery"], wh.Exclusions.read([], [])) == []
    (args,) = pip.calls
    assert "--platform" in args and "--dry-run" in args
    assert "--target" in args


def test_resolution_with_pip_23_2(tmp_path: Path) -> None:
    """The real resolver of pip 23.2 (the version a GPU node had), offline against local wheels."""
    pip232 = os.environ.get("KERNELFARM_TEST_PIP_23_2")  # a python whose pip is 23.2
    if not pip232:
        pytest.skip("set KERNELFARM_TEST_PIP_23_2 to a python with pip 23.2 to run this")
    index = tmp_path / "index"
    index.mkdir()
    write_wheel(index, "kfdep-a", "1.0", ("kfdep-b>=1",))
    write_wheel(index, "kfdep-b", "1.0")
    pip = wh.Pip(pip232, ("--no-index", f"--find-links={index}"))
    pins = wh.resolve(pip, wh.Target("3.12", wh.manylinux_platforms("2.28")), ["kfdep-a"], wh.Exclusions.read([], []))
    assert [(p.name, p.version) for p in pins] == [("kfdep-a", "1.0"), ("kfdep-b", "1.0")]


GPU_NODE_VENV_MARK = "<!-- gpu-node-venv:"


def documented_gpu_node_venv_steps() -> list[str]:
    """The bash block of DEPLOY.md's bare-metal step 2, install.sh line left out."""
    text = DOCS.read_text()
    block = text[text.index(GPU_NODE_VENV_MARK) :].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.replace("\\\n", "").splitlines() if line.strip() and "install.sh" not in line]


def test_documented_gpu_node_venv_sees_the_node_packages_when_python3_is_a_venv(tmp_path: Path) -> None:
    """DEPLOY.md's venv for a GPU node sees the node environment's own packages (CuPy there; a
    marker module here) also where the node's python3 is itself a virtual environment (seen on the
    H100 node: `--system-site-packages` then showed the base interpreter's packages only)."""
    node = tmp_path / "node-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(node)], check=True, timeout=120)
    node_python = node / "bin" / "python3"
    node_site = subprocess.run([str(node_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    (Path(node_site) / "node_only_marker.py").write_text("WHERE = 'node'\n")
    kf_venv = tmp_path / "kernelfarm-venv"
    script = "\n".join(["set -eu", *documented_gpu_node_venv_steps()])
    script = script.replace("/opt/kernelfarm/venv", str(kf_venv))
    env = {**os.environ, "PATH": f"{node / 'bin'}{os.pathsep}{os.environ['PATH']}"}  # python3 = the node's venv
    subprocess.run(["bash", "-c", script], check=True, env=env, timeout=120)
    seen = subprocess.run([str(kf_venv / "bin" / "python"), "-c", "import node_only_marker as m; print(m.WHERE)"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert seen.stdout.strip() == "node", seen.stderr
