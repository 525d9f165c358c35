"""Running a swarm: one private tmux server per project, one session per role, and the daemon.

`up` only adds what is missing (a session that already runs is left alone) and
`down` stops exactly this project's daemon and tmux server, nothing else.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from importlib import resources

import libtmux

from handoffd import config, lifecycle
from handoffd.wake import read_socket

BIN = os.path.dirname(sys.executable)


def default_agents() -> dict[str, str]:
    """Agent name → command line.  `shell` is the user's shell; `demo` is the scripted
    agent of `handoffd demo`; any other name runs the command of that name."""
    return {
        "shell": os.environ.get("SHELL") or "/bin/bash",
        "demo": f"{shlex.quote(sys.executable)} -m handoffd.demo_agent",
    }


def shims_dir() -> str:
    """The folder of the `*.sh` helper shims agents call (PROTOCOL.md §7)."""
    return str(resources.files("handoffd").joinpath("shims"))


def agent_command(role: config.Role, agents: dict[str, str]) -> str:
    """The session's command line.  Its environment is set with `env` on the command
    itself: tmux gives a new pane the client's PATH whatever `new-session -e` says."""
    command = agents.get(role.agent, shlex.quote(role.agent))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in session_environment(role).items())
    return f"exec env {env} {command} {role.agent_args}".strip()


def session_environment(role: config.Role) -> dict[str, str]:
    """What a role's agent needs: its role name, and the shims and commands on PATH."""
    path = os.pathsep.join([shims_dir(), BIN, os.environ.get("PATH", "")])
    return {"SWARMFORGE_ROLE": role.name, "PATH": path}


def up(
    root: str,
    agents: dict[str, str] | None = None,
    daemon_args: tuple[str, ...] = (),
    tmux_config: str | None = None,
) -> tuple[str, list[str]]:
    """Start the missing sessions and the daemon; returns the socket and the sessions started."""
    roles = config.load_roles(root)
    socket = read_socket(root)
    commands = {**default_agents(), **(agents or {})}
    for role in roles.values():
        if role.session:
            _check_startable(role, commands)
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is not installed; install it (e.g. apt-get install tmux)")
    _private_dir(os.path.dirname(socket))
    server = libtmux.Server(socket_path=socket, config_file=tmux_config)
    started = []
    for role in roles.values():
        if not role.session or server.has_session(role.session, exact=True):
            continue
        server.new_session(
            session_name=role.session,
            start_directory=role.worktree,
            window_command=agent_command(role, commands),
            environment=session_environment(role),
            attach=False,
        )
        started.append(role.session)
    if lifecycle.holder(root) is None:
        try:
            lifecycle.start(root, list(daemon_args))
        except lifecycle.AlreadyRunning:
            pass  # another start won the race since we looked: one daemon runs, as wanted
    return socket, started


def _private_dir(directory: str) -> None:
    """The socket's folder must be ours alone: whoever can write there can impersonate the
    server, and with it type into every agent's session."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.stat(directory)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise RuntimeError(
            f"{directory} must belong to you and be private (mode 700); "
            "fix it or remove it, then run `handoffd up` again"
        )


def _check_startable(role: config.Role, agents: dict[str, str]) -> None:
    """Refuse before starting anything: tmux opens a session whose directory is missing
    somewhere else, without a word, and an agent that is not installed ends its session
    (and, if it was the last, the server) at once."""
    if not os.path.isdir(role.worktree):
        raise RuntimeError(
            f"the worktree of role {role.name} is missing: {role.worktree}; "
            "run `handoffd init` to lay it out again"
        )
    program = _program(agents.get(role.agent, shlex.quote(role.agent)))
    if program and shutil.which(program, path=session_environment(role)["PATH"]) is None:
        raise RuntimeError(
            f"the agent of role {role.name} is not installed: {program} not found; "
            f"give its command line with --agent {role.agent}=COMMAND"
        )


def _program(command: str) -> str | None:
    """The program a command line runs: its first word that is not a NAME=value."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None  # tmux's shell will say what is wrong with it
    for word in words:
        name, assigns, _ = word.partition("=")
        if not (assigns and name.isidentifier()):
            return word
    return None


def down(root: str) -> tuple[int | None, bool]:
    """Stop the daemon and this project's tmux server; returns (daemon pid, server killed)."""
    pid = lifecycle.stop(root)
    try:
        socket = read_socket(root)
    except (OSError, RuntimeError):
        return pid, False
    result = subprocess.run(
        ["tmux", "-S", socket, "kill-server"], capture_output=True, timeout=10, check=False
    )
    if result.returncode != 0:
        return pid, False
    try:
        os.unlink(socket)  # tmux leaves its socket file behind; nothing listens on it now
    except FileNotFoundError:
        pass
    return pid, True
