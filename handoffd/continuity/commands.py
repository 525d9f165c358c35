"""The continuity commands: `handoffd resume` and `handoffd note` (docs/protocol.md §10)."""

from __future__ import annotations

import json
import os

import click

from handoffd import config
from handoffd.cli import emit, root_option
from handoffd.config import Role
from handoffd.continuity import hook, live
from handoffd.continuity import resume as ladder
from handoffd.outcome import Outcome
from handoffd.terminal import escape_json

role_option = click.option(
    "--role",
    "role_name",
    help="The role (default: $SWARMFORGE_ROLE, else the working directory's).",
)


def _caller(root_opt: str | None, role_name: str | None) -> tuple[str, Role] | Outcome:
    """The project root and the role (§1), or the refusal to print."""
    try:
        root = os.path.abspath(root_opt) if root_opt else config.find_root()
        roles = config.load_roles(root)
        return root, config.calling_role(roles, role_name or os.environ.get("SWARMFORGE_ROLE"))
    except config.ConfigError as error:
        return Outcome(1, stderr=f"{error}\n")


@click.command()
@role_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of lines.")
@root_option
def resume(role_name: str | None, as_json: bool, root_opt: str | None) -> None:
    """Where were we: the role's state and next step, in at most five lines."""
    emit(run_resume(root_opt, role_name, as_json))


def run_resume(root_opt: str | None, role_name: str | None, as_json: bool) -> Outcome:
    answer = climb(root_opt, role_name)
    if isinstance(answer, Outcome):
        return answer
    if as_json:
        return Outcome(0, escape_json(json.dumps(answer.as_json(), ensure_ascii=False)) + "\n")
    return Outcome(0, "".join(f"{line}\n" for line in answer.lines()))


def climb(root_opt: str | None, role_name: str | None) -> ladder.Answer | Outcome:
    """The role's answer, climbed once (the git rung writes the live file), or the refusal."""
    caller = _caller(root_opt, role_name)
    if isinstance(caller, Outcome):
        return caller
    root, role = caller
    return ladder.climb(role, root)


@click.command()
@click.option("--decision", help="Add a choice not to be re-litigated to Decisions.")
@click.option("--ruled-out", "ruled_out", help="Add '<approach>: <why it failed>' to Ruled Out.")
@click.option("--verify", help="Set the command that checks the work (Verify).")
@role_option
@root_option
def note(
    decision: str | None,
    ruled_out: str | None,
    verify: str | None,
    role_name: str | None,
    root_opt: str | None,
) -> None:
    """Add to the agent's sections of the live file HANDOFF.md."""
    emit(run_note(root_opt, role_name, decision, ruled_out, verify))


def run_note(
    root_opt: str | None,
    role_name: str | None,
    decision: str | None,
    ruled_out: str | None,
    verify: str | None,
) -> Outcome:
    given = {"Decisions": decision, "Ruled Out": ruled_out, "Verify": verify}
    given = {name: live.one_line(text) for name, text in given.items() if text is not None}
    if not given or not all(given.values()):
        return Outcome(2, stderr="NOTE_EMPTY: give --decision, --ruled-out or --verify text.\n")
    caller = _caller(root_opt, role_name)
    if isinstance(caller, Outcome):
        return caller
    _, role = caller

    def edit(sections: dict[str, list[str]]) -> None:
        for name, text in given.items():
            if name == "Verify":
                sections[name] = [f"`{text}`"]
            else:
                sections[name] = live.add_bullet(sections.get(name, []), f"- {text}")

    try:
        hook.refresh(role, edit=edit)
    except OSError as error:  # a folder where the file should be, a full disk: one line
        return Outcome(1, stderr=f"NOTE_NOT_WRITTEN: {error}\n")
    return Outcome(0, f"NOTED: {live.path(role.worktree)}\n")
