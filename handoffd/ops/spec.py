"""How an operation is declared: its parameters, where its function lives, what it returns.

A declaration is data, cheap to import (`swarm_handoff` reads the table on every call;
the helpers that take and finish work call their step without it): the function is named
by `"module:attribute"` and imported only when the operation runs.
Every adapter reads the same declaration, so a parameter is spelled once and the click
command, the MCP tool's schema and the web form cannot drift apart.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from handoffd.core.outcome import Result
    from handoffd.ops.context import Context

# What a parameter holds.  TEXT and DRAFT are texts each adapter fetches its own way: the
# command line from a file (or stdin), a tool from its arguments, the web from a form.
STR, INT, FLOAT, FLAG, CHOICE, NAMES, TEXT, DRAFT = (
    "str", "int", "float", "flag", "choice", "names", "text", "draft",
)  # fmt: skip
INVALID_ARGUMENTS = "INVALID_ARGUMENTS"  # the refusal of a value that is no text, by default


class Param:
    """One parameter: its name (the function's keyword and the tool's argument), its kind,
    the help a person or an agent reads, and how the command line spells it."""

    __slots__ = (
        "choices", "cli", "default", "flag", "help", "kind", "limit", "metavar", "minimum",
        "name", "open_minimum", "over", "positional", "required", "schema", "token", "tool",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        kind: str,
        help: str,
        *,
        default: object = None,
        required: bool = False,
        positional: bool = False,
        flag: str | None = None,
        metavar: str | None = None,
        choices: tuple[str, ...] = (),
        minimum: float | None = None,
        open_minimum: bool = False,
        limit: int = 0,
        over: str = "",
        cli: bool = True,
        tool: bool = True,
        schema: dict[str, Any] | None = None,
        token: str = INVALID_ARGUMENTS,
    ) -> None:
        self.name = name
        self.kind = kind
        self.help = help
        self.default = default
        self.required = required
        self.positional = positional  # an argument on the command line, not an --option
        self.flag = flag  # the command line's spelling(s), e.g. "-n"; default --the-name
        self.metavar = metavar
        self.choices = choices
        self.minimum = minimum
        self.open_minimum = open_minimum  # the minimum itself is not allowed
        self.limit = limit  # TEXT: bytes at most (an adapter reads no more than one past it);
        # a line (a reason): characters at most, as long as the web's field lets it be
        self.over = over  # TEXT: the refusal of a text past the limit ({limit} in it)
        self.cli = cli  # on the command line
        self.tool = tool  # an argument of the MCP tool
        self.schema = schema  # the tool's JSON schema of it, where the kind's is not right
        self.token = token  # the refusal's token when its value is no text (not UTF-8)

    @property
    def option(self) -> str:
        """The long option of the command line: `--max-lines` for `max_lines`."""
        return "--" + self.name.replace("_", "-")

    @property
    def shown(self) -> str:
        """How a refusal names it: `--reason`, `CARD`, `the text` (a file's or a tool's)."""
        if self.kind == TEXT:
            return "the text"
        return (self.metavar or self.name).strip("[]") if self.positional else self.option

    def __repr__(self) -> str:
        return f"Param({self.name!r}, {self.kind})"


class Op:
    """One operation: its command name, its function, its parameters and its adapters.

    `needs` is what the operation acts for: `role` (the calling role, or `--role`, with its
    agent and conversation), `project` (the project alone; a role may be a filter).
    """

    __slots__ = (
        "about", "form", "help", "name", "needs", "offer", "output", "params", "root_positional",
        "target", "tool", "tool_params", "unknown_role", "watch",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        target: str,
        help: str,
        params: tuple[Param, ...] = (),
        *,
        about: str = "",
        needs: str = "role",
        root_positional: bool = False,
        tool: bool = True,
        tool_params: tuple[Param, ...] | None = None,
        output: dict[str, Any] | None = None,
        unknown_role: str = "Unknown role: {}",
        watch: bool = False,
        form: str = "",
        offer: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.target = target
        self.help = help  # one line: the command's short help, the tool's first sentence
        self.about = about  # what an agent reads about the tool beyond that line
        self.params = params
        self.needs = needs
        self.root_positional = root_positional  # `[ROOT]` as in docs/protocol.md
        self.tool = tool
        self.tool_params = tool_params  # the tool's own parameters, where they differ
        self.output = output  # the MCP result schema of its `--json` structure
        self.unknown_role = unknown_role  # how a role missing from roles.tsv is named
        self.watch = watch  # the command may redraw it (`--watch`)
        self.form = form  # the web board's action name, for an operator's action
        # the cards whose pages offer that form, by what they are (any one matches):
        # `red` (a red copy), `blocked`, `open` (a copy in new/ or in process),
        # `in_process`, `failed` (a refused original), `completed` (a completed copy)
        self.offer = offer

    @property
    def card_names_role(self) -> bool:
        """Whether an ID written as a card, `<id>@<role>`, names the role acted for: only
        for an operator's action, one the board offers as a form (docs/protocol.md §8),
        never for an agent's own step such as `report`, which may take or finish work."""
        return bool(self.form)

    @property
    def tool_name(self) -> str:
        return self.name.replace("-", "_")

    def arguments(self, adapter: str) -> tuple[Param, ...]:
        """The parameters `adapter` ("cli" or "tool") offers."""
        if adapter == "tool":
            given = self.params if self.tool_params is None else self.tool_params
            return tuple(p for p in given if p.tool)
        return tuple(p for p in self.params if p.cli)

    def function(self) -> Callable[..., Result]:
        """The operation's function, imported now."""
        module, _, attribute = self.target.partition(":")
        return getattr(__import__(module, fromlist=[attribute]), attribute)  # type: ignore[no-any-return]

    def run(self, context: Context, **values: object) -> Result:
        """Run the operation, its values checked first (`not_text`)."""
        return self.call(context, values, values)

    def call(self, context: Context, values: dict[str, Any], unchecked: dict[str, Any]) -> Result:
        """Run the operation on `values`, refusing first any of `unchecked` that is no UTF-8
        text; a refusal, a configuration or an I/O error from anywhere below is its result."""
        from handoffd.ops.context import guarded

        def checked() -> Result:
            not_text(self.params, unchecked)
            return self.function()(context, **values)

        return guarded(checked)

    def __repr__(self) -> str:
        return f"Op({self.name!r})"


# --- what every text a parameter holds must be -----------------------------------------------


def not_text(params: tuple[Param, ...], values: dict[str, Any], tool: bool = False) -> None:
    """Refuse a value that is not UTF-8 text, whichever adapter it came through: a command
    line's argument or file with bytes that are not UTF-8 (Python keeps them as lone
    surrogates, `surrogateescape`), a tool's JSON string with a lone `\\ud800`.  Nothing
    below could store, print or send it (the encoder raises), so it never gets there.
    A tool's arguments are named as the tool names them (`tool`)."""
    from handoffd.core.outcome import Exit, Refusal

    named = {param.name: param for param in params}
    for name, value in values.items():
        param = named.get(name)  # not one: what an adapter made (a draft's path, a callback)
        bad = None if param is None else _first_surrogate(value)
        if param is None or bad is None:
            continue
        shown = f"'{name}'" if tool else param.shown
        raise Refusal(Exit.REFUSED, f"{param.token}: {shown} is not UTF-8 ({_which(bad)}); "
                      "give it as UTF-8 text")  # fmt: skip


def _first_surrogate(value: object) -> str | None:
    """The first lone surrogate in a text, or in a list of texts (None: none)."""
    if isinstance(value, str):
        if value.isprintable() or value.isascii():  # nearly always: nothing to look for
            return None
        return next((char for char in value if "\ud800" <= char <= "\udfff"), None)
    if isinstance(value, list | tuple):
        return next((bad for item in value if (bad := _first_surrogate(item))), None)
    return None


def _which(char: str) -> str:
    """What a person can look for: the byte a command line or a file held, or the escape."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as `surrogateescape` keeps it
        return f"it holds the byte 0x{code - 0xDC00:02x}"
    return f"it holds a lone surrogate \\u{code:04x}"
