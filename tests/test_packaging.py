"""The package as a user gets it: an install that prints no warning, and a wheel that holds
every module and data file, working from a fresh virtual environment (not the checkout).

Both build offline with the backend the test extra installs (`--no-build-isolation`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import Project, run_command

CHECKOUT = Path(__file__).resolve().parent.parent
PACKAGE = CHECKOUT / "handoffd"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BUILD_LEFTOVERS = (
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
)


def shipped_files() -> set[str]:
    """Every file under handoffd/ a wheel must hold: modules, subpackages, data folders."""
    found = set()
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if not name.endswith((".pyc", ".pyo")):
                found.add(str(Path(folder, name).relative_to(CHECKOUT)))
    return found


def run(*command: str | Path, cwd: Path = CHECKOUT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel built from the checkout, and everything the build printed."""
    out = tmp_path_factory.mktemp("wheel")
    # From a copy of the sources alone: a checkout's own build/ folder (left by an earlier
    # build) would put modules since removed into the wheel.
    source = tmp_path_factory.mktemp("source") / "handoffd"
    shutil.copytree(CHECKOUT, source, ignore=shutil.ignore_patterns(*BUILD_LEFTOVERS))
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                "-w", out, source)  # fmt: skip
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("handoffd-*.whl")
    return path, built.stdout + built.stderr


def test_building_the_wheel_prints_no_warning(wheel: tuple[Path, str]) -> None:
    _, printed = wheel
    assert "warning" not in printed.lower(), printed


def test_an_editable_install_prints_nothing(tmp_path: Path) -> None:
    """`pip install -q -e .` as the README has it (the dependencies aside: see fresh_venv)."""
    python = borrowing_venv(tmp_path / "venv")
    installed = run(sys.executable, "-m", "pip", "--python", python, "install", "-q",
                    "--no-deps", "--no-build-isolation", "-e", CHECKOUT, cwd=tmp_path)  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout + installed.stderr == ""


def test_the_wheel_holds_every_module_and_data_file_of_the_package(
    wheel: tuple[Path, str],
) -> None:
    path, _ = wheel
    with zipfile.ZipFile(path) as archive:
        names = {name for name in archive.namelist() if not name.startswith("handoffd-")}
        shim_mode = archive.getinfo("handoffd/shims/swarm_handoff.sh").external_attr >> 16
    assert names == shipped_files()
    assert shim_mode & 0o111, "the shims must stay executable: agents run them by name"


def test_the_wheel_holds_no_benchmark_and_no_test_support(wheel: tuple[Path, str]) -> None:
    """benchmarks/ and testbed/ (the projects it and the tests build) stay in the checkout."""
    path, _ = wheel
    with zipfile.ZipFile(path) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        strays = [name for name in archive.namelist() if "bench" in name.lower()]
    assert {top for top in tops if not top.startswith("handoffd-")} == {"handoffd"}
    assert strays == []


def borrowing_venv(venv: Path) -> Path:
    """A new virtual environment without handoffd that borrows the test environment's
    libraries (the dependencies, the build backend) through a path entry: no network."""
    assert run(sys.executable, "-m", "venv", "--without-pip", venv).returncode == 0
    python = venv / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=venv)
    Path(site.stdout.strip(), "borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


@pytest.fixture(scope="module")
def fresh_venv(wheel: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel installed (not editable)."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    python = borrowing_venv(venv)
    path, _ = wheel
    installed = run(sys.executable, "-m", "pip", "--python", python,
                    "install", "--no-deps", "--no-index", path)  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    return venv


def test_the_installed_wheel_runs_handoffd_from_its_own_files(fresh_venv: Path) -> None:
    python = fresh_venv / "bin" / "python"
    where = run(python, "-c", "import handoffd; print(handoffd.__file__)", cwd=fresh_venv)
    assert where.stdout.startswith(str(fresh_venv)), where.stdout + where.stderr
    result = run(fresh_venv / "bin" / "handoffd", "--help", cwd=fresh_venv)
    assert result.returncode == 0, result.stderr
    assert "Usage: handoffd [OPTIONS] COMMAND [ARGS]..." in result.stdout


def test_the_installed_wheel_says_in_one_line_that_the_benchmark_runs_from_a_checkout(
    fresh_venv: Path,
) -> None:
    result = run(fresh_venv / "bin" / "handoffd", "bench", "--quick", cwd=fresh_venv)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "handoffd bench: the benchmark runs from a checkout of the repository, not from an "
        "installed package (in a checkout: `pip install -e .`, or `python -m benchmarks`)\n"
    )


def test_the_installed_wheel_runs_a_helper_and_ships_its_shims_and_sample(
    fresh_venv: Path, project: Project
) -> None:
    helper = str(fresh_venv / "bin" / "ready_for_next")
    result = run_command(helper, cwd=project.root, role="coder")
    assert (result.code, result.out, result.err) == (0, "NO_TASK\n", "")
    data = run(fresh_venv / "bin" / "python", "-c",
               "from handoffd.core import project; from handoffd.daemon import swarm; import os; "
               "print(os.access(os.path.join(swarm.shims_dir(), 'swarm_handoff.sh'), os.X_OK)); "
               "print(project.sample_text().splitlines()[-1])", cwd=fresh_venv)  # fmt: skip
    assert data.stdout.splitlines()[0] == "True", data.stderr
    assert data.stdout.splitlines()[1].startswith("window ")
