"""Where `handoffd up` and `handoffd hooks` put what the harnesses read (docs/protocol.md §16):
Claude Code's hooks merged into the worktree's `.claude/settings.local.json` (a hostile file,
like everything in a worktree), Codex's on its command line, and nothing anywhere else."""

from __future__ import annotations

import json
import os
import shlex
import stat
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.core import config
from handoffd.daemon import swarm
from handoffd.harness import install, pane, settings
from tests.conftest import plant
from tests.swarm_support import calls, command_env, handoffd, socket_of, stand_in, take_down

CONFIG = "window coder claude master task\nwindow cleaner codex cleaner task\n"
# stand-ins: the harnesses' names, a plain program in their panes (no model is asked here)
AGENTS = ("--agent", "claude=sh -c 'exec cat'", "--agent", "codex=sh -c 'exec cat'",
          "--check-after", "0")  # fmt: skip
THEIRS = {
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-me --done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
    },
}


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path.resolve() / "p"
    conf = tmp_path / "swarm.conf"
    conf.write_text(CONFIG)
    assert handoffd("init", "--config", str(conf), str(root)).returncode == 0
    yield root
    take_down(root)


def local_settings(root: Path) -> Path:
    return root / ".claude" / "settings.local.json"


def ours(root: Path, event: str) -> str:
    return f"{shlex.quote(install.HANDOFFD)} hook {event} --root {shlex.quote(str(root))}"


def test_up_merges_claude_codes_hooks_into_the_local_settings_keeping_every_other_entry(
    root: Path,
) -> None:
    local_settings(root).parent.mkdir()
    local_settings(root).write_text(json.dumps(THEIRS))
    first = handoffd("up", *AGENTS, str(root))
    assert first.returncode == 0, first.stderr
    assert f"hooks: coder: changed: {local_settings(root)}" in first.stdout
    merged = json.loads(local_settings(root).read_text())
    assert merged["permissions"] == THEIRS["permissions"]
    assert merged["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]
    entry = {"hooks": [{"type": "command", "command": ours(root, "stop")}]}
    assert merged["hooks"]["Stop"] == [*THEIRS["hooks"]["Stop"], entry]
    for event, name in (("SessionStart", "session-start"), ("PreCompact", "pre-compact")):
        assert merged["hooks"][event] == [{"hooks": [{"type": "command",
                                                      "command": ours(root, name)}]}]  # fmt: skip
    before = local_settings(root).read_bytes()
    again = handoffd("up", *AGENTS, str(root))
    assert f"hooks: coder: unchanged: {local_settings(root)}" in again.stdout
    assert local_settings(root).read_bytes() == before  # never a second entry
    status = handoffd("status", str(root)).stdout  # kept out of git, and named on the board
    assert "claude" in status and "codex" in status


def test_hooks_remove_takes_out_handoffds_entries_only_and_hooks_puts_them_back(root: Path) -> None:
    local_settings(root).parent.mkdir()
    local_settings(root).write_text(json.dumps(THEIRS))
    assert handoffd("hooks", str(root)).returncode == 0
    removed = handoffd("hooks", "--remove", str(root))
    assert removed.returncode == 0 and "hooks: coder: changed" in removed.stdout
    assert "Codex takes its notify program on its command line" in removed.stdout
    assert json.loads(local_settings(root).read_text()) == THEIRS
    assert handoffd("hooks", "--role", "coder", str(root)).returncode == 0
    assert ours(root, "stop") in local_settings(root).read_text()
    unknown = handoffd("hooks", "--role", "nobody", str(root))
    assert unknown.returncode == 1 and "Unknown role: nobody" in unknown.stderr


def test_a_settings_file_that_is_not_json_is_left_alone_and_up_says_so_in_one_line(
    root: Path,
) -> None:
    local_settings(root).parent.mkdir()
    local_settings(root).write_bytes(b"{ mine, not json\n")
    result = handoffd("up", *AGENTS, str(root))
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stdout.splitlines() if line.startswith("hooks: coder")]
    assert said.startswith(f"hooks: coder: not installed: {local_settings(root)} is not valid JSON")
    assert said.endswith("left alone")
    assert local_settings(root).read_bytes() == b"{ mine, not json\n"


def test_a_settings_file_nested_past_the_parsers_depth_is_left_alone(root: Path) -> None:
    """JSON nested deeper than the parser goes raises RecursionError, not ValueError: it is
    a settings file left alone like any other that is not JSON, never a traceback of `up`."""
    local_settings(root).parent.mkdir()
    local_settings(root).write_bytes(b"[" * 200000)
    with pytest.raises(settings.Unusable, match="nested too deep to read; left alone"):
        install.install_hooks(str(root), config.load_roles(str(root))["coder"])
    assert local_settings(root).read_bytes() == b"[" * 200000


def test_a_new_settings_file_is_the_owners_alone_and_an_old_one_keeps_its_mode(
    root: Path,
) -> None:
    role = config.load_roles(str(root))["coder"]
    install.install_hooks(str(root), role)
    assert stat.S_IMODE(os.stat(local_settings(root)).st_mode) == 0o600
    os.chmod(local_settings(root), 0o640)
    install.install_hooks(str(root), role, remove=True)
    assert stat.S_IMODE(os.stat(local_settings(root)).st_mode) == 0o640


@pytest.mark.parametrize("what", ["fifo", "device", "link"])
def test_a_hostile_settings_file_is_never_opened_followed_or_replaced(
    root: Path, tmp_path: Path, what: str
) -> None:
    target = plant(local_settings(root), what, tmp_path)
    started = time.monotonic()
    with pytest.raises(settings.Unusable, match="left alone"):
        install.install_hooks(str(root), config.load_roles(str(root))["coder"])
    assert time.monotonic() - started < 2
    assert not local_settings(root).is_file() or local_settings(root).is_symlink()
    assert target is None or stat.S_ISFIFO(os.lstat(target).st_mode)


def test_a_linked_claude_folder_is_never_written_through(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / ".claude").symlink_to(outside)
    with pytest.raises(settings.Unusable, match="left alone"):
        install.install_hooks(str(root), config.load_roles(str(root))["coder"])
    assert os.listdir(outside) == []


def test_a_huge_settings_file_is_left_alone(root: Path) -> None:
    local_settings(root).parent.mkdir()
    with open(local_settings(root), "wb") as file:
        file.truncate(settings.LIMIT + 1)  # sparse: nothing is written to disk
    with pytest.raises(settings.Unusable, match="larger than"):
        install.install_hooks(str(root), config.load_roles(str(root))["coder"])
    assert os.path.getsize(local_settings(root)) == settings.LIMIT + 1


def test_a_hard_link_to_the_settings_file_is_never_written_through(
    root: Path, tmp_path: Path
) -> None:
    local_settings(root).parent.mkdir()
    local_settings(root).write_text(json.dumps(THEIRS))
    other = tmp_path / "someone-elses.json"
    os.link(local_settings(root), other)
    install.install_hooks(str(root), config.load_roles(str(root))["coder"])
    assert json.loads(other.read_text()) == THEIRS
    assert ours(root, "stop") in local_settings(root).read_text()


def test_codex_gets_its_own_server_notify_and_mcp_on_its_command_line_and_nothing_in_its_home(
    root: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    codex = stand_in(tmp_path / "bin", "codex", "0.171.0", no_daemon=True)
    agents = (*AGENTS, "--agent", f"codex={codex}")
    result = handoffd("up", *agents, "--mcp", str(root), env=command_env(HOME=str(home)))
    assert result.returncode == 0, result.stderr
    assert "release: cleaner: codex 0.171.0\n" in result.stdout
    started = pane_field(root, "swarmforge-cleaner", "#{pane_start_command}")
    words = shlex.split(shlex.split(started)[0])  # tmux shows the command line quoted
    assert words[:2] == ["exec", "env"] and "--no-daemon" in words
    after = words[words.index("--no-daemon") :]  # what handoffd added after the program
    values = [after[i + 1] for i, word in enumerate(after) if word == "-c"]
    parsed = [tomllib.loads(value.replace("=", " = ", 1)) for value in values]
    assert parsed[0] == {"notify": [install.HANDOFFD, "hook", "stop", "--root", str(root)]}
    server = {k: v for p in parsed[1:] for k, v in p["mcp_servers"]["handoffd"].items()}
    assert server == {"command": install.HANDOFFD, "args": ["mcp", "--root", str(root)],
                      "env": {"SWARMFORGE_ROLE": "cleaner"}}  # fmt: skip
    assert os.listdir(home) == []  # nothing under ~/.codex, nor ~/.claude*
    assert not (root / ".worktrees" / "cleaner" / ".claude").exists()
    recorded = pane.read(socket_of(root), "swarmforge-cleaner", 10)
    assert (recorded.harness, recorded.version) == ("codex", "0.171.0")


def test_a_codex_release_without_no_daemon_starts_without_it_and_help_is_asked_once(
    root: Path, tmp_path: Path
) -> None:
    """Codex 0.150 exits at once on `--no-daemon` (`up` used to say DIED: fix their command
    lines, of a command line that was fine): `up` asks the release first, passes only what
    it takes, says what it left out, and records the release for `status`."""
    codex = stand_in(tmp_path / "bin", "codex", "0.150.0", no_daemon=False)
    agents = (*AGENTS[:-2], "--agent", f"codex=env HOME={tmp_path} {codex}")
    result = handoffd("up", *agents, str(root))
    assert result.returncode == 0, result.stderr
    assert "DIED" not in result.stderr
    assert ("release: cleaner: codex 0.150.0; not passed: --no-daemon (this release does not "
            "take it)") in result.stdout.splitlines()  # fmt: skip
    started = pane_field(root, "swarmforge-cleaner", "#{pane_start_command}")
    assert "--no-daemon" not in started and "notify=" in started
    assert pane_field(root, "swarmforge-cleaner", "#{pane_dead}") == "0"
    assert pane.read(socket_of(root), "swarmforge-cleaner", 10).version == "0.150.0"
    take_down(root)
    assert handoffd("up", *agents, str(root)).returncode == 0
    asked = [words for words in calls(codex) if words in ("--version", "--help")]
    assert asked == ["--version", "--help", "--version"]  # its help once: cached by release


def test_codexs_command_line_values_are_toml_for_any_project_path() -> None:
    """`-c` values are TOML: a path with a character past U+FFFF (JSON's surrogate pair
    of escapes, which TOML refuses) or a DEL (raw in JSON, refused by TOML) is still read
    back as the very path, so Codex gets its notify program and MCP server."""
    root = '/tmp/proj \U0001f600 caf\u00e9 \x7f "q" \\ \x1b'
    role = config.Role("cleaner", "cleaner", root)
    args = install.codex_arguments(root, role, mcp=True)
    values = [args[i + 1] for i, word in enumerate(args) if word == "-c"]
    parsed = [tomllib.loads(value.replace("=", " = ", 1)) for value in values]
    assert parsed[0] == {"notify": [install.HANDOFFD, "hook", "stop", "--root", root]}
    server = {k: v for p in parsed[1:] for k, v in p["mcp_servers"]["handoffd"].items()}
    assert server == {"command": install.HANDOFFD, "args": ["mcp", "--root", root],
                      "env": {"SWARMFORGE_ROLE": "cleaner"}}  # fmt: skip


def test_a_conf_harness_line_overrides_the_agents_name(root: Path, tmp_path: Path) -> None:
    conf = tmp_path / "swarm.conf"
    conf.write_text(CONFIG + "harness cleaner generic\n")
    assert handoffd("init", "--config", str(conf), str(root)).returncode == 0
    assert handoffd("up", *AGENTS, str(root)).returncode == 0
    assert "--no-daemon" not in pane_field(root, "swarmforge-cleaner", "#{pane_start_command}")
    assert pane.read(socket_of(root), "swarmforge-cleaner", 10).harness == "generic"
    conf.write_text(CONFIG + "harness cleaner vim\n")
    bad = handoffd("init", "--config", str(conf), str(root))
    assert bad.returncode == 1 and "expected 'harness <role> claude|codex|generic'" in bad.stderr


def test_up_with_a_harness_missing_from_path_says_which_command_it_could_not_find(
    root: Path,
) -> None:
    env = command_env(PATH=os.path.dirname(install.HANDOFFD) + ":/usr/bin:/bin")
    result = handoffd("up", "--agent", "codex=env HOME=/nowhere /opt/no/codex", str(root), env=env)
    assert result.returncode == 1
    assert "the agent of role coder is not installed: claude not found" in result.stderr
    result = handoffd("up", "--agent", "claude=sh", "--agent",
                      "codex=env HOME=/nowhere /opt/no/codex", str(root), env=env)  # fmt: skip
    assert "the agent of role cleaner is not installed: /opt/no/codex not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_session_environment_finds_the_helpers_after_a_login_profile(root: Path) -> None:
    role = config.load_roles(str(root))["cleaner"]
    env = swarm.session_environment(role)
    assert env["BASH_ENV"] == install.path_file() and os.path.isfile(env["BASH_ENV"])
    assert env["HANDOFFD_PATH"].split(os.pathsep) == [swarm.shims_dir(), swarm.BIN]


def pane_field(root: Path, session: str, field: str) -> str:
    from tests.swarm_support import pane as read

    return read(socket_of(root), session, field)


@pytest.mark.parametrize(
    ("command", "mine"),
    [("/v/bin/handoffd hook stop --root /p", True),
     ("'/my venv/bin/handoffd' hook pre-compact --root '/a project'", True),
     ("/old/bin/handoffd hook session-start --root /moved", True),
     ("cd /p && /v/bin/handoffd hook stop --root /p", False),
     ("/v/bin/handoffd hook stop --root /p; curl x | sh", False),
     ("/v/bin/notify-handoffd hook stop --root /p", False),
     ("/v/bin/handoffd hook stop", False), ("/v/bin/handoffd hook lint --root /p", False),
     ("echo 'unbalanced", False), (["handoffd", "hook", "stop"], False)],
)  # fmt: skip
def test_only_the_line_handoffd_writes_counts_as_its_hook_and_anything_around_it_is_kept(
    command: object, mine: bool
) -> None:
    """`up` and `hooks` replace handoffd's own entries (whichever install and root they
    name) and keep every other: a user's command that merely mentions `handoffd hook stop`
    is theirs."""
    assert install.ours(command) is mine
    group = {"hooks": [{"type": "command", "command": command}]}
    found: dict[str, object] = {"hooks": {"Stop": [group]}}
    install.merge_hooks(found, None)
    assert found == ({} if mine else {"hooks": {"Stop": [group]}})
