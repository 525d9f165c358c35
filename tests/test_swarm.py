"""`handoffd up` and `handoffd down` against a real tmux server and the real daemon.

The project is laid out by `handoffd init` from a configuration whose agents are small
probes: the coder's prints what it sees and then is an interactive `sh` a test types
into, the cleaner's prints what it sees and then echoes what is typed (`cat`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.core import lifecycle, project
from handoffd.daemon import swarm
from tests.conftest import git, wait_for
from tests.swarm_support import (
    WAKE_TEXT,
    alive,
    command_env,
    handoffd,
    other_tmux_server,
    pane,
    pane_text,
    processes_touching,
    server_answers,
    sessions,
    socket_of,
    take_down,
    tmux,
)

CONFIG = """\
window coder   probe-sh  master  task
window cleaner probe-cat cleaner batch --model 'big one'
"""
# What each probe prints first: its role, where ready_for_next.sh is found, its arguments.
SEEN = (
    "echo ROLE=$SWARMFORGE_ROLE; echo SHIM=$(command -v ready_for_next.sh); "
    'printf "ARG=[%s]\\n" "$@"'
)
AGENTS = (
    "--agent", f"probe-sh=sh -c '{SEEN}; exec sh' probe",
    "--agent", f"probe-cat=sh -c '{SEEN}; exec cat' probe",
)  # fmt: skip
SESSIONS = ["swarmforge-cleaner", "swarmforge-coder"]


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A project laid out by `handoffd init`, taken down at teardown whatever happened."""
    root = tmp_path.resolve() / "p"
    conf = tmp_path / "swarm.conf"
    conf.write_text(CONFIG)
    result = handoffd("init", "--config", str(conf), str(root))
    assert result.returncode == 0, result.stderr
    yield root
    take_down(root)


def up(root: Path, *extra: str) -> str:
    result = handoffd("up", *AGENTS, *extra, str(root))
    assert result.returncode == 0, result.stderr
    return result.stdout


def worktree(root: Path, role: str) -> Path:
    return root if role == "coder" else root / ".worktrees" / role


def type_into(socket: str, session: str, text: str) -> None:
    assert tmux(socket, "send-keys", "-t", f"={session}:", "-l", "--", text).returncode == 0
    assert tmux(socket, "send-keys", "-t", f"={session}:", "Enter").returncode == 0


def daemon_pid(root: Path) -> int:
    return int((root / ".swarmforge" / "daemon" / "handoffd.pid").read_text())


def swarm_pids(root: Path) -> dict[str, int]:
    """The daemon, the tmux server and every session's agent."""
    socket = socket_of(root)
    pids = {"daemon": daemon_pid(root), "tmux": int(pane(socket, "swarmforge-coder", "#{pid}"))}
    return pids | {s: int(pane(socket, s, "#{pane_pid}")) for s in SESSIONS}


# --- up -----------------------------------------------------------------------------------


def test_up_starts_one_session_per_role_each_in_its_worktree(root: Path) -> None:
    up(root)
    socket = socket_of(root)
    assert sessions(socket) == SESSIONS
    for role in ("coder", "cleaner"):
        path = pane(socket, f"swarmforge-{role}", "#{pane_current_path}")
        assert path == str(worktree(root, role))


def test_each_session_runs_its_agent_with_the_role_set_and_the_shims_on_path(
    root: Path,
) -> None:
    up(root)
    socket = socket_of(root)
    shim = os.path.join(swarm.shims_dir(), "ready_for_next.sh")
    for role in ("coder", "cleaner"):
        text = wait_for(
            lambda role=role: (t := pane_text(socket, f"swarmforge-{role}")) and "SHIM=" in t and t,
            what=f"the {role} probe's report",
        )
        assert f"ROLE={role}\n" in text
        assert f"SHIM={shim}\n" in text
    assert "ARG=[--model]\nARG=[big one]\n" in pane_text(socket, "swarmforge-cleaner")


def test_the_shell_agent_runs_the_users_shell(root: Path, tmp_path: Path) -> None:
    fake_shell = tmp_path / "my-shell"
    fake_shell.write_text('#!/bin/sh\necho "MY SHELL as $SWARMFORGE_ROLE"\nexec cat\n')
    fake_shell.chmod(0o755)
    config = root / ".swarmforge" / "roles.tsv"
    config.write_text(config.read_text().replace("\tprobe-sh\t", "\tshell\t"))
    result = handoffd("up", *AGENTS[2:], str(root), env=command_env(SHELL=str(fake_shell)))
    assert result.returncode == 0, result.stderr
    wait_for(
        lambda: "MY SHELL as coder" in pane_text(socket_of(root), "swarmforge-coder"),
        what="the user's shell in the coder's session",
    )


def test_up_starts_the_daemon_and_prints_how_to_attach_to_each_role(root: Path) -> None:
    output = up(root)
    socket = socket_of(root)
    assert lifecycle.holder(str(root)) == daemon_pid(root)
    assert alive(daemon_pid(root))
    for session in SESSIONS:
        assert f"tmux -S {socket} attach -t ={session}" in output


def test_the_socket_lives_in_a_directory_only_this_user_can_enter(root: Path) -> None:
    up(root)
    info = os.stat(os.path.dirname(socket_of(root)))
    assert info.st_uid == os.getuid()
    assert stat.S_IMODE(info.st_mode) & 0o077 == 0


def test_up_twice_starts_nothing_new(root: Path) -> None:
    up(root)
    before = swarm_pids(root)
    output = up(root)
    assert "started: nothing new" in output
    assert sessions(socket_of(root)) == SESSIONS
    assert swarm_pids(root) == before


def test_up_racing_another_start_of_the_daemon_keeps_the_one_that_won(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert handoffd("start", str(root)).returncode == 0
    winner = daemon_pid(root)
    real_holder = lifecycle.holder
    calls: list[str] = []

    def holder_seen_before_the_other_start(project: str) -> int | None:
        """The first look finds no daemon, as if the other start came just after it."""
        calls.append(project)
        return None if len(calls) == 1 else real_holder(project)

    monkeypatch.setattr(lifecycle, "holder", holder_seen_before_the_other_start)
    agents = dict(value.split("=", 1) for value in AGENTS[1::2])
    _, started = swarm.up(str(root), agents)
    assert started == ["swarmforge-coder", "swarmforge-cleaner"]
    assert real_holder(str(root)) == winner


def test_up_restarts_only_the_session_that_is_gone(root: Path) -> None:
    up(root)
    socket = socket_of(root)
    coder_pane = pane(socket, "swarmforge-coder", "#{pane_pid}")
    assert tmux(socket, "kill-session", "-t", "=swarmforge-cleaner").returncode == 0
    output = up(root)
    assert "started: swarmforge-cleaner\n" in output
    assert sessions(socket) == SESSIONS
    assert pane(socket, "swarmforge-coder", "#{pane_pid}") == coder_pane


def test_a_handoff_sent_from_the_coders_session_reaches_the_cleaner_and_wakes_it(
    root: Path, tmp_path: Path
) -> None:
    up(root)
    socket = socket_of(root)
    draft = tmp_path / "draft"
    draft.write_text("type: note\nto: cleaner\npriority: 50\nmessage: sent by hand\n")
    wait_for(lambda: "SHIM=" in pane_text(socket, "swarmforge-coder"), what="the coder's shell")
    type_into(socket, "swarmforge-coder", f"swarm_handoff.sh {draft}")
    wait_for(
        lambda: "HANDOFF QUEUED:" in pane_text(socket, "swarmforge-coder"),
        what="swarm_handoff.sh to run in the coder's session",
    )
    new = worktree(root, "cleaner") / ".swarmforge" / "handoffs" / "inbox" / "new"
    delivered = wait_for(lambda: list(new.iterdir()), what="delivery to the cleaner")
    assert len(delivered) == 1
    assert "_from_coder_to_cleaner.handoff" in delivered[0].name
    headers = delivered[0].read_text().split("\n\n")[0].splitlines()
    assert {"from: coder", "message: sent by hand", "recipient: cleaner"} <= set(headers)
    wait_for(
        lambda: WAKE_TEXT in pane_text(socket, "swarmforge-cleaner"),
        what="the wake-up line in the cleaner's session",
    )
    assert WAKE_TEXT not in pane_text(socket, "swarmforge-coder")


def test_a_role_added_later_is_woken_by_up_for_the_mail_waiting_for_it_not_at_renotify(
    root: Path, tmp_path: Path
) -> None:
    """docs/protocol.md §15, "A new role starts well": mail sent to a role before its
    session exists woke nobody; the `up` that starts the session has it woken as soon as
    the pane is idle, long before re-notify (120 s) would."""
    up(root)
    conf = tmp_path / "grown.conf"
    conf.write_text(CONFIG + "window QA probe-cat qa task\n")
    grown = handoffd("init", "--config", str(conf), str(root))
    roles_tsv = root / ".swarmforge" / "roles.tsv"
    assert f"updated {roles_tsv} (+QA)\n" in grown.stdout, grown.stdout
    assert "run handoffd up to start QA\n" in grown.stdout
    draft = tmp_path / "draft"
    draft.write_text("type: note\nto: QA\npriority: 50\nmessage: for the new role\n")
    sent = handoffd("send-handoff", str(draft), "--root", str(root),
                    env=command_env(SWARMFORGE_ROLE="coder"))  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    new = worktree(root, "cleaner").parent / "qa" / ".swarmforge" / "handoffs" / "inbox" / "new"
    wait_for(lambda: list(new.glob("*.handoff")), what="the copy in QA's new/")
    started = up(root)
    assert "QA: mail is waiting; woken once its session is idle\n" in started
    socket = socket_of(root)
    wait_for(lambda: WAKE_TEXT in pane_text(socket, "swarmforge-QA"), timeout=30,
             what="the wake-up in QA's new session")  # fmt: skip
    log = (root / ".swarmforge" / "daemon" / "handoffd.log").read_text()
    assert '"renotify"' not in log


# --- down ---------------------------------------------------------------------------------


def test_down_stops_the_daemon_and_the_tmux_server_and_leaves_no_process(root: Path) -> None:
    up(root)
    socket = socket_of(root)
    pids = swarm_pids(root)
    assert all(alive(pid) for pid in pids.values())
    assert len(processes_touching(str(root), socket)) >= 3  # the check sees a running swarm
    result = handoffd("down", str(root))
    assert result.returncode == 0, result.stderr
    assert f"daemon: stopped pid {pids['daemon']}" in result.stdout
    assert "tmux server: stopped" in result.stdout
    wait_for(
        lambda: not [name for name, pid in pids.items() if alive(pid)],
        what="the daemon, the tmux server and every agent to end",
    )
    assert not server_answers(socket)
    assert not os.path.lexists(socket), "the dead server's socket file is left behind"
    assert lifecycle.holder(str(root)) is None
    assert not (root / ".swarmforge" / "daemon" / "handoffd.pid").exists()
    assert processes_touching(str(root), socket) == []


def test_down_twice_is_fine(root: Path) -> None:
    up(root)
    assert handoffd("down", str(root)).returncode == 0
    again = handoffd("down", str(root))
    assert again.returncode == 0, again.stderr
    assert "daemon: was not running" in again.stdout
    assert "tmux server: was not running" in again.stdout


def test_down_on_a_project_never_brought_up_is_fine(root: Path) -> None:
    result = handoffd("down", str(root))
    assert result.returncode == 0, result.stderr
    assert "was not running" in result.stdout


def test_down_leaves_every_other_tmux_server_alone(root: Path) -> None:
    with other_tmux_server() as other:
        up(root)
        assert handoffd("down", str(root)).returncode == 0
        wait_for(lambda: not server_answers(socket_of(root)), what="the project's server to end")
        assert sessions(other) == ["bystander"]


def test_up_again_after_down_brings_the_whole_swarm_back(root: Path) -> None:
    up(root)
    assert handoffd("down", str(root)).returncode == 0
    output = up(root)
    assert "started: swarmforge-coder, swarmforge-cleaner" in output
    assert sessions(socket_of(root)) == SESSIONS
    assert lifecycle.holder(str(root)) is not None


# --- mistakes -----------------------------------------------------------------------------


def test_up_outside_a_project_says_to_run_init_without_a_traceback(tmp_path: Path) -> None:
    result = handoffd("up", str(tmp_path))
    assert result.returncode != 0
    assert "handoffd init" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_agent_that_is_not_installed_is_reported_before_anything_starts(root: Path) -> None:
    result = handoffd("up", *AGENTS, "--agent", "probe-cat=no-such-agent --flag", str(root))
    assert result.returncode == 1
    assert "cleaner" in result.stderr
    assert "no-such-agent" in result.stderr
    assert "Traceback" not in result.stderr
    assert not server_answers(socket_of(root))
    assert lifecycle.holder(str(root)) is None


def test_an_agent_command_may_start_with_variable_assignments(root: Path) -> None:
    assign = (
        "--agent",
        "probe-cat=GREETING=hello sh -c 'echo $GREETING from $SWARMFORGE_ROLE; exec cat'",
    )
    result = handoffd("up", *AGENTS[:2], *assign, str(root))
    assert result.returncode == 0, result.stderr
    wait_for(
        lambda: "hello from cleaner" in pane_text(socket_of(root), "swarmforge-cleaner"),
        what="the agent to see its variable",
    )


def test_a_missing_worktree_is_reported_before_anything_starts(root: Path) -> None:
    git(root, "worktree", "remove", ".worktrees/cleaner")
    result = handoffd("up", *AGENTS, str(root))
    assert result.returncode == 1
    assert str(worktree(root, "cleaner")) in result.stderr
    assert "handoffd init" in result.stderr
    assert not server_answers(socket_of(root))


def test_an_agent_option_without_a_command_is_refused(root: Path) -> None:
    result = handoffd("up", "--agent", "probe-sh", str(root))
    assert result.returncode == 2
    assert "NAME=COMMAND" in result.stderr
    assert not server_answers(socket_of(root))


def test_up_refuses_a_socket_folder_others_can_write(tmp_path: Path) -> None:
    """Whoever can write the socket's folder could stand in for the server and type into
    every agent's session."""
    from handoffd.daemon.swarm import _private_dir

    shared = tmp_path / "sockets"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(RuntimeError, match="private"):
        _private_dir(str(shared))
    shared.chmod(0o700)
    _private_dir(str(shared))  # ours alone: accepted


# --- up says what it did (a newcomer's first hour) ----------------------------------------


def test_up_says_it_started_the_daemon_and_then_that_it_found_it_running(root: Path) -> None:
    first = up(root)
    assert f"daemon: started (pid {daemon_pid(root)})\n" in first
    again = up(root)
    assert f"daemon: already running (pid {daemon_pid(root)})\n" in again


def test_up_with_an_agent_that_exits_at_once_says_which_died_and_how(root: Path) -> None:
    # The agent lingers a moment after its last words, as a real one does (node starting,
    # then failing): one that writes and exits in one breath can leave tmux a dead pane
    # with nothing on it (seen once under load), and then `up` has no output to show.
    dying = ("--agent", "probe-cat=sh -c 'echo no API key; sleep 0.3; exit 3'")
    result = handoffd("up", *AGENTS[:2], *dying, str(root))
    assert result.returncode == 1
    # tmux sometimes marks a pane dead without the status of an agent that exited this fast
    died = re.search(r"^DIED: swarmforge-cleaner: its agent exited at once \(exit status "
                     r"(3|unknown); last output: no API key\)$", result.stderr, re.M)  # fmt: skip
    assert died, result.stderr
    assert "swarmforge-coder" not in result.stderr
    assert sessions(socket_of(root)) == ["swarmforge-coder"]  # the dead one is cleared away
    assert "fix their command lines (--agent NAME=COMMAND)" in result.stderr


def test_a_session_whose_agent_exits_later_is_started_again_by_the_next_up(root: Path) -> None:
    up(root)
    socket = socket_of(root)
    tmux(socket, "respawn-pane", "-k", "-t", "=swarmforge-cleaner:", "exit 0")
    assert tmux(socket, "show-options", "-gv", "remain-on-exit").stdout.strip() == "off"
    again = up(root)
    assert "started: swarmforge-cleaner" in again
    assert sessions(socket) == SESSIONS


def test_an_agent_name_that_no_role_has_is_an_error_naming_the_known_agents(
    root: Path,
) -> None:
    result = handoffd("up", *AGENTS, "--agent", "shel=vim", str(root))
    assert result.returncode == 1
    assert result.stderr == (
        "Error: --agent shel: no role in roles.tsv has the agent 'shel' and it is not built "
        "in; known agents: demo, probe-cat, probe-sh, shell\n"
    )
    assert not server_answers(socket_of(root))


def test_up_on_one_host_of_several_starts_and_lists_only_its_roles(tmp_path: Path) -> None:
    """The other host's role is named with its host, never given an attach line for a
    session that does not exist here, nor an MCP file in its placeholder worktree; and the
    same `--agent` options serve every host (its agent is known, though it runs there)."""
    text = "project t\nnats nats://127.0.0.1:1\nhost a\n" + CONFIG.splitlines()[0] + "\n"
    text += "host b\n" + CONFIG.splitlines()[1] + "\n"
    conf = tmp_path / "swarm.conf"
    conf.write_text(text)
    root = tmp_path.resolve() / "a"
    root.mkdir()
    project.init(str(root), project.parse_swarm(text, "conf").windows, text, "a", ["a", "b"])
    try:
        result = handoffd("up", *AGENTS, "--mcp", str(root))
        assert result.returncode == 0, result.stderr
        assert sessions(socket_of(root)) == ["swarmforge-coder"]
        assert re.search(r"^  coder +tmux -S .* attach -t =swarmforge-coder$", result.stdout,
                         re.M)  # fmt: skip
        assert re.search(r"^  cleaner +on host b \(`handoffd up` there\)$", result.stdout, re.M)
        assert "swarmforge-cleaner" not in result.stdout
        assert not (root / ".swarmforge" / "remote").exists()
    finally:
        take_down(root)


def test_a_plain_up_reuses_the_agents_an_earlier_up_was_given_and_says_so(root: Path) -> None:
    """`up --agent` keeps each agent's command line beside the conf (never under ~); the
    next plain `up` starts with it and says where it came from (docs/protocol.md §16)."""
    up(root)
    kept = (root / ".swarmforge" / "agents.tsv").read_text()
    assert "probe-sh\tsh -c " in kept and "probe-cat\tsh -c " in kept
    assert handoffd("down", str(root)).returncode == 0
    again = handoffd("up", str(root))
    assert again.returncode == 0, again.stderr
    said = [line for line in again.stdout.splitlines() if "agent from" in line]
    assert sorted(said) == sorted([
        f"cleaner: agent from .swarmforge/agents.tsv: sh -c '{SEEN}; exec cat' probe",
        f"coder: agent from .swarmforge/agents.tsv: sh -c '{SEEN}; exec sh' probe",
    ])  # fmt: skip
    assert sorted(sessions(socket_of(root))) == SESSIONS
    excluded = git(root, "rev-parse", "--git-common-dir").strip()
    assert ".swarmforge/agents.tsv" in (root / excluded / "info" / "exclude").read_text()


def test_a_planted_agents_file_is_read_the_careful_way(tmp_path: Path) -> None:
    from handoffd.daemon import agents

    folder = tmp_path / ".swarmforge"
    folder.mkdir()
    (folder / "agents.tsv").write_text("ok\tsleep 1\nbad name\tx\nctl\tx\x1b[2J\nnotab\n")
    assert agents.load(str(tmp_path)) == {"ok": "sleep 1"}
    (folder / "agents.tsv").unlink()
    os.mkfifo(folder / "agents.tsv")
    assert agents.load(str(tmp_path)) == {}  # a FIFO is never opened for reading
