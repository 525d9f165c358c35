"""One table of operations, every adapter made from it (handoffd/ops/table.py): each
operation is a click command and, where an agent needs it, an MCP tool, with the same
parameters, and a call refused through one is refused through every other with the same
exit code and the same message — one suite of cases run through the console scripts, the
click commands and the MCP tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from handoffd.adapters import mcp
from handoffd.cli import main
from handoffd.ops import spec
from handoffd.ops.spec import Op, Param
from handoffd.ops.table import OPS, ROLE, TOOLS
from tests.conftest import Project
from tests.mcp_support import agent, texts

# Parameters only one adapter has, by design: where the project is (a tool's server knows),
# a terminal's redraw, and a draft that is a file on the command line and fields in a tool.
CLI_ONLY = {"root", "watch"}


def command(op: Op) -> click.Command:
    made = main.get_command(click.Context(main), op.name)
    assert made is not None, op.name
    return made


def cli_names(op: Op) -> set[str]:
    """The command's parameters, by the names the operation gives them."""
    names = set()
    for param in command(op).params:
        name = param.name or ""
        names.add({"root_opt": "root", "root_arg": "root"}.get(name, name))
    return names - {"help"}


def tool_names(op: Op) -> set[str]:
    """The tool's arguments, by the names the operation gives them (a text's `text` and
    `file` are one parameter)."""
    properties = set(mcp.input_schema(op)["properties"])
    texts_ = {p.name for p in op.arguments("tool") if p.kind == spec.TEXT}
    return (properties - {"text", "file"}) | texts_ if texts_ else properties


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_every_operation_is_a_command_whose_options_are_its_parameters(op: Op) -> None:
    declared = {p.name for p in op.arguments("cli")} | {"root"}
    assert cli_names(op) == declared | ({"watch"} if op.watch else set())
    for param in (p for p in op.arguments("cli") if p.name != "root"):
        option = next(p for p in command(op).params if p.name == param.name)
        assert option.required == param.required, (op.name, param.name)


@pytest.mark.parametrize("op", list(TOOLS.values()), ids=lambda op: op.tool_name)
def test_every_tool_takes_the_commands_parameters_under_the_same_names(op: Op) -> None:
    """A tool's argument is the command's long option in snake_case; the tool lacks only
    what a tool cannot use, or (declared apart, as `tool_params`) takes a draft's fields."""
    if op.tool_params is not None:
        assert tool_names(op) == {p.name for p in op.tool_params if p.tool}
        return
    # `--role` (act for another role) is an operator's: a server acts for its own role only
    acting = {"role"} if ROLE in op.params else set()
    assert tool_names(op) == cli_names(op) - CLI_ONLY - acting - ({"watch"} if op.watch else set())


def test_the_server_lists_the_tools_the_table_declares(project: Project, tmp_path: Path) -> None:
    with agent(project, "coder", tmp_path / "server.log") as coder:
        listed = {tool.name: tool.input_schema for tool in coder.tools()}
    assert listed == {name: mcp.input_schema(op) for name, op in TOOLS.items()}


# --- one suite of refusals, every adapter --------------------------------------------------

TAKEN = "50_20260101T000000Z_000001_from_coder_to_QA.handoff"
# (role, operation, its arguments by parameter name, work in process for QA first?)
CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("QA", "done-with-current", {}, False),
    ("cleaner", "done-with-current", {}, False),
    ("QA", "release", {}, False),
    ("QA", "release", {"id": "nope"}, True),
    ("QA", "block", {"reason": "x"}, False),
    ("QA", "block", {"reason": " "}, True),
    ("QA", "block", {"id": "nope", "reason": "x"}, True),
    ("QA", "block", {"reason": "tab\there"}, True),
    ("QA", "unblock", {"id": "nope"}, True),
    ("QA", "report", {"status": "DONE"}, False),
    ("QA", "report", {"status": "BLOCKED", "text": "stuck"}, True),
    ("QA", "report", {"status": "DONE", "id": "nope"}, True),
    ("QA", "note", {}, False),
    ("QA", "status", {"role": "ghost"}, False),
    ("QA", "digest", {}, False),
    ("QA", "digest", {"id": "nope"}, False),
    ("QA", "digest", {"task": "nope"}, False),
    ("QA", "digest", {"id": "nope", "max_lines": 5}, False),
    ("QA", "carry-forward", {"since": "yesterday"}, False),
    ("QA", "carry-forward", {"role": "ghost"}, False),
]
CONSOLE = {"done-with-current": "done_with_current", "ready-for-next": "ready_for_next"}


def argv(op: Op, values: dict[str, Any], project: Project, role: str) -> list[str]:
    """The command line that gives `values` to `op`'s command."""
    words = [op.name]
    for param in op.arguments("cli"):
        if param.name not in values:
            continue
        value = values[param.name]
        if param.kind == spec.TEXT:  # a command line reads a text from a file
            path = project.draft(str(value), name=f"{param.name}.md", where=project.worktrees[role])
            words += ["--file", str(path)]
        elif param.positional:
            words.append(str(value))
        else:
            words += [_flag(param), str(value)]
    return words


def _flag(param: Param) -> str:
    return param.flag or param.option


def through_cli(project: Project, role: str, words: list[str]) -> tuple[int, str]:
    done = project.run("handoffd", *words, "--root", str(project.root), role=role)
    return done.code, done.err


def test_a_refusal_is_the_same_through_the_console_script_the_command_and_the_tool(
    project: Project, tmp_path: Path
) -> None:
    with (
        agent(project, "QA", tmp_path / "qa.log") as qa,
        agent(project, "cleaner", tmp_path / "cleaner.log") as cleaner,
    ):
        sessions = {"QA": qa, "cleaner": cleaner}
        taken = False
        for role, name, values, in_process in sorted(CASES, key=lambda case: case[3]):
            if in_process and not taken:
                project.put("QA", TAKEN, box="inbox/in_process")
                taken = True
            op = next(op for op in OPS if op.name == name)
            by_cli = through_cli(project, role, argv(op, values, project, role))
            assert by_cli[0] != 0, (name, values)
            result = sessions[role].call(op.tool_name, **values)
            assert result.is_error, (name, values)
            by_tool = (result.meta["exit_code"], texts(result)[-1])
            assert by_tool == by_cli, (name, values)
            if name in CONSOLE and not values:
                done = project.run(CONSOLE[name], role=role)
                assert (done.code, done.err) == by_cli, name


# --- every float option of every command (docs/protocol.md §17, "Part IV under hostile use") --


def commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command under `group` (lazy ones too) by the words that run it; `bench` is the
    benchmark's own command, which `handoffd bench` hands its arguments to."""
    from benchmarks import command as bench

    found: list[tuple[tuple[str, ...], Any]] = []
    context = click.Context(group)
    for name in group.list_commands(context):
        made, words = group.get_command(context, name), (*path, name)
        if words == ("bench",):
            made = bench.main
        if isinstance(made, click.Group):
            found += commands(made, words)
        elif made is not None:
            found.append((words, made))
    return found


FLOAT_OPTIONS = [
    (words, param)
    for words, made in commands(main)
    for param in made.params
    if isinstance(param, click.Option) and isinstance(param.type, click.types.FloatParamType)
]


def test_the_walk_finds_the_float_options_the_issue_named() -> None:
    """So that the test below cannot pass by finding nothing."""
    found = {(" ".join(words), param.opts[0]) for words, param in FLOAT_OPTIONS}
    for named in (("run", "--reclaim-after"), ("start", "--idle-wait"), ("up", "--check-after"),
                  ("web", "--window"), ("status", "--window"), ("demo", "--miss-rate"),
                  ("bench", "--idle-seconds")):  # fmt: skip
        assert named in found


@pytest.mark.parametrize(
    ("words", "param"), FLOAT_OPTIONS, ids=[f"{' '.join(w)} {p.opts[0]}" for w, p in FLOAT_OPTIONS]
)
def test_every_float_option_refuses_nan_infinity_and_negatives_with_a_usage_error(
    words: tuple[str, ...], param: click.Option
) -> None:
    """One parameter type for them all (`commands.Number`): `nan` compares false with every
    bound and `inf` passes any minimum, so click's own range let both through."""
    from click.testing import CliRunner

    from handoffd.adapters.commands import Number

    assert isinstance(param.type, Number), (words, param.opts)
    option = param.opts[0]
    for value in ("nan", "inf", "-inf", "Infinity", "-1"):
        done = CliRunner().invoke(main, [*words, option, value])
        assert done.exit_code == 2, (words, option, value, done.output)
        assert f"Error: Invalid value for '{option}': " in done.output, done.output
    if isinstance(param.default, float):  # and the default is one it takes
        assert param.type.convert(str(param.default), param, None) == param.default


def test_a_daemon_given_nan_says_so_as_clicks_usage_error_and_never_starts(
    project: Project,
) -> None:
    for option, value in (("--reclaim-after", "nan"), ("--idle-wait", "inf")):
        done = project.run("handoffd", "run", option, value, str(project.root), role=None,
                           cwd=project.root)  # fmt: skip
        assert done.code == 2 and done.out == ""
        assert done.err.endswith(
            f"Error: Invalid value for '{option}': '{value}' is not a finite number.\n"
        ), done.err
    assert not (project.root / ".swarmforge" / "daemon" / "handoffd.log").exists()
