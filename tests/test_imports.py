"""How the package's modules depend on each other: one way, never in a circle.

Layers, from the bottom: the leaf modules and the core (the flat `handoffd/*.py`) ←
`board/`, `continuity/`, `digest/` ← `ops/` ← `adapters/` ← `cli`.  The graph is read from
the source (an AST walk): every `import`, at the top of a module or inside a function,
and under `TYPE_CHECKING` too — a circle through a type-only import is still a circle in
the design.  And what a helper imports when it runs is pinned, module by module: every
agent call pays for each one (docs/performance.md, start-up).
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
UPPER = ("handoffd.board", "handoffd.continuity", "handoffd.digest", "handoffd.ops",
         "handoffd.adapters", "handoffd.web", "handoffd.cli")  # fmt: skip
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


def is_core(name: str) -> bool:
    return name.count(".") == 1 and name not in ("handoffd.cli", *ENTRIES)


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


def package_of(name: str, packages: set[str]) -> str | None:
    """The subpackage module `name` lies in (`handoffd.board`), None for a flat module."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and ".".join(parts[:2]) in packages else None


def test_no_package_imports_itself_back_through_others() -> None:
    """Between packages too: the projection (`board`), the ways in (`adapters`), the
    operations (`ops`), the remote hosts (`remote`) and the web board above them (`web`)
    depend one way, so each can be read, tested and changed from below."""
    edges = graph()
    packages = {name for name, path in module_names().items() if path.name == "__init__.py"}
    packages.discard("handoffd")
    between: dict[str, set[str]] = {package: set() for package in packages}
    for name, deps in edges.items():
        source = package_of(name, packages)
        if source is not None:
            reached = {package_of(dep, packages) for dep in deps}
            between[source] |= {package for package in reached if package not in (None, source)}
    assert cycles(between) == []


def test_the_cli_is_imported_by_no_module() -> None:
    importers = sorted(m for m, deps in graph().items() if "handoffd.cli" in deps)
    assert importers == ["handoffd.entry"]  # `python -m handoffd` runs the entry too


def test_the_core_imports_nothing_from_the_layers_above_it() -> None:
    upward = {
        name: sorted(d for d in deps if d.startswith(UPPER))
        for name, deps in graph().items()
        if is_core(name)
    }
    assert {name: deps for name, deps in upward.items() if deps} == {}


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
    "handoffd.queue", "handoffd.queue.heartbeat", "handoffd.queue.inbox",
}  # fmt: skip
FINISH = NO_TASK | {"handoffd.queue.blocks"}  # and the blocks it prints (its inbox then empty)
# and the scan of the work in process, for the live file, with a look in each taken card's
# report folder for an operator's answer (a listing: no YAML)
TAKE = FINISH | {"handoffd.queue.reports", "handoffd.queue.scan"}
HELPERS = {
    "ready_for_next": TAKE,
    "done_with_current": FINISH,
    # a note: run from the table through the one way in (its draft checked as the
    # declaration says), checked (draft, terminal), queued (outbox), the daemon asked
    # after (lifecycle), and the work in process scanned for the live file (its report
    # folder looked in, as a take's)
    "swarm_handoff": NO_TASK | {
        "handoffd.adapters.sources", "handoffd.core.git", "handoffd.core.lifecycle",
        "handoffd.core.terminal", "handoffd.ops.invoke", "handoffd.ops.spec", "handoffd.ops.table",
        "handoffd.queue.draft", "handoffd.queue.outbox", "handoffd.queue.reports",
        "handoffd.queue.scan",
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
    """Each installed helper is the three lines that call its function in
    `handoffd.adapters.console` (what the entry point was), nothing else."""
    for name in INSTALLED:
        code = [line for line in (Path(BIN) / name).read_text().splitlines()[1:]
                if line and not line.startswith("#")]  # fmt: skip
        assert code == [f"from handoffd.adapters.console import {name}", f"{name}()"], name
