"""The `handoffd` click commands, made from the table of operations, and the options the
hand-written commands (`run`, `start`, `web`…) share with them.

A command parses its options, resolves the context, runs the operation and renders its
result: the text on stdout and stderr, the contract's exit code (2 for a refusal, never
click's generic 1).  Nothing here knows what an operation does.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from handoffd.adapters.sources import ROLE_KEYS, run, use_colours
from handoffd.core import config
from handoffd.core.outcome import Result, emit
from handoffd.ops import spec
from handoffd.ops.context import config_refusal
from handoffd.ops.spec import Op, Param
from handoffd.ops.table import DAEMON, ROOT

WATCH_EVERY = 2.0  # seconds between redraws under --watch
__all__ = ["ROLE_KEYS", "command", "run", "use_colours"]  # `run` and the rest: sources'


# --- the shared options -------------------------------------------------------------------


def root_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--root ROOT` (env HANDOFFD_ROOT): every command takes it (docs/protocol.md §8)."""
    return click.option(
        "--root",
        "root_opt",
        envvar="HANDOFFD_ROOT",
        type=click.Path(file_okay=False),
        help=ROOT.help,
    )(function)


def root_argument(function: Callable[..., Any]) -> Callable[..., Any]:
    """An optional positional ROOT and `--root ROOT`, handed on as `root`: a ROOT given in
    place wins (docs/protocol.md §8)."""

    @functools.wraps(function)
    def command(*args: Any, root: str | None, root_opt: str | None, **kwargs: Any) -> Any:
        return function(*args, root=root or root_opt, **kwargs)

    positional = click.argument("root", required=False, type=click.Path(file_okay=False))
    return positional(root_option(command))


def root_of(root: str | None) -> str:
    """The root a hand-written command names (absolute), or the one found from the working
    directory; none found is exit 1, said plainly."""
    try:
        return os.path.abspath(root) if root else config.find_root()
    except config.ConfigError as error:
        emit(config_refusal(error))


def project_of(root: str | None) -> str:
    """The project root a hand-written command acts on; no project is exit 1, said plainly."""
    from handoffd.ops.context import project_root

    try:
        return project_root(root)
    except config.ConfigError as error:
        emit(config_refusal(error))


# --- commands from the table --------------------------------------------------------------


def command(op: Op) -> click.Command:
    """The click command of `op`."""

    def callback(**values: Any) -> None:
        positional, option = values.pop("root_arg", None), values.pop("root_opt", None)
        root = positional or option  # a ROOT given in place wins (docs/protocol.md §8)
        watch = values.pop("watch", False)
        emit(_watch(op, root, values) if watch else run(op, root, values))

    params: list[click.Parameter] = [
        click_param(p) for p in op.arguments("cli") if p.name != "root"
    ]
    folder = click.Path(file_okay=False)
    if op.root_positional:
        params.append(click.Argument(["root_arg"], required=False, metavar="[ROOT]", type=folder))
    params.append(
        click.Option(["--root", "root_opt"], envvar="HANDOFFD_ROOT", type=folder, help=ROOT.help)
    )
    if op.watch:
        redraw = f"Redraw every {WATCH_EVERY:g} s until Ctrl-C."
        params.append(click.Option(["--watch"], is_flag=True, help=redraw))
    return click.Command(
        op.name,
        callback=callback,
        params=params,
        help=op.help,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


def _watch(op: Op, root: str | None, values: dict[str, Any]) -> Result:
    """`--watch`: redraw the result every few seconds until Ctrl-C (exit 0)."""
    clear = "\033[H\033[2J" if sys.stdout.isatty() else ""
    try:
        while True:
            result = run(op, root, dict(values))
            if not result.ok:
                return result
            sys.stdout.write(clear + result.out)
            sys.stdout.flush()
            time.sleep(WATCH_EVERY)
    except KeyboardInterrupt:  # Ctrl-C is how a watch ends: no traceback, exit 0
        return Result()


def click_param(param: Param) -> click.Parameter:
    """The click argument or option that spells `param` on the command line."""
    if param.kind == spec.TEXT:
        helped = param.help + " From a file (- for stdin)."
        return click.Option(["--file", param.name], metavar="F|-", help=helped)
    if param.positional:
        kind = click.Path(dir_okay=False) if param.kind == spec.DRAFT else None
        return click.Argument(
            [param.name], required=param.required, metavar=param.metavar, type=kind
        )
    return click.Option(**option_of(param))


def option_of(param: Param) -> dict[str, Any]:
    """What makes the click option of `param` (its `param_decls` and the rest)."""
    names = [param.flag or param.option, param.name]
    if param.kind == spec.FLAG:
        return {"param_decls": names, "is_flag": True, "help": param.help}
    options: dict[str, Any] = {"param_decls": names, "help": param.help,
                               "metavar": param.metavar, "required": param.required}  # fmt: skip
    if param.kind == spec.CHOICE:
        options["type"] = click.Choice(param.choices)
        options.pop("metavar")
    elif param.kind in (spec.INT, spec.FLOAT):
        options.update(type=_number(param), show_default=True)
    elif param.kind == spec.NAMES:  # given once per name (`--depends-on ID`…)
        options["multiple"] = True
    if param.default is not None:
        options["default"] = param.default
    return options


def option(param: Param, **changed: Any) -> Callable[[Callable[..., Any]], Any]:
    """`param` as the option of a hand-written command, with what `changed` for it."""
    options = option_of(param) | changed
    return click.option(*options.pop("param_decls"), **options)


def daemon_options(*names: str, **defaults: Any) -> Callable[[Callable[..., Any]], Any]:
    """The daemon's options (`table.DAEMON`; only `names`, if given), with the `defaults`
    a command has in place of the daemon's own (the demo's brisker turns)."""

    def decorate(function: Callable[..., Any]) -> Any:
        for param in reversed([p for p in DAEMON if not names or p.name in names]):
            changed = {"default": defaults[param.name]} if param.name in defaults else {}
            function = option(param, **changed)(function)
        return function

    return decorate


def daemon_args(values: dict[str, Any]) -> list[str]:
    """The daemon's options in `values` as `handoffd run` takes them."""
    return [arg for p in DAEMON if p.name in values for arg in (p.option, str(values[p.name]))]


class Number(click.FloatRange):
    """The one type of every float option of every command (the table's, the hand-written
    ones', the benchmark's): a finite number, never below its minimum (0 unless declared
    higher; `open_minimum`: above it), never above its maximum if it has one.  click's own
    `FloatRange` lets `nan` past every bound (it compares false with all) and `inf` past
    any minimum: `--reclaim-after nan` never reclaimed, and its `started` log line was no
    JSON.  A bad value is click's usage error, exit 2."""

    name = "float"

    def __init__(
        self, minimum: float = 0.0, maximum: float | None = None, open_minimum: bool = False
    ) -> None:
        if not minimum >= 0:  # a negative count of seconds or share means nothing here
            raise ValueError(f"a float option's minimum is at least 0, not {minimum}")
        super().__init__(min=minimum, max=maximum, min_open=open_minimum)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


def _number(param: Param) -> click.ParamType[Any]:
    if param.kind == spec.INT:
        return click.INT if param.minimum is None else click.IntRange(min=int(param.minimum))
    return Number(param.minimum or 0.0, open_minimum=param.open_minimum)
