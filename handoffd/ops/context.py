"""Who an operation acts for: the project root, its roles, the role and who runs it.

`resolve_context` is the one place that finds them (docs/protocol.md §1, §8): the
adapter's options first, then the environment, then roles.tsv and the working directory.
Helpers import this module, so it uses only cheap standard modules.
"""

from __future__ import annotations

import os

from handoffd.core import config
from handoffd.core.outcome import Exit, Refusal, Result, failure

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: helpers import this module
if TYPE_CHECKING:
    from collections.abc import Callable


class Context:
    """The project at `root`, its `roles`, the `role` acted for (None for an operation on
    the project as a whole) and who runs it (`agent`, `conversation`).  `colours`: the
    text may carry terminal colours (a command whose stdout is a terminal)."""

    __slots__ = ("agent", "colours", "conversation", "role", "roles", "root")

    def __init__(
        self,
        root: str,
        roles: dict[str, config.Role],
        role: config.Role | None = None,
        agent: str = "",
        conversation: str = "",
        colours: bool = False,
    ) -> None:
        self.root = root
        self.roles = roles
        self.role = role
        self.agent = agent or (role.agent if role else "")
        self.conversation = conversation
        self.colours = colours

    @property
    def me(self) -> config.Role:
        """The role acted for; only operations that need one are given a context without."""
        assert self.role is not None, "an operation on a role was given no role"
        return self.role

    def __repr__(self) -> str:
        return f"Context({self.root!r}, role={self.role and self.role.name!r})"


def resolve_context(
    root: str | None = None,
    role: str | None = None,
    agent: str | None = None,
    conversation: str | None = None,
    *,
    needs_role: bool = True,
    colours: bool = False,
    card: str | None = None,
) -> Context:
    """The context the options name.  Raises `config.ConfigError` (exit 1) when there is no
    project, or (if `needs_role`) no role to act for.  `card`: the ID the operation was
    given; named as the board names a card, `<id>@<role>`, it names the role acted for
    (docs/protocol.md §8) unless `--role` or `$SWARMFORGE_ROLE` does: an agent says who it
    is, while an operator's working directory (the project root is a worktree too) is
    only a guess at a role."""
    root = project_root(root)
    roles = config.load_swarm(root)
    if not needs_role:
        return Context(root, roles, colours=colours)
    named = role or os.environ.get("SWARMFORGE_ROLE") or card_role(card, roles)
    if not named and (stray := unknown_card_role(card, roles)):
        raise config.UnknownRole(stray, roles)  # `<id>@cleanr`: the role is the typo
    try:
        me = config.calling_role(roles, named)
    except config.UnknownRole:
        raise
    except config.ConfigError as error:  # no role: say which one the ID is a card of
        if not card:
            raise
        raise config.ConfigError(f"{error} {card_hint(root, roles, card)}".strip()) from None
    _refuse_elsewhere(root, me)
    agent = agent or _text_from_env("SWARMFORGE_AGENT") or me.agent
    if conversation is None:
        conversation = _text_from_env("SWARMFORGE_CONVERSATION") or ""
    return Context(root, roles, me, agent, conversation, colours)


def _text_from_env(name: str) -> str | None:
    """A variable stamped into files as text: bytes that are not UTF-8 (kept by `os` as
    lone surrogates) are refused before anything moves, never a traceback half-way."""
    value = os.environ.get(name)
    if value is not None and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise config.ConfigError(f"${name} is not UTF-8: set it to UTF-8 text") from None
    return value


def card_role(card: str | None, roles: dict[str, config.Role]) -> str | None:
    """The role an ID written as a card, `<id>@<role>`, names (None: no such role).  A
    pool's card (docs/protocol.md §17) names the member holding its copy, if one does."""
    ident, _, name = (card or "").rpartition("@")
    if ident and name in roles and roles[name].is_pool:
        return _holder(ident, name, roles) or name
    return name if ident and name in roles else None


def _holder(ident: str, pool: str, roles: dict[str, config.Role]) -> str | None:
    """The member of `pool` whose queue holds the copy `ident` names (in process, or
    completed: one it finished may be reopened), reading the members' folders by name."""
    from handoffd.queue import scan

    for role in roles.values():
        if role.pool != pool or role.is_pool:
            continue
        states = (scan.State.NEW, scan.State.IN_PROCESS, scan.State.COMPLETED)
        if any(entry.id == ident for entry in scan.listing(role, states)):
            return role.name
    return None


def unknown_card_role(card: str | None, roles: dict[str, config.Role]) -> str | None:
    """The role a card's `@<role>` names when it is a role name roles.tsv lacks, else None."""
    ident, _, name = (card or "").rpartition("@")
    return name if ident and config.valid_role_name(name) and name not in roles else None


def card_hint(root: str, roles: dict[str, config.Role], ident: str) -> str:
    """For an ID no role was found for: the open cards of the board it names, as
    `<id> is a card of cleaner: give it as <id>@cleaner.`; '' when it names none.  Only a
    refusal pays for this scan."""
    from handoffd.board import cards
    from handoffd.core.terminal import escape
    from handoffd.queue.items import names_match
    from handoffd.queue.scan import State
    from handoffd.snapshot.snapshot import take_snapshot as scan

    snapshot = scan(root, roles)
    board = cards.project(snapshot, snapshot.taken_at)
    found = [
        card
        for card in board.cards
        if card.state in (State.NEW, State.IN_PROCESS)
        and (card.id == ident or card.card == ident or names_match(card.entry.name, ident))
    ]
    if not found:
        return ""
    if any(card.card == ident for card in found):  # the card, given with another --role
        role = found[0].role
        return f"{escape(ident)} is a card of {role}: act for {role} (--role {role}, or none)."
    where = " and ".join(sorted({card.role for card in found}))
    named = " or ".join(escape(card.card) for card in found)
    return f"{escape(ident)} is a card of {where}: give it as {named}."


def _refuse_elsewhere(root: str, role: config.Role) -> None:
    """A role that lives on another host has no inbox, live file or claims here (its
    worktree in roles.tsv is a placeholder): acting for it is refused, naming its host."""
    if not role.host:
        return
    here = config.this_host(root)
    if role.host != here:
        where = f"host {here}" if here else "a host without .swarmforge/host"
        raise config.ConfigError(
            f"Role '{role.name}' works on host {role.host}, not here ({where}): "
            f"run this on host {role.host}."
        )


def project_root(given: str | None) -> str:
    """The root given (absolute), else the one found from the working directory
    (docs/protocol.md §1); a root given that is no project is refused by name."""
    if not given:
        return config.find_root()
    root = os.path.abspath(given)
    if not os.path.isdir(os.path.join(root, config.SWARMFORGE)):
        raise config.ConfigError(
            f"{root} is not a handoffd project (no {config.SWARMFORGE}/); "
            "run `handoffd init` there first, or pass the project root"
        )
    return root


DEFAULT_UNKNOWN = "Unknown role: {}"  # said with the known roles and the nearest one


def config_refusal(error: config.ConfigError, unknown_role: str = DEFAULT_UNKNOWN) -> Result:
    """How every adapter says that the project or the role cannot be found (exit 1)."""
    if isinstance(error, config.UnknownRole) and unknown_role != DEFAULT_UNKNOWN:
        # a contract's own fixed line (§3's `Unknown sender role: <role>`): exactly that
        return Result(Exit.FAILED, "", unknown_role.format(error.name) + "\n")
    return Result(Exit.FAILED, "", f"{error}\n")


def guarded(run: Callable[[], Result]) -> Result:
    """What `run` returns, or what stops it as its result: a refusal or an I/O error from
    anywhere below (`failure`), roles.tsv broken since the context read it."""
    try:
        return run()
    except (Refusal, OSError) as error:
        return failure(error)
    except config.ConfigError as error:
        return config_refusal(error)
