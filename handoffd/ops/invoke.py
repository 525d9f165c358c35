"""The one way into an operation for the command line, the MCP tools and the web's forms:
check each value once, resolve the context, fetch the texts, run.  An adapter says only
which of its values name who acts (`who`) and how it fetches a text (`fetch`: a file on
the command line, a tool's argument or a file in its worktree, a form's field)."""

from __future__ import annotations

from handoffd.core import config
from handoffd.core.outcome import Refusal, Result
from handoffd.ops.context import config_refusal, resolve_context
from handoffd.ops.spec import not_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from handoffd.ops.context import Context
    from handoffd.ops.spec import Op

    Fetch = Callable[[Op, dict[str, Any], Context], "dict[str, Any] | Result"]


def invoke(
    op: Op,
    values: dict[str, Any],
    fetch: Fetch,
    *,
    root: str | None = None,
    who: tuple[str, ...] = (),
    card: str | None = None,
    colours: bool = False,
    tool: bool = False,
) -> Result:
    """Run `op` on an adapter's `values` (`tool`: a tool's arguments, named as the tool
    names them), acting for the role the `who` among them name (`root`, `card`: as
    `resolve_context` takes them).  Whatever stops it on the way is its result."""
    values = dict(values)
    try:  # the role's options too, before they are taken out
        not_text(op.arguments("tool") if tool else op.params, values, tool=tool)
    except Refusal as refusal:
        return refusal.result()
    named = {key: values.pop(key, None) for key in who} if op.needs == "role" else {}
    try:
        context = resolve_context(
            root, **named, needs_role=op.needs == "role", card=card, colours=colours
        )
    except config.ConfigError as error:
        return config_refusal(error, op.unknown_role)
    fetched = fetch(op, values, context)
    if isinstance(fetched, Result):
        return fetched
    # checked above already: what came as it was; only what the fetch made is new
    made = {key: value for key, value in fetched.items() if value is not values.get(key)}
    return op.call(context, fetched, made)
