"""The console scripts an agent runs in its shell: `swarm_handoff`, `ready_for_next`,
`done_with_current` and their `_task`/`_batch` forms (docs/protocol.md §3, §4).

One short process per agent call, so this module and what it imports use only cheap
standard modules: no click, no logging library, no regex, no typing (a test pins the
list).  Each script resolves its context from the environment, runs its operation and
prints the result the way the contract has it.  The scripts that take and finish work
call their step straight, without the table (`STEPS`, pinned to it by a test): building
the table's declarations was a sixth of what such a helper added to the interpreter's own
start-up, paid on every agent call.
"""

from __future__ import annotations

import os
import sys

from handoffd.core import config
from handoffd.core.outcome import Exit, Result, emit
from handoffd.ops.context import config_refusal, guarded, resolve_context

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

# The function in `handoffd.ops.queue` each operation of taking and finishing runs: the
# table's own target for it, with none of its parameters given and the table's unknown-role
# line (tests/test_console.py pins both to the table).
STEPS = {
    "ready-for-next": "take",
    "ready-for-next-task": "take_task",
    "ready-for-next-batch": "take_batch",
    "done-with-current": "finish",
    "done-with-current-task": "finish_task",
    "done-with-current-batch": "finish_batch",
}


def step(op_name: str) -> NoReturn:
    """Run the step of operation `op_name` (one of `STEPS`) for the calling role, print its
    result and exit: what `run(op_name)` does, without reading the table."""
    try:
        context = resolve_context()
    except config.ConfigError as error:
        emit(config_refusal(error))
    from handoffd.ops import queue

    # as `Op.call` runs an operation, with no value to check: a step takes none
    emit(guarded(lambda: getattr(queue, STEPS[op_name])(context)))


def script(helper: Callable[[], object]) -> NoReturn:
    """Run `helper` as its installed script (bin/) does, or the board a person watches
    (`handoffd status`, `entry.plain`): its output written and flushed, then the process
    ends at once with the helper's exit code, without the interpreter's finalization.  A
    helper leaves nothing for it: every file it wrote is synced and closed, its locks go
    with the process, it registers no exit handler; and the teardown of what its imports
    made (a collection over every object, each module's dict) was a seventh of what a
    take added to the bare interpreter (valgrind's count).  An error that is not the
    helper's exit (a traceback) ends the process the usual way."""
    try:
        helper()
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if code and not isinstance(done.code, int):
            sys.stderr.write(f"{done.code}\n")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a reader that went away: what CPython itself exits with then
        code = 120
    os._exit(code)


def run(op_name: str, /, **values: object) -> NoReturn:
    """Run operation `op_name` for the calling role, as given, through the one way in
    (`invoke`); print its result and exit."""
    from handoffd.ops.invoke import invoke
    from handoffd.ops.table import BY_NAME

    emit(invoke(BY_NAME[op_name], values, lambda op, given, context: given))


def ready_for_next() -> None:
    step("ready-for-next")


def ready_for_next_task() -> None:
    step("ready-for-next-task")


def ready_for_next_batch() -> None:
    step("ready-for-next-batch")


def done_with_current() -> None:
    step("done-with-current")


def done_with_current_task() -> None:
    step("done-with-current-task")


def done_with_current_batch() -> None:
    step("done-with-current-batch")


def swarm_handoff() -> None:
    """`swarm_handoff DRAFT`, its checks in the contract's order (docs/protocol.md §3)."""
    from handoffd.adapters.sources import read_draft
    from handoffd.ops.queue import USAGE

    args = sys.argv[1:]
    if args in (["--help"], ["-h"]):
        emit(Result(Exit.OK, USAGE))
    if len(args) != 1:
        emit(Result(Exit.FAILED, "", USAGE))
    path = args[0]
    if not os.path.isfile(path):
        emit(Result(Exit.FAILED, "", f"Draft file not found: {path}\n"))
    run("send-handoff", draft=read_draft(path), name=path, consumed=lambda: os.unlink(path))
