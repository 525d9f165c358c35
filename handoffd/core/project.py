"""Laying out a project: the swarm configuration, git worktrees, handoff folders, roles.tsv.

A swarm configuration has one role per line:

    window <role> <agent> <worktree> [task|batch] [extra agent arguments...]

and, for a swarm over several machines (docs/protocol.md §15), `project <name>`,
`nats <url>[,<url>...]`, `nats-creds <file>`, `nats-tls-ca <file>` and `host <name>`
lines: every `window` after a `host` line lives on that host; `harness <role>
claude|codex|generic`, which names the harness a role's agent is (docs/protocol.md §16);
`budget <role|pool> <tokens> per <hour|day>`, the tokens a role may spend (§19);
and `pool <role> <n> <agent> [task|batch] [agent arguments...]`, n members `<role>-1` …
`<role>-<n>` behind one role (docs/protocol.md §17).

`init` turns it into the layout docs/protocol.md §1 describes.  It is idempotent: what
exists and is right is left alone, so running it twice changes nothing, and it keeps
the configuration it was given in .swarmforge/swarmforge.conf.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from handoffd.core import config, durable, safeio, tokens
from handoffd.core.config import Box

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

SAMPLE = "swarmforge.conf"
MAIN_WORKTREE = "master"  # the project checkout itself
CONF_LIMIT = 1024 * 1024  # bytes: never read more of a swarm configuration under .swarmforge/
_NOT_IN_BRANCH = frozenset(" ~^:?*[\\")
BOXES = (Box.DRAFTS, Box.SENT, Box.FAILED, Box.NEW, Box.IN_PROCESS, Box.COMPLETED)
# Runtime state, never committed; every worktree writes its own live file HANDOFF.md.
EXCLUDES = (".worktrees/", ".swarmforge/roles.tsv", ".swarmforge/tmux-socket",
            ".swarmforge/daemon/", ".swarmforge/handoffs/", ".swarmforge/HANDOFF.md",
            ".swarmforge/host", ".swarmforge/pools/", ".swarmforge/releases.json",
            ".swarmforge/operator/", ".swarmforge/agents.tsv")  # fmt: skip
# Where a remote role's worktree column points: a path under the project that nothing
# here ever creates or reads (the role's real worktree is on its own host).
REMOTE = os.path.join(config.SWARMFORGE, "remote")
SETTINGS = ("project", "nats", "nats-creds", "nats-tls-ca")
HARNESSES = ("claude", "codex", "generic")  # docs/protocol.md §16


class SwarmConfigError(Exception):
    """A swarm configuration that cannot be laid out; names the file and line."""


@dataclass(frozen=True)
class Window:
    """One role of the swarm configuration."""

    role: str
    agent: str
    worktree: str
    mode: str = "task"
    args: tuple[str, ...] = field(default=())
    host: str = ""  # the `host` line above it; empty: before any, this host
    pool: str = ""  # the pool it is a member of (docs/protocol.md §17); empty: none

    def worktree_path(self, root: str) -> str:
        if self.worktree == MAIN_WORKTREE:
            return root
        return os.path.join(root, ".worktrees", self.worktree)

    def local(self, here: str) -> bool:
        return not self.host or self.host == here


@dataclass
class Swarm:
    """A whole swarm configuration: its roles, and how its hosts reach each other."""

    windows: list[Window]
    hosts: list[str] = field(default_factory=list)  # declared by `host` lines, in order
    settings: dict[str, str] = field(default_factory=dict)  # project, nats, nats-creds…
    harnesses: dict[str, str] = field(default_factory=dict)  # `harness <role> <name>` lines
    pools: dict[str, Window] = field(default_factory=dict)  # each pool's own row, by name
    budgets: dict[str, tokens.Budget] = field(default_factory=dict)  # `budget` lines (§19)

    @property
    def urls(self) -> list[str]:
        return [url for url in self.settings.get("nats", "").split(",") if url]

    def remote_windows(self, here: str) -> list[Window]:
        return [window for window in self.windows if not window.local(here)]


def sample_text() -> str:
    """The embedded sample configuration (a coder in task mode, a cleaner in batch mode)."""
    from importlib import resources  # not at the top: `status` reads this module's parser

    return resources.files("handoffd").joinpath("samples", SAMPLE).read_text(encoding="utf-8")


def parse(text: str, source: str) -> list[Window]:
    """Parse and validate a swarm configuration's roles; every error names its line."""
    return parse_swarm(text, source).windows


def parse_swarm(text: str, source: str) -> Swarm:
    """Parse and validate a whole swarm configuration; every error names its line."""
    swarm = Swarm([])
    host = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source}:{number}"
        try:
            words = shlex.split(line, comments=True)  # a trailing `# note` is not an argument
        except ValueError as error:
            raise SwarmConfigError(f"{where}: {error}") from None
        if words and words[0] == "host":
            host = _host_line(words, swarm, where)
        elif words and words[0] in SETTINGS:
            _setting(words, swarm, where)
        elif words and words[0] == "harness":
            _harness_line(words, swarm, where)
        elif words and words[0] == "budget":
            _budget_line(words, line, swarm, where)
        elif words and words[0] == "pool":
            for member in _pool_line(words, swarm, where, host):
                _check_unique(member, swarm.windows, where)
                swarm.windows.append(member)
        else:
            window = _window(words, where, host)
            _check_unique(window, swarm.windows, where)
            swarm.windows.append(window)
    if not swarm.windows:
        raise SwarmConfigError(f"{source}: no roles; add lines 'window <role> <agent> <worktree>'")
    _pool_harnesses(swarm)
    unknown = sorted(set(swarm.harnesses) - {window.role for window in swarm.windows})
    if unknown:
        raise SwarmConfigError(f"{source}: `harness` names no role of the swarm: {unknown[0]}")
    names = {window.role for window in swarm.windows} | set(swarm.pools)
    unbudgeted = sorted(set(swarm.budgets) - names)
    if unbudgeted:
        raise SwarmConfigError(
            f"{source}: `budget` names no role or pool of the swarm: {unbudgeted[0]}"
        )
    if swarm.urls and "project" not in swarm.settings:
        raise SwarmConfigError(
            f"{source}: a `nats` line needs a `project <name>` line: the stream and subjects "
            "the hosts share are named after the project"
        )
    return swarm


def _pool_line(words: list[str], swarm: Swarm, where: str, host: str) -> list[Window]:
    """`pool <role> <n> <agent> [task|batch] [agent args...]`: its members' windows, each
    with a worktree of its own named after it; the pool's own row kept in `swarm.pools`."""
    shape = "'pool <role> <n> <agent> [task|batch] [agent args...]'"
    if len(words) < 4:
        raise SwarmConfigError(f"{where}: expected {shape}")
    _, role, size, *rest = words
    if not size.isdigit() or not 2 <= int(size) <= 32:
        raise SwarmConfigError(
            f"{where}: pool '{role}' has {size!r} members: a pool has 2 to 32 (one agent is "
            "a `window`; more than 32 is more than one daemon's waker is built for)"
        )
    earlier = swarm.pools.get(role)
    if earlier is not None and earlier.host != host:
        raise SwarmConfigError(
            f"{where}: pool '{role}' is split across host sections ({earlier.host or 'none'} "
            f"and {host or 'none'}): all members of a pool live on one host, which claims "
            "by rename need"
        )
    if earlier is not None:
        raise SwarmConfigError(f"{where}: pool '{role}' is defined twice")
    own = _window(["window", role, rest[0], role, *rest[1:]], where, host)
    if any(window.role == role for window in swarm.windows):
        raise SwarmConfigError(f"{where}: role '{role}' is defined twice")
    swarm.pools[role] = own
    return [
        Window(f"{role}-{k}", own.agent, f"{role}-{k}", own.mode, own.args, host, role)
        for k in range(1, int(size) + 1)
    ]


def _pool_harnesses(swarm: Swarm) -> None:
    """A `harness` line naming a pool names its members' harness."""
    for window in swarm.windows:
        if window.pool in swarm.harnesses:
            swarm.harnesses.setdefault(window.role, swarm.harnesses[window.pool])
    for name in swarm.pools:
        swarm.harnesses.pop(name, None)


def pool_sizes(windows: list[Window]) -> dict[str, int]:
    """How many members each pool among `windows` has."""
    sizes: dict[str, int] = {}
    for window in windows:
        if window.pool:
            sizes[window.pool] = sizes.get(window.pool, 0) + 1
    return sizes


def valid_name(name: str) -> bool:
    """A project or host name: it becomes part of NATS subjects, a stream, a bucket and a
    consumer's name, which allow letters, digits, '-' and '_' (never '.', '*' or '>')."""
    return config.valid_role_name(name.replace("_", "-"))


def _host_line(words: list[str], swarm: Swarm, where: str) -> str:
    if len(words) != 2 or not valid_name(words[1]):
        raise SwarmConfigError(
            f"{where}: expected 'host <name>' (letters, digits, '-' and '_'); got "
            f"{' '.join(words)!r}"
        )
    if words[1] in swarm.hosts:
        raise SwarmConfigError(f"{where}: host '{words[1]}' is declared twice")
    swarm.hosts.append(words[1])
    return words[1]


def _harness_line(words: list[str], swarm: Swarm, where: str) -> None:
    """`harness <role> claude|codex|generic` (docs/protocol.md §16)."""
    if len(words) != 3 or words[2] not in HARNESSES:
        raise SwarmConfigError(f"{where}: expected 'harness <role> claude|codex|generic'")
    if words[1] in swarm.harnesses:
        raise SwarmConfigError(f"{where}: the harness of '{words[1]}' is given twice")
    swarm.harnesses[words[1]] = words[2]


def _budget_line(words: list[str], line: str, swarm: Swarm, where: str) -> None:
    """`budget <role|pool> <tokens> per <hour|day>` (docs/protocol.md §19).  Its words must
    be plain: the helpers read the line by splitting it at spaces (no shell quoting)."""
    try:
        budget = tokens.budget_of(words)
    except ValueError as error:
        raise SwarmConfigError(f"{where}: {error}") from None
    if line.split("#", 1)[0].split() != words:
        raise SwarmConfigError(f"{where}: a budget line takes plain words, no quotes")
    if budget.who in swarm.budgets:
        raise SwarmConfigError(f"{where}: the budget of '{budget.who}' is given twice")
    swarm.budgets[budget.who] = budget


def harnesses(root: str) -> dict[str, str]:
    """The `harness` lines of the project's stored configuration; none when it has none,
    or cannot be read (`init` says what is wrong with it)."""
    try:
        text = _read_stored(stored_configuration(root))
        return parse_swarm(text, stored_configuration(root)).harnesses
    except (SwarmConfigError, OSError):
        return {}


def _setting(words: list[str], swarm: Swarm, where: str) -> None:
    key = words[0]
    if len(words) != 2:
        shape = "<url>[,<url>...]" if key == "nats" else "<file>" if "-" in key else "<name>"
        raise SwarmConfigError(f"{where}: expected '{key} {shape}' (one word)")
    if key in swarm.settings:
        raise SwarmConfigError(f"{where}: '{key}' is given twice")
    value = words[1]
    if key == "project" and not valid_name(value):
        raise SwarmConfigError(
            f"{where}: project name '{value}' must be letters, digits, '-' and '_' (it names "
            "NATS subjects, the stream and the bucket)"
        )
    if key == "nats":
        for url in value.split(","):
            if "://" not in url:
                raise SwarmConfigError(
                    f"{where}: '{url}' is not a NATS server URL (nats://host:port)"
                )
    swarm.settings[key] = value


def _window(words: list[str], where: str, host: str = "") -> Window:
    if len(words) < 4 or words[0] != "window":
        raise SwarmConfigError(
            f"{where}: expected 'window <role> <agent> <worktree> [task|batch] [agent args...]'"
        )
    _, role, agent, worktree, *rest = words
    if not config.valid_role_name(role):
        raise SwarmConfigError(
            f"{where}: invalid role name '{role}': use letters, digits and '-', no '_', '.' or '/'"
        )
    if role == config.OPERATOR:
        raise SwarmConfigError(f"{where}: {config.RESERVED}")
    if not plain_name(worktree):
        raise SwarmConfigError(
            f"{where}: worktree name '{worktree}' must be a plain name git accepts as a branch"
        )
    mode = "task"
    if rest and not rest[0].startswith("-"):
        # the fifth word is the receive mode: a typo (`bacth`) must not become an agent argument
        mode = rest.pop(0)
        if mode not in config.RECEIVE_MODES:
            raise SwarmConfigError(
                f"{where}: receive mode '{mode}' must be task or batch "
                "(agent arguments that do not start with '-' go after the mode)"
            )
    return Window(role, agent, worktree, mode, tuple(rest), host)


def plain_name(name: str) -> bool:
    """A worktree name that is also a valid branch name: no '/', not '.' or '..', and none
    of what `git check-ref-format --branch` refuses (a leading '-' would even be read as an
    option by `git worktree add`)."""
    return not (
        name.startswith(("-", "."))
        or name.endswith((".", ".lock"))
        or name in ("@", "HEAD")
        or any(bad in name for bad in ("..", "@{", "/"))
        or any(char in _NOT_IN_BRANCH or ord(char) < 32 or ord(char) == 127 for char in name)
    )


def _check_unique(window: Window, earlier: list[Window], where: str) -> None:
    for other in earlier:
        if other.role == window.role or other.pool == window.role:
            raise SwarmConfigError(f"{where}: role '{window.role}' is defined twice")
        # a window before any `host` line is on whichever host lays it out: it shares a
        # checkout with every host's windows
        same_host = other.host == window.host or not (other.host and window.host)
        if other.worktree == window.worktree and same_host:
            raise SwarmConfigError(
                f"{where}: roles '{other.role}' and '{window.role}' share the worktree "
                f"'{window.worktree}'; each role needs its own worktree (its own inbox)"
            )


def roles_tsv(
    windows: list[Window], root: str, here: str = "", hosts: list[str] | None = None
) -> str:
    """roles.tsv: the format line, the 7 columns of docs/protocol.md §1, then the role's
    host (empty: this host, `here`) and the agent's extra arguments (other tools ignore
    further columns).  A remote role's worktree is a placeholder never used here."""
    rows, sizes = [], pool_sizes(windows)
    for w in windows:
        if w.pool and w.role == f"{w.pool}-1":  # the pool's own row, above its members
            rows.append(_pool_row(w, root, here, sizes[w.pool]))
        local = w.local(here)
        path = w.worktree_path(root) if local else placeholder(root, w)
        rows.append("\t".join((
            w.role, w.worktree, path, f"swarmforge-{w.role}",
            w.role[:1].upper() + w.role[1:], w.agent, w.mode, "" if local else w.host,
            shlex.join(w.args), w.pool,
        )))  # fmt: skip
    form = config.FORMAT_POOLS if sizes else config.FORMAT
    head = f"{form}{config.HOSTS}{','.join(hosts or [])}\n"
    columns = "# role worktree-name worktree-path session display agent mode host agent-args"
    columns += " pool\n" if sizes else "\n"
    return head + columns + "".join(row.rstrip("\t") + "\n" for row in rows)


def _pool_row(member: Window, root: str, here: str, size: int) -> str:
    """A pool's own row (docs/protocol.md §17): no session, no worktree of its own; its
    worktree column is the project's root, under which `.swarmforge/pools/<pool>/` is its H."""
    name = member.pool
    return "\t".join((
        name, MAIN_WORKTREE, root, "", name[:1].upper() + name[1:], member.agent, member.mode,
        "" if member.local(here) else member.host, "", f"{config.POOL_ROW}{size}",
    ))  # fmt: skip


def placeholder(root: str, window: Window) -> str:
    """The worktree column of a role on another host: never created, never used here."""
    return os.path.join(root, REMOTE, window.host, window.role)


def socket_path(root: str) -> str:
    """A short tmux socket path, private to this user and this project (unix socket paths
    must stay under ~100 bytes, so it cannot live inside a deep project tree)."""
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"handoffd-{os.getuid()}", digest)


def locate(root: str | None, cwd: str) -> str:
    """The project `init` lays out: ROOT, else the project holding the working directory,
    else the working directory.  A ROOT inside another project is refused: a second
    project inside the first would take its worktrees' mail."""
    if root is None:
        try:
            return config.find_root(cwd)
        except config.ConfigError:
            return os.path.abspath(cwd)
    base = os.path.abspath(root)
    outer = enclosing_project(base)
    if outer is not None and outer != base:
        raise SwarmConfigError(
            f"{base} is inside the handoffd project {outer}; run `handoffd init` in "
            f"{outer} (or from any directory below it without a ROOT)"
        )
    return base


def enclosing_project(path: str) -> str | None:
    """The nearest directory at or above `path` holding .swarmforge/roles.tsv."""
    while True:
        if config.holds_roles(path):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def stored_configuration(root: str) -> str:
    """Where a project keeps the swarm configuration `init` was last given."""
    return os.path.join(root, config.SWARMFORGE, SAMPLE)


def configuration(root: str, given: str | None) -> tuple[str, str] | None:
    """The configuration to lay out and its name: the one given, else the project's own,
    else the sample, but only for a project without roles yet.  None: keep roles.tsv as it
    is (the sample must never silently replace roles someone chose)."""
    stored = stored_configuration(root)
    if given is None and os.path.lexists(stored):
        return _read_stored(stored), stored
    if given is None:
        if config.holds_roles(root):
            return None
        return sample_text(), f"(sample {SAMPLE})"
    try:
        with open(given, encoding="utf-8") as file:  # the person's own choice: a pipe is fine
            return file.read(), given
    except (OSError, UnicodeDecodeError) as error:
        raise SwarmConfigError(f"cannot read {given}: {error}") from None


def _read_stored(path: str) -> str:
    """The configuration kept under `.swarmforge/`, read the careful way: anyone who can
    write there may have left a FIFO, a device or a link in its place, which is refused by
    name, never waited on, followed or read past the limit (docs/protocol.md Part II)."""
    try:
        return safeio.read_regular(path, CONF_LIMIT).decode("utf-8")
    except safeio.Refused as refusal:
        raise SwarmConfigError(
            f"cannot read {path}: {refusal.why}; replace it with the swarm configuration "
            "(or pass --config)"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise SwarmConfigError(f"cannot read {path}: {error}") from None


def check_hosts(swarm: Swarm, here: str, source: str) -> None:
    """Refuse a configuration this host cannot lay out: hosts declared but this one not
    named (or named wrong), or a role on another host with no NATS to reach it by."""
    declared = ", ".join(swarm.hosts)
    if swarm.hosts and not here:
        raise SwarmConfigError(
            f"{source} declares hosts {declared}, but this machine's host is not named: run "
            f"`handoffd init --host NAME` (it writes {config.HOST_FILE}, one line, not committed)"
        )
    if swarm.hosts and here not in swarm.hosts:
        raise SwarmConfigError(
            f"this machine is host '{here}' ({config.HOST_FILE}), which {source} does not "
            f"declare (declared: {declared}); fix {config.HOST_FILE} or the `host` lines"
        )
    remote = swarm.remote_windows(here)
    if remote and not swarm.urls:
        raise SwarmConfigError(
            f"{source}: role '{remote[0].role}' is on host {remote[0].host}, but there is no "
            "`nats <url>` line: roles on other hosts are reached through NATS JetStream "
            "(add `nats nats://HOST:4222` and `project <name>`)"
        )


def host_warnings(swarm: Swarm, source: str) -> list[str]:
    """What `init` warns about (and lays out anyway): windows before the first `host` line
    of a configuration that has hosts belong to every host that runs `init`, so each host
    gives such a role an inbox of its own, and mail to it stays on the sender's host."""
    shared = [w.role for w in swarm.windows if not w.host]
    if not swarm.hosts or not shared:
        return []
    roles, verb = ", ".join(shared), "comes" if len(shared) == 1 else "come"
    return [
        f"WARNING: {source}: {roles} {verb} before the first `host` line, so every host that "
        f"runs `handoffd init` lays out its own {roles} (each host's mail to it stays on that "
        "host); move such a window below the `host` line of the one host it runs on"
    ]


def init(
    root: str,
    windows: list[Window],
    remember: str | None = None,
    here: str = "",
    hosts: list[str] | None = None,
) -> list[str]:
    """Lay out the project at `root` for this host (`here`); returns what was created or
    changed.  `remember`: the configuration's text, kept in the project so a later plain
    `init` uses it.  Worktrees and handoff folders are made for this host's roles only."""
    changes: list[str] = []
    _ensure_repository(root, changes)
    for window in windows:
        if not window.local(here):
            continue
        _ensure_worktree(root, window, changes)
        for box in BOXES:
            os.makedirs(os.path.join(window.worktree_path(root), ".swarmforge", "handoffs", box),
                        exist_ok=True)  # fmt: skip
        if window.pool:  # the pool's own H: an inbox/new/ and nothing else
            os.makedirs(os.path.join(root, config.POOLS, window.pool, Box.NEW), exist_ok=True)
    for box in (*BOXES, Box.OUTBOX):  # the operator's mailbox (docs/protocol.md §18)
        os.makedirs(os.path.join(root, config.OPERATOR_DIR, box), exist_ok=True)
    swarmforge = os.path.join(root, config.SWARMFORGE)
    if remember is not None:
        _write_if_changed(stored_configuration(root), remember, changes)
    if here:
        _write_if_changed(os.path.join(root, config.HOST_FILE), here + "\n", changes)
    tsv, tsv_path = roles_tsv(windows, root, here, hosts), os.path.join(swarmforge, "roles.tsv")
    _write_if_changed(tsv_path, tsv, changes, _roles_change(role_names(root), windows))
    _write_if_changed(os.path.join(swarmforge, "tmux-socket"), socket_path(root) + "\n", changes)
    exclude_from_git(root, EXCLUDES, changes)
    return changes


def _git(root: str, *args: str) -> subprocess.CompletedProcess[str]:
    import subprocess  # only `init` runs git: a view of the board reads the parser alone

    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)


def _must(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        raise SwarmConfigError(f"{what} failed: {result.stderr.strip()}")


def _ensure_repository(root: str, changes: list[str]) -> None:
    """A git repository with at least one commit (worktrees need a commit to branch from)."""
    os.makedirs(root, exist_ok=True)
    if _git(root, "rev-parse", "--show-toplevel").returncode != 0:
        _must(_git(root, "init", "-q", "-b", MAIN_WORKTREE), "git init")
        changes.append(f"created git repository {root}")
    if _git(root, "rev-parse", "--verify", "-q", "HEAD").returncode != 0:
        identity = ["-c", "user.name=handoffd", "-c", "user.email=handoffd@localhost"]
        if _git(root, "config", "user.email").returncode == 0:
            identity = []
        _must(_git(root, *identity, "commit", "-q", "--allow-empty", "-m", "Start the swarm"),
              "the first commit")  # fmt: skip
        changes.append("created first commit")


def _ensure_worktree(root: str, window: Window, changes: list[str]) -> None:
    path = window.worktree_path(root)
    if window.worktree == MAIN_WORKTREE or os.path.exists(os.path.join(path, ".git")):
        return
    branch = window.worktree
    has_branch = _git(root, "rev-parse", "--verify", "-q", f"refs/heads/{branch}").returncode == 0
    args = [path, branch] if has_branch else ["-b", branch, path]
    _must(_git(root, "worktree", "add", "-q", *args), f"git worktree add {path}")
    changes.append(f"created worktree {path} (branch {branch})")


def _write_if_changed(path: str, text: str, changes: list[str], what: str = "") -> None:
    """Write `path` unless it already holds `text`, and say `created <path>` or `updated
    <path>` (and `what` changed in it).  What stands there is read the careful way: a FIFO,
    a device, a link or an oversized file is not what we would write, so it is replaced
    (the entry itself: a link's target is never read or written)."""
    data = text.encode()
    try:
        if safeio.read_regular(path, len(data)) == data:
            return
        existed = True
    except FileNotFoundError:
        existed = False
    except safeio.Refused:
        existed = True
    os.makedirs(os.path.dirname(path), exist_ok=True)
    durable.replace(path, data)
    changes.append(f"{'updated' if existed else 'created'} {path}" + (f" {what}" if what else ""))


def role_names(root: str) -> list[str] | None:
    """The roles the project's roles.tsv lists now, in its order (its first column), or
    None when there is none to read; read the careful way, never parsed beyond names."""
    try:
        text = safeio.read_regular(os.path.join(root, config.ROLES_FILE), config.ROLES_LIMIT)
    except (FileNotFoundError, safeio.Refused):
        return None
    lines = text.decode("utf-8", "replace").splitlines()
    return [line.split("\t")[0] for line in lines if line.strip() and not line.startswith("#")]


def _roles_change(before: list[str] | None, windows: list[Window]) -> str:
    """`(+QA, -old)`: the roles a rewrite of roles.tsv adds and drops ('' for a new file)."""
    if before is None:
        return ""
    now = [window.role for window in windows] + list(pool_sizes(windows))
    said = [f"+{r}" for r in now if r not in before] + [f"-{r}" for r in before if r not in now]
    return f"({', '.join(said)})" if said else ""


def exclude_from_git(root: str, patterns: tuple[str, ...], changes: list[str]) -> None:
    """Keep runtime state out of git without touching tracked files: .git/info/exclude
    (the common one, so it holds in every worktree)."""
    common = _git(root, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout.strip()
    exclude = os.path.join(common, "info", "exclude")
    try:
        with open(exclude, encoding="utf-8") as file:
            present, existed = set(file.read().splitlines()), True
    except FileNotFoundError:
        present, existed = set(), False
    missing = [pattern for pattern in patterns if pattern not in present]
    if missing:
        os.makedirs(os.path.dirname(exclude), exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as file:
            file.write("".join(f"{pattern}\n" for pattern in missing))
        changes.append(f"{'updated' if existed else 'created'} {exclude}")
