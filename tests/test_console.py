"""The console scripts (handoffd/adapters/console.py): the scripts that take and finish work
call their step straight, without reading the table, so what each runs is pinned here to
the table's declaration, and what it says to what running that declaration says."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from handoffd.adapters import console
from handoffd.ops.context import DEFAULT_UNKNOWN
from handoffd.ops.table import BY_NAME, OPS
from tests.conftest import Project

QUEUE = "handoffd.ops.queue:"
SCRIPTS = {name.replace("-", "_"): name for name in console.STEPS}  # ready_for_next: its op


def test_each_step_is_the_function_the_table_declares_for_its_operation() -> None:
    for name, function in console.STEPS.items():
        op = BY_NAME[name]
        assert op.target == QUEUE + function, name
        assert op.needs == "role", name
        # `step` refuses a role missing from roles.tsv in the default words, as `run` would
        assert op.unknown_role == DEFAULT_UNKNOWN, name


def test_every_take_and_finish_in_the_table_is_a_step() -> None:
    """A new way to take or finish work in the table is a step here too (or a script that
    runs through the table, as swarm_handoff does)."""
    runs_queue = {op.name for op in OPS if op.target.startswith(QUEUE)}
    assert runs_queue - set(console.STEPS) == {"send-handoff"}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_each_script_runs_the_step_of_its_name(
    script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    called: list[str] = []
    monkeypatch.setattr(console, "step", called.append)
    getattr(console, script)()
    assert called == [SCRIPTS[script]]


def said(call: Callable[[], object], capsys: pytest.CaptureFixture[str]) -> tuple[object, ...]:
    """The exit code, stdout and stderr of a call that ends by `emit`."""
    with pytest.raises(SystemExit) as exited:
        call()
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def set_mode(project: Project, role: str, mode: str) -> None:
    path = project.root / ".swarmforge" / "roles.tsv"
    rows = path.read_text(encoding="utf-8").split("\n")
    for number, row in enumerate(rows):
        fields = row.split("\t")
        if fields[0] == role:
            rows[number] = "\t".join([*fields[:6], mode, *fields[7:]])
    path.write_text("\n".join(rows), encoding="utf-8")


CASES = ("nothing to do", "the role of the directory", "an unknown role", "no project",
         "a mode of neither")  # fmt: skip


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", sorted(console.STEPS))
def test_a_step_says_what_its_operation_run_from_the_table_says(
    project: Project,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    case: str,
) -> None:
    """The same exit code and the same words, on the states a take or finish leaves as
    they were (`NO_TASK`, `NO_CURRENT_TASK`, the refusals of the role or its mode)."""
    monkeypatch.chdir(project.worktrees["coder"])
    monkeypatch.setenv("SWARMFORGE_ROLE", "coder")
    if case == "an unknown role":
        monkeypatch.setenv("SWARMFORGE_ROLE", "coderr")
    elif case == "the role of the directory":  # cleaner's, in batch mode
        monkeypatch.delenv("SWARMFORGE_ROLE")
        monkeypatch.chdir(project.worktrees["cleaner"])
    elif case == "no project":
        empty = tmp_path / "elsewhere"
        empty.mkdir()
        monkeypatch.chdir(empty)
        monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    elif case == "a mode of neither":
        set_mode(project, "coder", "stream")
    straight = said(lambda: console.step(name), capsys)
    through_the_table = said(lambda: console.run(name), capsys)
    assert straight == through_the_table
    assert straight[0] != 0 or "NO_TASK" in str(straight[1]), straight


@pytest.mark.parametrize(
    ("body", "code", "out", "err"),
    [
        ("print('TASK: x')", 0, "TASK: x\n", ""),
        ("print('NO_TASK', end=''); sys.exit(3)", 3, "NO_TASK", ""),
        ("sys.stderr.write('half'); sys.exit('said')", 1, "", "halfsaid\n"),
        ("sys.exit()", 0, "", ""),
    ],
)
def test_a_script_flushes_what_its_helper_printed_and_ends_with_its_exit_code(
    body: str, code: int, out: str, err: str
) -> None:
    """`console.script`, what each installed helper runs: the helper's output, all of it
    (buffered or not), and its exit code, with no interpreter teardown after (an exit
    handler is never run: a helper registers none, and the teardown is what it saves)."""
    import subprocess
    import sys

    program = (
        "import atexit, sys\n"
        "from handoffd.adapters.console import script\n"
        "atexit.register(lambda: print('TEARDOWN'))\n"
        f"def helper():\n    {body}\n"
        "script(helper)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (code, out, err)
