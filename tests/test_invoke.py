"""The one way into an operation (handoffd/ops/invoke.py): the command line, the MCP tools
and the web's forms all go through `invoke`, each value is checked once, and what the
table declares of a parameter (its limit, its default) is what every adapter offers."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import click
import pytest

from handoffd.adapters import commands, mcp, sources, web
from handoffd.core import limits
from handoffd.core.outcome import Result
from handoffd.ops import invoke, spec, table
from handoffd.ops.spec import Op, Param
from handoffd.queue import reports
from tests.conftest import Project

LONE = "lone \ud800"  # a tool's JSON string "\ud800"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The operations each adapter hands to `invoke`, in order."""
    made: list[str] = []

    def spy(op: Op, *args: Any, **kwargs: Any) -> Result:
        made.append(op.name)
        return invoke.invoke(op, *args, **kwargs)

    for adapter in (sources, mcp, web):  # the command line's way in is `sources.run`
        monkeypatch.setattr(adapter, "invoke", spy)
    return made


def test_the_command_line_the_tools_and_the_forms_each_go_through_invoke(
    project: Project, calls: list[str]
) -> None:
    root = str(project.root)
    said = commands.run(table.BY_NAME["block"], root, {"reason": LONE, "role": "QA"})
    assert said.err.startswith("INVALID_REASON: --reason is not UTF-8")
    said = mcp.run(table.TOOLS["block"], root, {"reason": LONE})
    assert said.err.startswith("INVALID_REASON: 'reason' is not UTF-8")
    said = web.Actions(root, by="ann").run("answer", "x@QA", {"text": LONE})
    assert said.err.startswith("INVALID_ANSWER: the text is not UTF-8")
    assert calls == ["block", "block", "answer"]


def test_each_value_of_a_command_is_checked_once_a_text_once_it_is_read(
    project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The options as given before the context is resolved, then only what the fetch
    made (the file's text): the file's path is not checked again, nor is the card."""
    checked: list[object] = []
    first = spec._first_surrogate
    monkeypatch.setattr(spec, "_first_surrogate", lambda v: checked.append(v) or first(v))
    answer = tmp_path / "answer.md"
    answer.write_bytes(b"ok \xc3\n")
    values = {"card": "1@QA", "said": None, "text": str(answer), "by": "ann"}
    said = commands.run(table.BY_NAME["answer"], str(project.root), values)
    assert said.err == ("INVALID_ANSWER: the text is not UTF-8 (it holds the byte 0xc3); "
                        "give it as UTF-8 text\n")  # fmt: skip
    assert checked == ["1@QA", None, str(answer), "ann", "ok \udcc3\n"]


def broken(context: object) -> Result:
    raise OSError(28, "No space left on device")


def test_an_io_error_below_any_operation_is_its_result_said_in_one_line(project: Project) -> None:
    op = Op("broken", "tests.test_invoke:broken", "B.", needs="project")
    said = invoke.invoke(op, {}, lambda op, values, context: values, root=str(project.root))
    assert (said.code, said.out) == (1, "")
    assert said.err == "I/O error: [Errno 28] No space left on device\n"


# --- a parameter's limit and default, declared in the table alone ---------------------------


def made_of(text: Param, reason: Param, n: Param) -> Op:
    return Op("x", "m:f", "X.", (text, reason, n), needs="project", form="x")


def test_a_limit_or_a_default_changed_in_the_table_changes_every_adapter(tmp_path: Path) -> None:
    """The click option, the tool's schema, the web's field and the command line's read of
    a file all take them from the parameter: a change there is a change everywhere."""
    for limit, default in [(5, 7), (9, 2)]:
        text = Param("text", spec.TEXT, "T.", limit=limit, over="OVER {limit}", default="")
        op = made_of(text, table.reason("Why."), Param("n", spec.INT, "N.", default=default))
        option = next(p for p in commands.command(op).params if p.name == "n")
        assert option.default == default
        assert mcp.input_schema(op)["properties"]["n"]["default"] == default
        fields = {field.name: field.limit for field in web.Form(op).fields}
        assert fields == {"text": limit, "reason": table.REASON_LIMIT}
        over = "x" * (limit + 1)
        assert web.within_limits(op, {"text": over}, None).err == f"OVER {limit}\n"  # type: ignore[arg-type, union-attr]
        (tmp_path / "t").write_text(over)
        assert sources.read_text(str(tmp_path / "t"), text).err == f"OVER {limit}\n"  # type: ignore[union-attr]


def test_the_help_says_the_limits_the_table_declares() -> None:
    report = {p.name: p for p in table.BY_NAME["report"].params}["text"]
    assert f"at most {table.REPORT_LIMIT // 1024} KiB" in report.help
    assert table.REPORT_LIMIT == reports.MAX_TEXT  # what a report file keeps (its reader's)
    for param in table.BY_NAME["answer"].arguments("tool"):
        if param.name == "text":
            assert f"1 byte to {table.ANSWER_LIMIT // 1024} KiB" in param.help


COMMANDS_OF_THE_DAEMON = {"run": {}, "start": {}, "up": {},
                          "demo": {"renotify_after": 1.0, "idle_after": 0.5}}  # fmt: skip


@pytest.mark.parametrize("name", COMMANDS_OF_THE_DAEMON)
def test_the_daemons_options_are_the_tables_on_every_command_that_starts_it(name: str) -> None:
    """`run`, `start`, `up` and `demo` offer the table's daemon options (the demo those it
    passes on, two with its own brisker defaults), and the table's defaults are the
    daemon's own (`serve`'s): a daemon started by hand and one started by a command
    behave alike."""
    from handoffd.cli import main
    from handoffd.daemon.daemon import serve

    made = main.get_command(click.Context(main), name)
    assert made is not None
    given = {p.name: p for p in made.params if isinstance(p, click.Option)}
    own = inspect.signature(serve).parameters
    for param in table.DAEMON:
        if name == "demo" and param.name not in ("renotify_after", "idle_after", "idle_wait"):
            assert param.name not in given
            continue
        option = given[param.name]
        assert (option.help, option.opts) == (param.help, [param.option])
        assert param.default == own[param.name].default
        assert option.default == COMMANDS_OF_THE_DAEMON[name].get(param.name, param.default)


def test_the_daemons_options_are_passed_on_as_run_takes_them_in_the_tables_order() -> None:
    assert commands.daemon_args({"stall_wakes": 4, "idle_after": 0}) == [
        "--idle-after", "0", "--stall-wakes", "4"]  # fmt: skip


def test_the_boards_own_defaults_are_the_tables() -> None:
    """The web's --window is the table's, as `status`'s is; the board's fallbacks (a claim's
    window, the stall rule when the log does not say) agree with the table."""
    from handoffd.web.command import web as serve_web

    window = next(p for p in serve_web.params if p.name == "window")
    assert window.default == table.WINDOW.default == limits.LIVENESS_WINDOW / 60
    assert {p.name: p.default for p in table.DAEMON}["stall_wakes"] == limits.STALL_WAKES
