"""How the package's modules depend on each other: one way, never in a circle.

The packages lie in layers (LAYERS, from the bottom; docs/operations.md's code map says
the same), and a module imports only from its own package or a layer below.  The graph is
read from the source (an AST walk): every `import`, at the top of a module or inside a
function, and under `TYPE_CHECKING` too — a circle through a type-only import is still a
circle in the design.  And what a helper imports when it runs is pinned, module by
module: every agent call pays for each one (docs/performance.md, start-up).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BIN, Project, helper_env
from tests.test_helpers import imported_by

PACKAGE = Path(__file__).resolve().parent.parent / "handoffd"
# The parts of the package, each a package (or one of the few modules left at the top),
# from the bottom; the parts of one layer import nothing of each other.
LAYERS = (
    ("core",),  # the format, careful I/O, the configuration, the log, one daemon per project
    ("queue",),  # the state machine and its folders
    ("continuity", "harness"),  # the live file and `resume`; Claude Code and Codex as they are
    ("wakeups",),  # the lines, the waker, the request, the panes
    ("remote",),  # NATS: the link, copies out and in, what is held
    ("delivery",),  # outbox -> new/, the journal, the watches
    ("snapshot",),  # the whole project read once
    ("board",),  # the projection and the terminal's board
    ("digest", "numbers"),  # threads' digests; the swarm's numbers
    ("daemon",),  # the loop, the bridge to other hosts, reclaiming, up and down, the audit
    ("ops",),  # the table of operations
    ("adapters",),  # commands, console scripts, hooks, MCP, the web's actions
    ("web", "demos"),
    ("cli",),
    ("entry",),
    ("__main__",),
)  # fmt: skip
TOP = {"__init__", "__main__", "entry", "cli"}  # the only modules left at the top
# `python -m handoffd` and the console script (which sends a hook straight to it, docs/
# protocol.md §16): run, never imported
ENTRIES = ("handoffd.__main__", "handoffd.entry")


def module_names() -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module `name` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names]  # a module, or a name
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `from handoffd.x import name`
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("handoffd"):
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each circle of imports, as the modules it runs through (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_walk_sees_imports_inside_functions_and_for_types() -> None:
    """The walk's own check: the core's lazy and type-only imports are edges too."""
    edges = graph()
    assert (
        "handoffd.core.lifecycle" in edges["handoffd.snapshot.snapshot"]
    )  # imported inside `take_snapshot()`
    assert "handoffd.queue.reports" in edges["handoffd.snapshot.snapshot"]  # inside, and for a type
    assert "handoffd.continuity.live" in edges["handoffd.ops.steps"]  # inside `after_step`


def test_no_module_imports_itself_back_through_others() -> None:
    assert cycles(graph()) == []


def part_of(name: str) -> str:
    """The part module `name` lies in: its package under handoffd (`board`), or the
    module itself when it is left at the top (`cli`); `handoffd` for the package's own."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "handoffd"


def parts_graph() -> dict[str, set[str]]:
    """Part -> the other parts its modules import."""
    between: dict[str, set[str]] = {}
    for name, deps in graph().items():
        source = part_of(name)
        between.setdefault(source, set()).update(part_of(d) for d in deps)
        between[source] -= {source, "handoffd"}
    return between


def test_only_the_entries_and_the_cli_are_left_at_the_top() -> None:
    """Everything else lives in a package named for what it does: `ls handoffd/` is the
    architecture."""
    assert {path.stem for path in PACKAGE.glob("*.py")} == TOP


def test_every_part_is_in_a_layer() -> None:
    layered = {part for layer in LAYERS for part in layer}
    assert set(parts_graph()) - {"handoffd"} == layered


def test_each_part_imports_only_from_the_layers_below_it() -> None:
    """The layers of the code map hold: a package reaches down, never up or sideways."""
    level = {part: depth for depth, layer in enumerate(LAYERS) for part in layer}
    against = {
        part: sorted(dep for dep in deps if level[dep] >= level[part])
        for part, deps in parts_graph().items()
        if part != "handoffd"
    }
    assert {part: deps for part, deps in against.items() if deps} == {}


def test_no_package_imports_itself_back_through_others() -> None:
    """Every part (each package, each module left at the top) depends one way, so each can
    be read, tested and changed from below."""
    assert cycles(parts_graph()) == []


def test_the_cli_is_imported_by_no_module() -> None:
    importers = sorted(m for m, deps in graph().items() if "handoffd.cli" in deps)
    assert importers == ["handoffd.entry"]  # `python -m handoffd` runs the entry too


# --- what a helper imports when it runs ---------------------------------------------------

# `ready_for_next` on an empty inbox (`NO_TASK`, what the benchmark times): the step, straight
# from the console (not through the table), the heartbeat and the live file's refresh (two
# empty folders: no scan; a file within its 30 lines: no budget renderer)
NO_TASK = {
    "handoffd", "handoffd.adapters", "handoffd.adapters.console",
    "handoffd.continuity", "handoffd.continuity.live", "handoffd.continuity.work",
    "handoffd.core", "handoffd.core.config", "handoffd.core.durable", "handoffd.core.handoff",
    "handoffd.core.outcome", "handoffd.core.safeio",
    "handoffd.ops", "handoffd.ops.context", "handoffd.ops.queue", "handoffd.ops.steps",
    "handoffd.queue", "handoffd.queue.heartbeat", "handoffd.queue.inbox", "handoffd.queue.items",
    "handoffd.queue.lock",
}  # fmt: skip
FINISH = NO_TASK | {"handoffd.queue.blocks"}  # and the blocks it prints (its inbox then empty)
# and the scan of the work in process, for the live file (a role with no report folder at
# all has no answer to look for: the reports module is not imported)
TAKE = FINISH | {"handoffd.queue.scan"}
HELPERS = {
    "ready_for_next": TAKE,
    "done_with_current": FINISH,
    # a note: run from the table through the one way in (its draft checked as the
    # declaration says), checked (draft, terminal), queued (outbox), the daemon asked
    # after (lifecycle), and the work in process scanned for the live file (its report
    # folder looked in, as a take's, when the role has one)
    "swarm_handoff": NO_TASK | {
        "handoffd.adapters.sources", "handoffd.core.git", "handoffd.core.lifecycle",
        "handoffd.core.limits",  # the table's defaults (it imports nothing)
        "handoffd.core.terminal", "handoffd.ops.invoke", "handoffd.ops.spec", "handoffd.ops.table",
        "handoffd.queue.draft", "handoffd.queue.outbox", "handoffd.queue.scan",
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_each_helper_imports_exactly_these_modules_of_the_package(
    project: Project, name: str
) -> None:
    """A module more is start-up every agent call pays; one less is worth a look too (a
    lazy import gone to the top, a test that no longer runs what it pins)."""
    project.put("coder", "50_a.handoff")
    project.run("ready_for_next", role="coder")  # work in process: done_with_current finishes
    args = (str(project.draft(project.note_draft())),) if name == "swarm_handoff" else ()
    loaded = {
        module for module in imported_by(project, name, *args) if module.startswith("handoffd")
    }
    assert sorted(loaded) == sorted(HELPERS[name])


def test_ready_for_next_on_an_empty_inbox_imports_exactly_these_modules(
    project: Project,
) -> None:
    """The call an idle agent makes most, and the one the benchmark times: no table, no
    spec, no blocks to print, no scan of empty folders."""
    loaded = {m for m in imported_by(project, "ready_for_next") if m.startswith("handoffd")}
    assert sorted(loaded) == sorted(NO_TASK)


def test_sending_a_note_starts_no_process_and_imports_nothing_to_start_one(
    project: Project,
) -> None:
    """A note never asks git anything: `subprocess` (with `re`, `enum` and threads) is for a
    git handoff's commit alone."""
    loaded = imported_by(project, "swarm_handoff", str(project.draft(project.note_draft())))
    assert sorted({"subprocess", "re", "enum", "threading", "socket"} & loaded) == []


INSTALLED = ("swarm_handoff", "ready_for_next", "ready_for_next_task", "ready_for_next_batch",
             "done_with_current", "done_with_current_task", "done_with_current_batch")  # fmt: skip


@pytest.mark.parametrize(
    ("name", "answer"), [("ready_for_next", (0, "NO_TASK\n")), ("done_with_current", (1, ""))]
)
def test_the_installed_helper_imports_no_re_before_it_starts(
    project: Project, name: str, answer: tuple[int, str]
) -> None:
    """pip's wrapper for an entry point imports `re` first: as much start-up as the whole of
    what a helper does.  The helpers are installed as small scripts of their own instead,
    each the command's one call."""
    script = Path(BIN) / name
    assert script.read_text(encoding="utf-8").splitlines()[0].startswith("#!")
    run = subprocess.run([sys.executable, "-X", "importtime", str(script)], cwd=project.root,
                         env=helper_env("coder"), capture_output=True, text=True, timeout=60,
                         check=False)  # fmt: skip
    assert (run.returncode, run.stdout) == answer, run.stderr
    imported = {line.rpartition("|")[2].strip() for line in run.stderr.splitlines()}
    assert "handoffd.adapters.console" in imported and "re" not in imported


def test_every_helper_is_installed_as_the_call_of_its_console_function() -> None:
    """Each installed helper is the lines that run its function in
    `handoffd.adapters.console` (what the entry point was) as a script, nothing else."""
    for name in INSTALLED:
        code = [line for line in (Path(BIN) / name).read_text().splitlines()[1:]
                if line and not line.startswith("#")]  # fmt: skip
        imported = ", ".join(sorted([name, "script"]))
        assert code == [f"from handoffd.adapters.console import {imported}",
                        f"script({name})"], name  # fmt: skip
