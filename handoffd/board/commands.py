"""The commands that change a role's claims: `heartbeat release block unblock report`.

Thin click adapters (docs/protocol.md §8): each resolves the caller from the shared
options, calls the operation in `handoffd.helpers` or `handoffd.board.reporting` (the same one
the MCP tools call)
and renders its `Outcome` with the contract's exit code.
"""

from __future__ import annotations

import click

from handoffd import helpers
from handoffd.board import reporting
from handoffd.cli import emit, role_options
from handoffd.helpers import Caller
from handoffd.outcome import Outcome

id_argument = click.argument("ident", metavar="[ID]", required=False)


@click.command()
@role_options
def heartbeat(me: Caller) -> None:
    """Renew the role's heartbeat: its claims stay live."""
    emit(helpers.beat(me))


@click.command()
@id_argument
@role_options
def release(ident: str | None, me: Caller) -> None:
    """Put the work in process (a whole batch, whichever file ID names) back into new/."""
    emit(helpers.release(me, ident))


@click.command()
@id_argument
@click.option("--reason", required=True, help="Why it is blocked: one line, 1 to 200 characters.")
@role_options
def block(ident: str | None, reason: str, me: Caller) -> None:
    """Set blocked_reason on the role's copy of ID (default: the work in process)."""
    emit(helpers.block(me, ident, reason))


@click.command()
@id_argument
@role_options
def unblock(ident: str | None, me: Caller) -> None:
    """Remove blocked_reason from the role's copy of ID (default: the work in process)."""
    emit(helpers.unblock(me, ident))


@click.command()
@id_argument
@click.option(
    "--status",
    required=True,
    type=click.Choice(reporting.STATUSES),
    help="RUNNING renews the claim (taking work if none is in process); BLOCKED sets the "
    "reason; DONE finishes the work as done_with_current does.",
)
@click.option("--file", "source", metavar="F|-", help="The report's Markdown text (- for stdin).")
@click.option("--reason", help="For BLOCKED (default: the report's first 'Blockers:' line).")
@role_options
def report(
    ident: str | None, status: str, source: str | None, reason: str | None, me: Caller
) -> None:
    """Store a report on the work in process (or on ID) and act on its status."""
    text = reporting.read_text(source)
    if isinstance(text, Outcome):
        emit(text)
        raise AssertionError("unreachable")
    emit(reporting.report(me, ident, status, text, reason))
