"""The `*.sh` shims agents call (docs/protocol.md §7): each runs the installed command of the
same name with the same arguments.  They ship in the package (handoffd/shims/, which `up`
puts on the agents' PATH) and scripts/ links to them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from handoffd.core import config
from handoffd.daemon import swarm
from tests.conftest import BIN, Project, helper_env

CHECKOUT = Path(__file__).resolve().parent.parent
SCRIPTS = CHECKOUT / "scripts"
PACKAGED = Path(swarm.shims_dir())
COMMANDS = (
    "swarm_handoff", "ready_for_next", "ready_for_next_task", "ready_for_next_batch",
    "done_with_current", "done_with_current_task", "done_with_current_batch",
    "stop_handoff_daemon", "resume",
)  # fmt: skip
SHIMS = [
    pytest.param(folder / f"{command}.sh", id=f"{folder.name}/{command}.sh")
    for folder in (SCRIPTS, PACKAGED)
    for command in COMMANDS
]
AWKWARD_ARGS = ["two words", "", "--", "*", "$HOME", "-x", "line\nbreak", "'quoted'"]


def run_shim(
    shim: Path, *args: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(shim), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def test_scripts_and_the_package_hold_exactly_the_protocol_shims() -> None:
    expected = sorted(f"{command}.sh" for command in COMMANDS)
    assert sorted(p.name for p in SCRIPTS.glob("*.sh")) == expected
    assert sorted(p.name for p in PACKAGED.glob("*.sh")) == expected


@pytest.mark.parametrize("shim", SHIMS)
def test_every_shim_is_an_executable_bash_script(shim: Path) -> None:
    assert os.access(shim, os.X_OK), f"{shim} is not executable"
    assert shim.read_text().startswith("#!/usr/bin/env bash\n")


def test_the_shims_are_committed_as_executable() -> None:
    listing = subprocess.run(
        ["git", "ls-files", "-s", "--", "handoffd/shims"],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        check=False,
    )
    if listing.returncode != 0 or not listing.stdout:
        pytest.skip("not a git checkout")
    modes = {line.split("\t")[1]: line.split()[0] for line in listing.stdout.splitlines()}
    assert modes == {f"handoffd/shims/{c}.sh": "100755" for c in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS)
def test_each_script_in_scripts_is_the_packaged_shim(command: str) -> None:
    assert (SCRIPTS / f"{command}.sh").resolve() == (PACKAGED / f"{command}.sh").resolve()


@pytest.mark.parametrize("command", COMMANDS)
def test_each_shim_has_an_installed_command_of_its_name(command: str) -> None:
    assert os.access(os.path.join(BIN, command), os.X_OK)


@pytest.mark.parametrize("shim", SHIMS)
def test_each_shim_runs_the_command_of_its_name_with_the_same_arguments_and_exit_status(
    shim: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    command = fake / shim.name.removesuffix(".sh")
    command.write_text(
        '#!/bin/sh\necho "ran $(basename "$0") with $#"\n'
        'for arg in "$@"; do printf "[%s]\\n" "$arg"; done\nexit 7\n'
    )
    command.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    result = run_shim(shim, *AWKWARD_ARGS, env=env, cwd=tmp_path)
    assert result.returncode == 7
    expected = f"ran {command.name} with {len(AWKWARD_ARGS)}\n"
    assert result.stdout == expected + "".join(f"[{arg}]\n" for arg in AWKWARD_ARGS)


# --- with the real commands ---------------------------------------------------------------


def test_ready_for_next_sh_in_a_project_with_no_mail_prints_no_task(project: Project) -> None:
    result = run_shim(SCRIPTS / "ready_for_next.sh", env=helper_env("coder"), cwd=project.root)
    assert (result.returncode, result.stdout, result.stderr) == (0, "NO_TASK\n", "")


def test_done_with_current_sh_passes_the_commands_exit_status_through(project: Project) -> None:
    result = run_shim(SCRIPTS / "done_with_current.sh", env=helper_env("coder"), cwd=project.root)
    assert (result.returncode, result.stderr) == (1, "NO_CURRENT_TASK\n")


def test_swarm_handoff_sh_without_an_argument_prints_usage_and_exits_1(project: Project) -> None:
    result = run_shim(SCRIPTS / "swarm_handoff.sh", env=helper_env("coder"), cwd=project.root)
    assert result.returncode == 1
    assert result.stderr.startswith("Usage: swarm_handoff.sh <draft-file>")
    assert result.stdout == ""


def test_the_packaged_shims_work_from_the_path_up_gives_the_agents(project: Project) -> None:
    role = config.load_roles(str(project.root))["cleaner"]
    env = {**helper_env(None), **swarm.session_environment(role)}
    result = subprocess.run(
        ["ready_for_next.sh"], env=env, cwd=project.worktrees["cleaner"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (0, "NO_TASK\n"), result.stderr


def test_a_login_shell_whose_profile_resets_path_still_finds_the_helpers(
    project: Project, tmp_path: Path
) -> None:
    """Codex runs an agent's commands as `bash -lc`: the profile resets the PATH `up` set,
    and bash reads the session's BASH_ENV after it (docs/protocol.md §16)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".profile").write_text("PATH=/usr/bin:/bin\nexport PATH\n")
    role = config.load_roles(str(project.root))["cleaner"]
    env = {**helper_env(None), **swarm.session_environment(role), "HOME": str(home)}
    for shell in (["bash", "-lc"], ["bash", "-c"]):
        result = subprocess.run(
            [*shell, "ready_for_next.sh && echo PATH=$PATH"], env=env,
            cwd=project.worktrees["cleaner"], capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        assert result.stdout.startswith("NO_TASK\nPATH="), (shell, result.stderr)
        assert result.stdout.count(swarm.shims_dir()) == 1  # put back once, not twice
