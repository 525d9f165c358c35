"""The console scripts an agent runs in its shell: `swarm_handoff`, `ready_for_next`,
`done_with_current` and their `_task`/`_batch` forms (docs/protocol.md §3, §4).

One short process per agent call, so this module and what it imports use only cheap
standard modules: no click, no logging library, no regex, no typing (a test pins the
list).  Each script resolves its context from the environment, runs its operation from
the table and prints the result the way the contract has it.
"""

from __future__ import annotations

import os
import sys

from handoffd import config
from handoffd.ops.context import config_refusal, resolve_context
from handoffd.ops.table import BY_NAME
from handoffd.outcome import Exit, Result, emit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def run(op_name: str, /, **values: object) -> NoReturn:
    """Run operation `op_name` for the calling role, print its result and exit."""
    op = BY_NAME[op_name]
    try:
        context = resolve_context()
    except config.ConfigError as error:
        emit(config_refusal(error, op.unknown_role))
    emit(op.run(context, **values))


def ready_for_next() -> None:
    run("ready-for-next")


def ready_for_next_task() -> None:
    run("ready-for-next-task")


def ready_for_next_batch() -> None:
    run("ready-for-next-batch")


def done_with_current() -> None:
    run("done-with-current")


def done_with_current_task() -> None:
    run("done-with-current-task")


def done_with_current_batch() -> None:
    run("done-with-current-batch")


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
