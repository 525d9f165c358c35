"""A project's configuration: where it is, which roles it has, and who is calling.

`roles.tsv` is the only source of where a role's handoff directory lives; the
working directory is used to *find* the project and the calling role, never as
a handoff directory (the older tool's lost-handoff bug).
"""

from __future__ import annotations

import os
import stat

from handoffd.core import safeio

TYPE_CHECKING = False  # helpers import this module: no `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Iterable

SWARMFORGE = ".swarmforge"
ROLES_FILE = os.path.join(SWARMFORGE, "roles.tsv")
ROLES_LIMIT = 1024 * 1024  # bytes: thousands of roles; never read more of roles.tsv
HOST_FILE = os.path.join(SWARMFORGE, "host")
CONF_FILE = os.path.join(SWARMFORGE, "swarmforge.conf")  # the swarm configuration `init` keeps
CONF_LIMIT = 1024 * 1024  # bytes: never read more of it
RECEIVE_MODES = ("task", "batch")
# The first line `init` writes: column 8 is the role's host and the agent arguments are
# column 9 on.  A roles.tsv without it comes from before hosts (column 8 held the agent
# arguments) and must not be read as if column 8 named a host.
FORMAT = "#handoffd-roles 2"
# The format line of a roles.tsv with pools (docs/protocol.md §17): column 9 holds the agent
# arguments as one field (shell words) and column 10 the pool column: `<pool>` on a member's
# row, `pool:<n>` on the pool's own.  `init` writes it only for a swarm that has a pool.
FORMAT_POOLS = "#handoffd-roles 3"
POOL_ROW = "pool:"
POOLS = os.path.join(SWARMFORGE, "pools")  # a pool's own H: P/.swarmforge/pools/<pool>/
HOSTS = " hosts="
# The person running the swarm (docs/protocol.md §18): a reserved name, never a role of
# roles.tsv, always a sender and a recipient, with a handoff directory of its own under the
# project (`P/.swarmforge/operator/handoffs/`, §1's folders) and no pane to wake.
OPERATOR = "operator"
OPERATOR_DIR = os.path.join(SWARMFORGE, OPERATOR, "handoffs")
# Said after every roles.tsv error: a person must know how to get back to a working swarm.
REPAIR = (
    "\nRepair roles.tsv by hand, or regenerate it from the swarm configuration with "
    "`handoffd init` in the project's root."
)
_ROLE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


RESERVED = (
    f"'{OPERATOR}' is a reserved name (the person running the swarm: its mailbox is "
    f"{OPERATOR_DIR}/), never a role; give the role another name"
)


def budget_text(root: str) -> str | None:
    """The stored swarm configuration when it names a budget at all (docs/protocol.md §19);
    None (also when it cannot be read) for a project that sets none.  One bounded read of a
    small file: all a helper of such a project pays for budgets."""
    try:
        data = safeio.read_regular(os.path.join(root, CONF_FILE), CONF_LIMIT)
    except OSError:
        return None
    return data.decode("utf-8", "replace") if b"budget" in data else None


class ConfigError(Exception):
    """A configuration problem a person must fix; the message says what and where."""


class UnknownRole(ConfigError):
    """A role someone named (`--role`, `$SWARMFORGE_ROLE`, a card's `@role`) that roles.tsv
    does not list; the message names the `known` roles and the nearest of them."""

    def __init__(self, name: str, known: Iterable[str] = ()) -> None:
        super().__init__(f"Unknown role: {_shown(name)}{role_hint(name, known)}")
        self.name = name


def role_hint(name: str, known: Iterable[str]) -> str:
    """` (known roles: cleaner, coder; did you mean cleaner?)`, or '' with none known (the
    operator is no role: never one of them)."""
    roles = sorted(role for role in known if role != OPERATOR)
    if not roles:
        return ""
    near = nearest(name, roles)
    return f" (known roles: {', '.join(roles)}" + (f"; did you mean {near}?)" if near else ")")


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The one of `known` a typo of `word` most likely meant: fewest edits (a swapped pair
    of letters is one, so `statsu` is `status`, not `start`), at most a third of the word's
    length (at least one); on a tie the one of the word's own length (a slip of the fingers
    keeps the count of letters: `statsu` is `status`, not `stats`), then the first in sorted
    order; None if none is that close."""
    limit = max(1, len(word) // 3)
    scored = sorted((_edits(word.lower(), name.lower()), abs(len(name) - len(word)), name)
                    for name in known)  # fmt: skip
    return scored[0][2] if scored and scored[0][0] <= limit else None


def _edits(a: str, b: str) -> int:
    """Edits from `a` to `b`: insertions, deletions, substitutions and swaps of neighbours
    (the optimal string alignment distance)."""
    rows = [list(range(len(b) + 1))]
    for i, x in enumerate(a, 1):
        row = [i]
        for j, y in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def _shown(name: str) -> str:
    """A name someone typed, on one line: a control character in it shown escaped."""
    if name.isprintable():
        return name
    from handoffd.core.terminal import escape

    return escape(name)


class Box:
    """The queue's folders.  The directory is the state: each value is a folder name.

    (A plain class, not an Enum: `import enum` alone costs a helper half its start-up budget.)
    """

    OUTBOX = "outbox"
    DRAFTS = "outbox/tmp"
    SENT = "sent"
    FAILED = "failed"
    DISMISSED = "failed/dismissed"  # refused originals an operator put aside (§13)
    NEW = "inbox/new"
    IN_PROCESS = "inbox/in_process"
    COMPLETED = "inbox/completed"


class Role:
    """One row of roles.tsv."""

    __slots__ = (
        "agent", "agent_args", "display", "host", "mode", "name", "pool", "session",
        "worktree", "worktree_name",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        worktree_name: str,
        worktree: str,
        session: str = "",
        display: str = "",
        agent: str = "",
        mode: str = "task",
        agent_args: str = "",
        host: str = "",
        pool: str = "",
    ) -> None:
        self.name = name
        self.worktree_name = worktree_name
        self.worktree = worktree
        self.session = session
        self.display = display
        self.agent = agent
        self.mode = mode
        self.agent_args = agent_args  # handoffd's 9th column on: shell words for the agent
        self.host = host  # column 8: the host the role lives on; empty: this host
        self.pool = pool  # column 10: a member's pool, `pool:<n>` for a pool; empty: neither

    @property
    def is_pool(self) -> bool:
        """Whether this row is a pool's own (docs/protocol.md §17): it takes nothing itself."""
        return self.pool.startswith(POOL_ROW)

    @property
    def is_operator(self) -> bool:
        """Whether this is the operator's mailbox (docs/protocol.md §18): no roles.tsv row
        can be (`parse_roles` refuses the name), so the name says it."""
        return self.name == OPERATOR

    @property
    def handoffs(self) -> str:
        """The role's handoff directory: always derived from its worktree in roles.tsv (a
        pool's is `.swarmforge/pools/<pool>/` under the project, whose root it names; the
        operator's `.swarmforge/operator/handoffs/` under the project's root)."""
        if self.is_operator:
            return os.path.join(self.worktree, OPERATOR_DIR)
        if self.is_pool:
            return os.path.join(self.worktree, POOLS, self.name)
        return os.path.join(self.worktree, SWARMFORGE, "handoffs")

    def path(self, box: str, *names: str) -> str:
        """The absolute path of `box` (a `Box` value), or of entries inside it."""
        return os.path.join(self.handoffs, box, *names)

    def __repr__(self) -> str:
        return f"Role({self.name!r}, {self.worktree!r}, mode={self.mode!r})"


def operator_role(root: str) -> Role:
    """The operator's mailbox as a role of the project at `root`: local on every host (each
    host has its own, §18), with no session, agent or worktree of its own."""
    return Role(OPERATOR, OPERATOR, root, display=OPERATOR)


def without_operator(roles: dict[str, Role]) -> dict[str, Role]:
    """The roles of roles.tsv alone: those with a pane, an agent and a worktree."""
    return {name: role for name, role in roles.items() if not role.is_operator}


def valid_role_name(name: str) -> bool:
    """`[A-Za-z0-9][A-Za-z0-9-]*`: no `_` (it separates filename fields), no `.` or `/`."""
    return bool(name) and name[0] != "-" and set(name) <= _ROLE_CHARS


def parse_roles(text: str, source: str) -> dict[str, Role]:
    """Parse roles.tsv text into roles by name, in file order."""
    roles: dict[str, Role] = {}
    owners: dict[str, str] = {}
    lines = text.split("\n")
    hosts = _declared_hosts(lines[0].rstrip("\r"))
    pools = lines[0].startswith(FORMAT_POOLS)
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        role = _parse_row(line.rstrip("\r").split("\t"), f"{source}:{number}", hosts, pools)
        if role.name in roles:
            raise ConfigError(f"{source}:{number}: role '{role.name}' is listed twice")
        if role.host or role.is_pool:  # a remote role's worktree is a placeholder; a pool's
            # is the project's root, under which its H is a folder of its own
            roles[role.name] = role
            continue
        worktree = os.path.normpath(role.worktree)
        if worktree in owners:
            raise ConfigError(
                f"{source}:{number}: roles '{owners[worktree]}' and '{role.name}' share the "
                f"worktree {role.worktree}; each role needs its own worktree (its own inbox)"
            )
        owners[worktree] = role.name
        roles[role.name] = role
    return roles


def _declared_hosts(first: str) -> tuple[str, ...] | None:
    """The hosts the format line declares; None for a roles.tsv without it (one written
    before hosts, or by another tool)."""
    if not first.startswith((FORMAT, FORMAT_POOLS)):
        return None
    _, sep, names = first.partition(HOSTS)
    return tuple(name for name in names.split(",") if name) if sep else ()


def _parse_row(
    fields: list[str], where: str, hosts: tuple[str, ...] | None, pools: bool = False
) -> Role:
    if len(fields) < 3:
        raise ConfigError(
            f"{where}: expected TAB-separated role, worktree-name, worktree-path "
            f"[, session, display, agent, receive-mode, host, agent arguments]; "
            f"got {len(fields)} field(s)"
        )
    padded = [*fields[:8], *[""] * (8 - min(len(fields), 8))]
    name, worktree_name, worktree, session, display, agent, mode, host = padded
    # with pools, column 9 is the agent arguments' one field and column 10 the pool's
    agent_args = " ".join(field for field in fields[8 : 9 if pools else None] if field)
    pool = fields[9] if pools and len(fields) > 9 else ""
    if not valid_role_name(name):
        raise ConfigError(
            f"{where}: invalid role name {name!r}: use letters, digits and '-' "
            "(no '_', '.' or '/'), starting with a letter or digit"
        )
    if name == OPERATOR:
        raise ConfigError(f"{where}: {RESERVED}")
    if host and hosts is None:
        raise ConfigError(
            f"{where}: column 8 of role '{name}' holds {host!r}, but this roles.tsv was "
            "written before column 8 named the role's host (agent arguments are now column 9 "
            "on); run `handoffd init` to rewrite it"
        )
    if host and host not in (hosts or ()):
        declared = ", ".join(hosts or ()) or "none"
        raise ConfigError(
            f"{where}: role '{name}' is on host {host!r}, which swarmforge.conf does not "
            f"declare (declared: {declared}); fix its `host` lines and run `handoffd init`"
        )
    if not os.path.isabs(worktree):
        raise ConfigError(f"{where}: worktree path of role '{name}' must be absolute: {worktree!r}")
    if pool and not _pool_column(pool):
        raise ConfigError(
            f"{where}: column 10 of role '{name}' holds {pool!r}: expected its pool's role "
            "name, or `pool:<n>` on a pool's own row"
        )
    return Role(
        name, worktree_name, worktree, session, display, agent, mode or "task", agent_args, host,
        pool,
    )  # fmt: skip


def _pool_column(value: str) -> bool:
    """A pool column: a role name (a member's pool) or `pool:<n>` (2 ≤ n ≤ 32)."""
    if value.startswith(POOL_ROW):
        size = value[len(POOL_ROW) :]
        return size.isdigit() and 2 <= int(size) <= 32
    return valid_role_name(value)


def load_swarm(root: str) -> dict[str, Role]:
    """The roles of roles.tsv, then the operator's mailbox, a sender and a recipient of every
    project (docs/protocol.md §18): what the daemon delivers between, the board shows and an
    operation's context knows (`load_roles` is the roles alone: those with a pane)."""
    roles = load_roles(root)
    roles[OPERATOR] = operator_role(root)
    return roles


def load_roles(root: str) -> dict[str, Role]:
    """Read `<root>/.swarmforge/roles.tsv`."""
    path = os.path.join(root, ROLES_FILE)
    try:
        # the careful reader: a FIFO, a device or a link in its place is never opened or
        # followed, and a file past the limit is never read whole (docs/protocol.md Part II)
        text = safeio.read_regular(path, ROLES_LIMIT).decode("utf-8")
    except safeio.Refused as refusal:
        raise ConfigError(f"cannot read {path}: {refusal.why}{REPAIR}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}{REPAIR}") from None
    try:
        return parse_roles(text, path)
    except ConfigError as error:
        raise ConfigError(f"{error}{REPAIR}") from None


def this_host(root: str) -> str:
    """This machine's host name, from `.swarmforge/host` (one line, never committed);
    empty when the file is absent: a project on one machine needs none."""
    try:
        with open(os.path.join(root, HOST_FILE), encoding="utf-8") as file:
            return file.readline().strip()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {os.path.join(root, HOST_FILE)}: {error}") from None


def is_local(role: Role, here: str) -> bool:
    """Whether `role` lives on this host (`here`, as `.swarmforge/host` names it)."""
    return not role.host or role.host == here


def find_root(cwd: str | None = None) -> str:
    """The project root: the nearest ancestor holding .swarmforge/roles.tsv, else git's main
    checkout if it holds one."""
    start = os.path.abspath(cwd or os.getcwd())
    directory = start
    while True:
        if holds_roles(directory):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    main = _git_main_checkout(start)
    if main and holds_roles(main):
        return main
    checkout = f" and in its git repository's main checkout {main}" if main else ""
    # The first line is the contract's exact text (docs/protocol.md §1): prompts match it.
    raise ConfigError(
        "Cannot find SwarmForge project root\n"
        f"Looked for {ROLES_FILE} in {start} and every directory above it{checkout}.\n"
        "Run `handoffd init` in the project's root to lay one out."
    )


def holds_roles(directory: str) -> bool:
    """Whether `directory` has a `.swarmforge/roles.tsv` that is not a folder.  Not only a
    regular file: a FIFO or a link there still marks the project, whose commands then say
    what is wrong with it instead of looking for another project above."""
    try:
        return not stat.S_ISDIR(os.lstat(os.path.join(directory, ROLES_FILE)).st_mode)
    except OSError:
        return False


def _git_main_checkout(cwd: str) -> str | None:
    """The parent of `git rev-parse --git-common-dir`: the main checkout of any worktree."""
    import subprocess  # only on this fallback path: it costs a helper ~20 ms

    try:
        result = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    common = result.stdout.strip()
    return os.path.dirname(common) if result.returncode == 0 and common else None


def calling_role(roles: dict[str, Role], env_role: str | None, cwd: str | None = None) -> Role:
    """The calling role: `$SWARMFORGE_ROLE`, else the role whose worktree holds the cwd."""
    name = env_role or role_for_directory(roles, cwd or os.getcwd())
    if not name:
        raise ConfigError("Set SWARMFORGE_ROLE.")
    if name == OPERATOR:  # a person, not an agent: `handoffd send`, `reply` and `ack` act for it
        raise ConfigError(
            f"{RESERVED}: an agent cannot act as the operator (the operator gives work with "
            "`handoffd send` and answers its inbox with `handoffd reply` and `ack`)"
        )
    if name not in roles:
        raise UnknownRole(name, roles)
    return roles[name]


def role_for_directory(roles: dict[str, Role], directory: str) -> str | None:
    """The role whose worktree is `directory` or an ancestor of it; the deepest one wins.

    Paths are compared component by component: `/w/coder-b` is not inside `/w/coder`.
    """
    here = _components(directory)
    best: tuple[int, str] | None = None
    for role in roles.values():
        if role.is_operator:  # its "worktree" is the project's root, where no agent works
            continue
        tree = _components(role.worktree)
        if here[: len(tree)] == tree and (best is None or len(tree) > best[0]):
            best = (len(tree), role.name)
    return best[1] if best else None


def _components(path: str) -> list[str]:
    return [part for part in os.path.realpath(path).split(os.sep) if part]


# The folders of a handoff directory that must be folders of its own (docs/protocol.md
# Part II): a link in place of one is never followed.  Taking an original touches the
# sender's first three; delivering a copy, the recipient's `inbox/new/`.
FOLDERS = (Box.OUTBOX, Box.SENT, Box.FAILED, Box.DRAFTS, Box.NEW, Box.IN_PROCESS, Box.COMPLETED)


def linked_folders(role: Role) -> dict[str, str]:
    """{box: the path of the link on its way} for each of `role`'s FOLDERS behind a link
    (its own name, or one above it such as a linked `inbox/`, or the handoff directory or
    `.swarmforge/` of the worktree, which roles.tsv names and is the one folder trusted)."""
    above = safeio.linked_folders(role.worktree, (os.path.relpath(role.handoffs, role.worktree),))
    if above:
        return dict.fromkeys(FOLDERS, os.path.join(role.worktree, above[0]))
    found = {}
    for box in FOLDERS:
        hit = safeio.linked_folders(role.handoffs, (box,))
        if hit:
            found[box] = os.path.join(role.handoffs, hit[0])
    return found
