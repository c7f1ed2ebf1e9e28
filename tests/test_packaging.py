"""One import name: the built wheel installs only `kernelfarm`, and works from a directory whose own
`core/`, `api/` and `kernels/` packages would shadow generic top-level names."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from kernelfarm.testing.decoys import DECOY_NAMES, write_decoy_packages
from tests.deploy.sources import wheelhouse_module

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy made as deploy/wheelhouse.py makes it (setuptools writes build/ into the tree it
    # builds: not into the checkout). No build isolation: the test environment's setuptools builds it,
    # nothing is downloaded.
    tree = wheelhouse_module().copy_tree(REPO, tmp_path_factory.mktemp("source") / "kernelfarm")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(tree)], check=True, capture_output=True, timeout=300)  # fmt: skip
    (built,) = out.glob("kernelfarm-*.whl")
    return built


def test_wheel_has_one_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert archive.read(top_level).decode().split() == ["kernelfarm"]
    roots = {name.split("/")[0] for name in names}
    assert {r for r in roots if not r.endswith(".dist-info")} == {"kernelfarm"}
    # The data the runtime reads from the package is in it.
    assert "kernelfarm/migrations/env.py" in names
    assert any(n.startswith("kernelfarm/kernels/matmul_fp32/") and n.endswith(".cu") for n in names)
    assert any(n.startswith("kernelfarm/kernels/recorded/") and n.endswith(".json.gz") for n in names)
    # The dashboard's pages, scripts and styles (api/ui).
    for asset in ("pages/shell.html", "pages/job.html", "static/app.css", "static/favicon.svg", "static/js/job.js"):
        assert f"kernelfarm/api/ui/{asset}" in names, asset


def test_fresh_venv_imports_past_decoy_packages(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    # The wheel's dependencies come from this test environment (appended after the fresh venv's own
    # site-packages, so the installed wheel, not the checkout, provides `kernelfarm`).
    Path(purelib, "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(purelib)

    # No kernelfarm/ decoy here: `python -c` below puts this folder first on sys.path on purpose, as a
    # user's script would, and a folder named kernelfarm/ would then shadow any installed package.
    project = write_decoy_packages(tmp_path / "users-project", [n for n in DECOY_NAMES if n != "kernelfarm"])
    (project / "core" / "settings.py").write_text("raise ImportError('decoy core.settings imported')\n")

    program = (
        "import kernelfarm, kernelfarm.api.app, kernelfarm.tuner.tasks, kernelfarm.worker.tasks, "
        "kernelfarm.kernels.registry as r, kernelfarm.core.migrate as m\n"
        "app = kernelfarm.api.app.create_app()\n"
        "assert 'matmul_fp32' in r.all_kernels(), sorted(r.all_kernels())\n"
        "assert m.MIGRATIONS_DIR.joinpath('env.py').is_file()\n"
        "print(kernelfarm.__file__)\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # The Celery apps need a broker URL to be built; nothing connects to it here.
    environment |= {"REDIS_URL": "redis://127.0.0.1:1/0", "DATABASE_URL": "postgresql+psycopg2://nobody@127.0.0.1:1/x"}
    # `python -c` puts the working directory first on sys.path, as a user's script would.
    done = subprocess.run([str(python), "-c", program], cwd=project, env=environment, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(purelib)

    # The CLI, run from the user's folder, spawns nothing that imports the decoys either.
    cli = subprocess.run([str(python), "-m", "kernelfarm", "--help"], cwd=project, env=environment,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert cli.returncode == 0, cli.stderr
