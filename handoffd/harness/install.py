"""Where each harness reads handoffd's hooks and MCP server (docs/protocol.md §16), and what
`up` adds to a role's session for it.

- Claude Code reads hooks from the worktree's `.claude/settings.local.json` and MCP servers
  from its `.mcp.json`: both are merged by key (`settings.update`), handoffd's own hook
  entries recognised by their command and replaced, never added twice.
- Codex takes both on its command line (`-c` overrides): nothing is written into
  `~/.codex`.  It runs `--no-daemon` where its release takes it (`releases`): Codex 0.171
  otherwise runs every session's commands in one shared background server, with the
  environment of whichever session started it, so a second role's agent would act as the
  first role; Codex 0.150 knows no such flag and exits on it.  Its hooks are not installed:
  Codex runs hooks given on its command line only once trusted, which is stored in
  `~/.codex` or skipped for every hook at once; its `notify` program needs no trust.

A login shell's profile resets `PATH` (Codex runs commands with `bash -lc`), so the
session also gets `BASH_ENV`: a file bash reads after the profile, which puts the shims
and commands back in front of `PATH` (and reads the user's own `BASH_ENV` after).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from importlib import resources

from handoffd.core.config import Role
from handoffd.harness import profiles, settings

BIN = os.path.dirname(sys.executable)
HANDOFFD = os.path.join(BIN, "handoffd")
HOOKS_FILE = os.path.join(".claude", "settings.local.json")
MCP_FILE = ".mcp.json"
MCP_NAME = "handoffd"
CLAUDE_EVENTS = {"Stop": "stop", "SessionStart": "session-start", "PreCompact": "pre-compact"}
PATH_FILE = "path.bash"  # beside this module: what BASH_ENV names


def hook_command(root: str, event: str) -> str:
    """The command line a harness runs for `event`."""
    return f"{shlex.quote(HANDOFFD)} hook {event} --root {shlex.quote(root)}"


def ours(command: object) -> bool:
    """Whether a hook entry's command is one `hook_command` writes, word for word, whichever
    install and root it names (a moved project's is replaced).  Anything more around it
    (`cd x && … hook stop`, a wrapper) is the user's own and kept."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a line we write
        return False
    return (len(words) == 5 and os.path.basename(words[0]) == "handoffd"
            and words[1] == "hook" and words[2] in CLAUDE_EVENTS.values()
            and words[3] == "--root")  # fmt: skip


def merge_hooks(found: dict[str, object], root: str | None) -> None:
    """Claude Code's settings with handoffd's three hooks in (for `root`), or out (None):
    every other hook and setting as it was, handoffd's own entries replaced, so running
    this twice changes nothing.  A hooks value of a shape Claude Code would not read
    either is refused (`settings.Unusable`), never rewritten."""
    hooks = found.get("hooks", {})
    if not isinstance(hooks, dict):
        raise settings.Unusable("its `hooks` is not an object; left alone")
    for event, name in CLAUDE_EVENTS.items():
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise settings.Unusable(f"its `hooks.{event}` is not a list; left alone")
        kept = [group for group in (_without_ours(g) for g in groups) if group is not None]
        if root is not None:
            kept.append({"hooks": [{"type": "command", "command": hook_command(root, name)}]})
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
    if hooks:
        found["hooks"] = hooks
    else:
        found.pop("hooks", None)


def _without_ours(group: object) -> object | None:
    """A hook group less handoffd's entries; None when nothing else was in it."""
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return group
    entries = [e for e in group["hooks"] if not (isinstance(e, dict) and ours(e.get("command")))]
    if not entries and group["hooks"]:
        return None
    return {**group, "hooks": entries}


def install_hooks(root: str, role: Role, remove: bool = False) -> str:
    """Install (or remove) the role's hooks where its harness reads them; what was done,
    in words.  Raises `settings.Unusable` for a settings file left alone."""
    path = os.path.join(role.worktree, HOOKS_FILE)
    wanted = None if remove else root
    changed = settings.update(role.worktree, HOOKS_FILE, lambda found: merge_hooks(found, wanted))
    return f"{'changed' if changed else 'unchanged'}: {path}"


def mcp_entry(root: str, role: Role) -> dict[str, object]:
    """The server entry that serves the role's tools (docs/protocol.md §12)."""
    return {"command": HANDOFFD, "args": ["mcp", "--root", root],
            "env": {"SWARMFORGE_ROLE": role.name}}  # fmt: skip


def write_mcp_config(root: str, role: Role) -> str:
    """Register the server in the role's worktree `.mcp.json` (other servers kept), and
    for Claude Code approve it in the worktree's local settings (else it asks)."""

    def register(found: dict[str, object]) -> None:
        servers = found.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise settings.Unusable("its `mcpServers` is not an object; left alone")
        servers[MCP_NAME] = mcp_entry(root, role)

    settings.update(role.worktree, MCP_FILE, register)
    return os.path.join(role.worktree, MCP_FILE)


def approve_mcp(role: Role) -> None:
    """Let Claude Code start the `.mcp.json` server without asking (the local settings'
    `enabledMcpjsonServers`, other names kept)."""

    def approve(found: dict[str, object]) -> None:
        names = found.setdefault("enabledMcpjsonServers", [])
        if not isinstance(names, list):
            raise settings.Unusable("its `enabledMcpjsonServers` is not a list; left alone")
        if MCP_NAME not in names:
            names.append(MCP_NAME)

    settings.update(role.worktree, HOOKS_FILE, approve)


def codex_arguments(root: str, role: Role, mcp: bool,
                    accepts: frozenset[str] = frozenset()) -> list[str]:  # fmt: skip
    """What `up` adds to Codex's command line: its own server per session (when its
    release `accepts` `--no-daemon`), the notify program, and with `mcp` handoffd's MCP
    server (`-c` values are TOML; a JSON string or list of strings is one)."""
    notify = [HANDOFFD, "hook", "stop", "--root", root]
    args = ["--no-daemon"] if "--no-daemon" in accepts else []
    args += ["-c", f"notify={toml(notify)}"]
    if mcp:
        entry, key = mcp_entry(root, role), f"mcp_servers.{MCP_NAME}"
        env = f"{{SWARMFORGE_ROLE = {toml(role.name)}}}"  # a TOML inline table
        for value in (f"command={toml(entry['command'])}",
                      f"args={toml(entry['args'])}", f"env={env}"):  # fmt: skip
            args += ["-c", f"{key}.{value}"]
    return args


def toml(value: object) -> str:
    """A string or a list of strings as TOML: JSON's text but for what TOML reads
    otherwise.  `ensure_ascii` would write a character past U+FFFF (an emoji in the
    project's path) as a surrogate pair of escapes, which TOML refuses; TOML also refuses
    a raw DEL, which JSON leaves as it is."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def arguments(harness: str, root: str, role: Role, mcp: bool,
              accepts: frozenset[str] = frozenset()) -> str:  # fmt: skip
    """The words `up` puts after the harness's program on the session's command line; of
    the optional ones (`releases.OPTIONAL`), those its release `accepts`."""
    if harness == profiles.CODEX:
        return " ".join(shlex.quote(arg) for arg in codex_arguments(root, role, mcp, accepts))
    return ""


def path_file() -> str:
    return str(resources.files("handoffd").joinpath("harness", PATH_FILE))


def login_environment(path: str) -> dict[str, str]:
    """What makes `path` (the shims and commands, before the rest) survive a login shell's
    profile: BASH_ENV, read by bash after the profile, and what it needs to know."""
    env = {"BASH_ENV": path_file(), "HANDOFFD_PATH": path}
    theirs = os.environ.get("BASH_ENV")
    if theirs and theirs != env["BASH_ENV"]:
        env["HANDOFFD_BASH_ENV"] = theirs
    return env
