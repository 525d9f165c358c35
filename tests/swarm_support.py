"""Support for the tests of init/up/down and the demo: git without the user's settings,
real tmux servers, and what is left running on the machine.

Every tmux server lives on a short socket path (unix socket paths are limited to ~100
bytes; pytest's tmp_path is often longer): a project's under /tmp/handoffd-<uid>/ as
`init` chooses it, an extra one under /tmp/hd-<random>/s.  Each is killed at teardown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from handoffd.core import lifecycle
from tests.conftest import BIN

HANDOFFD = os.path.join(BIN, "handoffd")
WAKE_TEXT = "You have new handoff mail. If idle, run ready_for_next.sh."
T = TypeVar("T")

# A newcomer's git: no global or system configuration, so no identity either.
BARE_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def command_env(**extra: str) -> dict[str, str]:
    """The environment of a `handoffd` subprocess: venv first on PATH, outside any tmux,
    no calling role, git without the user's configuration."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TMUX", "TMUX_PANE", "SWARMFORGE_ROLE", "NOTIFY_SOCKET")
    }
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    return {**env, **BARE_GIT_ENV, **extra}


def handoffd(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed `handoffd` command; never raises on a non-zero exit."""
    return subprocess.run(
        [HANDOFFD, *args],
        env=env or command_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# --- tmux ---------------------------------------------------------------------------------


def tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["tmux", "-S", socket, *args],
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )


def server_answers(socket: str) -> bool:
    """A tmux server is listening on `socket`."""
    return tmux(socket, "list-sessions").returncode == 0


def sessions(socket: str) -> list[str]:
    result = tmux(socket, "list-sessions", "-F", "#{session_name}")
    return sorted(result.stdout.split()) if result.returncode == 0 else []


def pane(socket: str, session: str, field: str) -> str:
    """A format field of the session's pane, e.g. `#{pane_current_path}`."""
    result = tmux(socket, "display-message", "-p", "-t", f"={session}:", field)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def pane_text(socket: str, session: str) -> str:
    """What the session's pane shows now, wrapped lines joined."""
    result = tmux(socket, "capture-pane", "-p", "-J", "-t", f"={session}:")
    return result.stdout if result.returncode == 0 else ""


def kill_server(socket: str) -> None:
    """Teardown: kill the server on `socket` if one answers, and remove the socket file."""
    tmux(socket, "kill-server")
    try:
        os.unlink(socket)
    except FileNotFoundError:
        pass


@contextmanager
def other_tmux_server() -> Iterator[str]:
    """An unrelated tmux server on its own private socket, with one session."""
    directory = tempfile.mkdtemp(prefix="hd-", dir="/tmp")
    socket = os.path.join(directory, "s")
    result = tmux(socket, "-f", os.devnull, "new-session", "-d", "-s", "bystander", "sleep 600")
    assert result.returncode == 0, result.stderr
    try:
        yield socket
    finally:
        kill_server(socket)
        shutil.rmtree(directory, ignore_errors=True)


# --- processes ----------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """The process runs (a zombie has finished; it only waits for its parent)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def processes_touching(*paths: str) -> list[str]:
    """Live processes (other than this one) whose command line mentions one of `paths`
    or whose working directory lies inside one of them."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid() or not alive(int(entry)):
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                cmdline = file.read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue  # gone meanwhile, or not ours to look at
        cwd = cwd.removesuffix(" (deleted)")
        for path in paths:
            if path in cmdline or cwd == path or cwd.startswith(path.rstrip("/") + "/"):
                found.append(f"pid {entry} (cwd {cwd}): {cmdline}")
                break
    return found


# --- projects -----------------------------------------------------------------------------


def socket_of(root: Path | str) -> str:
    return (Path(root) / ".swarmforge" / "tmux-socket").read_text(encoding="utf-8").strip()


def take_down(root: Path | str) -> None:
    """Teardown of a project's swarm, whatever state a test left it in."""
    lifecycle.stop(str(root), grace=2.0)
    try:
        kill_server(socket_of(root))
    except FileNotFoundError:
        pass


# A stand-in for a release of Codex or Claude Code: it answers `--version` and `--help` as
# that release does (its help listing only the options it takes), logs each call's words to
# `<program>.calls`, exits 2 on `--no-daemon` when it does not take it (as Codex 0.150 does),
# and otherwise runs `cat` (no model is asked here).
STAND_IN = """#!/bin/sh
echo "$*" >> "$0.calls"
for word; do
  case "$word" in
    --version) echo '{said}'; exit 0 ;;
    --help) printf 'Usage: {name} [OPTIONS] [PROMPT]\\n\\n  -c, --config <key=value>\\n{help}'
            exit 0 ;;
    --no-daemon) [ -n '{daemon}' ] || {{ echo "error: unexpected '$word'" >&2; exit 2; }} ;;
  esac
done
exec cat
"""


def stand_in(folder: Path, name: str, version: str, no_daemon: bool) -> Path:
    """`folder/<name>`, a stand-in for release `version` of harness `name` (`codex`, `claude`);
    `no_daemon`: it takes `--no-daemon` (Codex 0.171), else it exits on it (Codex 0.150)."""
    said = f"codex-cli {version}" if name == "codex" else f"{version} (Claude Code)"
    help_text = "      --no-daemon\\n          Run without the shared background server\\n"
    path = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(STAND_IN.format(said=said, name=name, help=help_text if no_daemon else "",
                                    daemon="yes" if no_daemon else ""))  # fmt: skip
    path.chmod(0o755)
    return path


def calls(program: Path) -> list[str]:
    """The words of each call of a stand-in, in order."""
    log = Path(f"{program}.calls")
    return log.read_text().splitlines() if log.exists() else []
