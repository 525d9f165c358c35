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
import time
from importlib import resources

import libtmux

from handoffd.core import config, lifecycle, project
from handoffd.harness import install, pane, profiles, releases, settings
from handoffd.wakeups.wake import read_socket

BIN = os.path.dirname(sys.executable)
DEATH = "#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}"  # how a pane's agent ended


def default_agents() -> dict[str, str]:
    """Agent name → command line.  `shell` is the user's shell; `demo` is the scripted
    agent of `handoffd demo`; any other name runs the command of that name."""
    return {
        "shell": os.environ.get("SHELL") or "/bin/bash",
        "demo": f"{shlex.quote(sys.executable)} -m handoffd.demos.demo_agent",
    }


def shims_dir() -> str:
    """The folder of the `*.sh` helper shims agents call (docs/protocol.md §7)."""
    return str(resources.files("handoffd").joinpath("shims"))


def agent_command(role: config.Role, agents: dict[str, str], harness_args: str = "") -> str:
    """The session's command line: the agent's, with what its harness needs from handoffd
    right after its program (docs/protocol.md §16).  Its environment is set with `env` on
    the command itself: tmux gives a new pane the client's PATH whatever `new-session -e`
    says."""
    command = agents.get(role.agent, shlex.quote(role.agent))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in session_environment(role).items())
    words = [f"exec env {env} {command}", harness_args, role.agent_args]
    return " ".join(word for word in words if word).strip()


def session_environment(role: config.Role) -> dict[str, str]:
    """What a role's agent needs: its role name, and the shims and commands on PATH, also
    for a login shell whose profile resets PATH (docs/protocol.md §16)."""
    ours = os.pathsep.join([shims_dir(), BIN])
    path = os.pathsep.join([ours, os.environ.get("PATH", "")])
    return {"SWARMFORGE_ROLE": role.name, "PATH": path, **install.login_environment(ours)}


def harness_of(root: str, role: config.Role, agents: dict[str, str]) -> str:
    """The role's harness: the conf's `harness` line, its agent name, its command's program."""
    command = agents.get(role.agent)
    return profiles.resolve(role.agent, command, project.harnesses(root).get(role.name))


def write_mcp_config(root: str, role: config.Role, harness: str = profiles.GENERIC) -> str:
    """Register the server in the role's worktree (`.mcp.json`, kept out of git; other
    servers already registered there are kept) and approve it there for Claude Code."""
    try:
        path = install.write_mcp_config(root, role)
        if harness == profiles.CLAUDE:
            install.approve_mcp(role)
    except settings.Unusable as unusable:
        raise RuntimeError(f"{unusable}: fix or remove it") from None
    project.exclude_from_git(root, (install.MCP_FILE, install.HOOKS_FILE), [])
    return path


def install_hooks(root: str, roles: list[config.Role], harnesses: dict[str, str],
                  remove: bool = False) -> list[str]:  # fmt: skip
    """Install (or remove) the hooks of each role whose harness is Claude Code; one line
    each of what was done, or why a settings file was left alone."""
    said = []
    for role in roles:
        if harnesses.get(role.name) != profiles.CLAUDE:
            continue
        try:
            said.append(f"hooks: {role.name}: {install.install_hooks(root, role, remove)}")
        except (settings.Unusable, OSError) as unusable:
            said.append(f"hooks: {role.name}: not installed: {unusable}")
    if not remove and said:
        project.exclude_from_git(root, (install.HOOKS_FILE,), [])
    return said


def up(
    root: str,
    agents: dict[str, str] | None = None,
    daemon_args: tuple[str, ...] = (),
    tmux_config: str | None = None,
    mcp: bool = False,
    said: list[str] | None = None,
) -> tuple[str, list[str]]:
    """Start the missing sessions and the daemon; returns the socket and the sessions started.
    Only this host's roles get a session here (a role on another host runs there).  Each
    known harness gets handoffd's hooks (docs/protocol.md §16): what was done goes into
    `said`, one line each."""
    here = config.this_host(root)
    every = config.load_roles(root)
    # a pool's own row runs nothing (docs/protocol.md §17): its members are the roles started
    roles = {n: r for n, r in every.items() if config.is_local(r, here) and not r.is_pool}
    socket = read_socket(root)
    # every host's roles: the same `--agent` options serve on each host of the swarm
    _check_agent_names(every, agents or {})
    commands = {**default_agents(), **(agents or {})}
    for role in roles.values():
        if role.session:
            _check_startable(role, commands)
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is not installed; install it (e.g. apt-get install tmux)")
    _private_dir(os.path.dirname(socket))
    # Keep a pane whose agent exits so `died` can say how it ended (and keep the server up
    # if that was its only session); `died` turns this off again.
    _tmux(socket, tmux_config, "start-server", ";", "set-option", "-g", "exit-empty", "off",
          ";", "set-option", "-g", "remain-on-exit", "on")  # fmt: skip
    harnesses = {name: harness_of(root, role, commands) for name, role in roles.items()}
    if said is not None:
        said += install_hooks(root, list(roles.values()), harnesses)
    server = libtmux.Server(socket_path=socket, config_file=tmux_config)
    started: list[str] = []
    asked: Asked = {}
    for role in roles.values():
        if not role.session:
            continue
        if server.has_session(role.session, exact=True) and _death(socket, role.session) is None:
            pane.record(socket, role.session, harnesses[role.name])
            continue  # running: left alone
        if server.has_session(role.session, exact=True):
            _tmux(socket, None, "kill-session", "-t", f"={role.session}")  # a dead pane
        release = release_of(root, role, harnesses[role.name], commands, asked)
        if release is not None and said is not None:
            said.append(release_line(role, release))
        accepts = release.accepts if release is not None else frozenset()
        extra = install.arguments(harnesses[role.name], root, role, mcp, accepts)
        server.new_session(
            session_name=role.session,
            start_directory=role.worktree,
            window_command=agent_command(role, commands, extra),
            environment=session_environment(role),
            attach=False,
        )
        version = release.version if release is not None else None
        pane.record(socket, role.session, harnesses[role.name], version=version)
        started.append(role.session)
    if lifecycle.holder(root) is None:
        try:
            lifecycle.start(root, list(daemon_args))
        except lifecycle.AlreadyRunning:
            pass  # another start won the race since we looked: one daemon runs, as wanted
    return socket, started


Asked = dict[tuple[str, str], releases.Release]  # (harness, command line) -> its release


def release_of(root: str, role: config.Role, harness: str, agents: dict[str, str],
               asked: Asked) -> releases.Release | None:  # fmt: skip
    """The release of Claude Code or Codex the role's command runs (None for any other
    harness), asked of the program once per command line and `up` (docs/protocol.md §17,
    "Releases move")."""
    if harness not in profiles.PROFILES:
        return None
    command = agents.get(role.agent, shlex.quote(role.agent))
    if (harness, command) not in asked:
        if not asked:  # the answers' cache is the project's own, never committed
            project.exclude_from_git(root, (f"{config.SWARMFORGE}/{releases.CACHE}",), [])
        env = {**os.environ, **session_environment(role)}
        asked[harness, command] = releases.learn(root, harness, command, env, role.worktree)
    return asked[harness, command]


def release_line(role: config.Role, release: releases.Release) -> str:
    """`release: cleaner: codex 0.150.0; not passed: --no-daemon (this release does not take
    it)`: what `up` learned of a role's harness, and each optional flag it left out."""
    said = f"release: {role.name}: {release.name()}"
    if release.trouble is not None:
        said += f" ({'unknown release: ' if release.version is None else ''}{release.trouble})"
    dropped = release.dropped()
    if dropped:
        why = "" if release.trouble else " (this release does not take it)"
        said += f"; not passed: {', '.join(dropped)}{why}"
    return said


def wake_waiting(root: str, sessions: list[str]) -> list[str]:
    """Ask the running daemon to wake each role of `sessions` (just started) that has mail
    waiting in `new/`: its earlier wake-ups went to no session, and re-notify would come
    only minutes later.  The daemon types it once the new pane is idle (docs/protocol.md
    §14).  A request already standing there (an answer's) is left as it is.  The roles
    asked for; lossy, as every wake-up is."""
    from handoffd.queue import scan
    from handoffd.wakeups import wake, wakeup

    asked, roles, pooled = [], config.load_roles(root), set()
    for role in roles.values():
        if role.session not in sessions:
            continue
        pool = roles.get(role.pool) if role.pool and not role.is_pool else None
        if pool is not None and pool.name not in pooled and scan.listing(pool, (scan.State.NEW,)):
            pooled.add(pool.name)  # one member woken for its pool's mail (docs/protocol.md §17)
        elif not scan.listing(role, (scan.State.NEW,)):
            continue
        if os.path.lexists(os.path.join(role.handoffs, wakeup.WAKE)):
            continue
        try:
            wakeup.ask_wake(role.handoffs, wake.TEXT)
        except (OSError, wakeup.NotARequest):
            continue
        asked.append(role.name)
    return asked


def died(socket: str, sessions: list[str], wait: float) -> dict[str, str]:
    """After `wait` seconds, the sessions whose agent has exited, each with its exit status
    and last output; those sessions are removed, so the next `up` starts them again."""
    if sessions and wait > 0:
        time.sleep(wait)  # an agent that cannot start (bad flag, no key) exits within this
    dead = {}
    for session in sessions:
        how = _death(socket, session)
        if how is not None:
            dead[session] = how
            _tmux(socket, None, "kill-session", "-t", f"={session}")
    _tmux(socket, None, "set-option", "-g", "remain-on-exit", "off", ";",
          "set-option", "-g", "exit-empty", "on")  # fmt: skip
    return dead


def _death(socket: str, session: str) -> str | None:
    """How the session's agent ended ("exit status 3; last output: …"), None if it runs."""
    target = f"={session}:"
    for _ in range(5):
        shown = _tmux(socket, None, "display-message", "-p", "-t", target, DEATH).stdout.strip()
        if not shown:
            return "its session is gone"
        dead, code, signal = [*shown.split("|"), "", ""][:3]
        if dead != "1":
            return None
        if code or signal:
            break
        time.sleep(0.05)  # tmux saw the terminal close but has not reaped the agent yet
    status = f"killed by signal {signal}" if signal else f"exit status {code or 'unknown'}"
    text = _tmux(socket, None, "capture-pane", "-p", "-J", "-S", "-", "-t", target).stdout
    lines = [line for line in text.splitlines() if line.strip() and "Pane is dead" not in line]
    return f"{status}; last output: {' | '.join(lines[-3:])}" if lines else status


def _tmux(socket: str, tmux_config: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    config_args = ["-f", tmux_config] if tmux_config else []
    return subprocess.run(["tmux", "-S", socket, *config_args, *args],
                          capture_output=True, text=True, timeout=10, check=False)  # fmt: skip


def _check_agent_names(roles: dict[str, config.Role], agents: dict[str, str]) -> None:
    """`--agent shel=vim` names no agent: say which names there are instead of ignoring it."""
    known = sorted({role.agent for role in roles.values() if role.agent} | set(default_agents()))
    for name in agents:
        if name not in known:
            raise RuntimeError(
                f"--agent {name}: no role in roles.tsv has the agent '{name}' and it is not "
                f"built in; known agents: {', '.join(known)}"
            )


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
    """The program a command line runs: its first word that is not `exec`, `env` or a
    NAME=value."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None  # tmux's shell will say what is wrong with it
    for word in words:
        name, assigns, _ = word.partition("=")
        if word not in ("exec", "env") and not (assigns and name.isidentifier()):
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
