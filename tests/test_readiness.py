"""Ready work first, and what the TASK block says beyond §4 (docs/protocol.md §13): the
installed helpers in a real project, every mix of ready, blocked and dependent files in
both receive modes (coder: task mode, cleaner: batch mode)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.queue.inbox import Inbox
from handoffd.queue.items import IS_BLOCKED, ON_DEPENDENCIES, Item, not_ready, not_ready_line
from tests.conftest import Project
from tests.test_board_commands import name, put, run

OPEN_DEP = "20260101T000000Z_000090_from_QA"  # a handoff still waiting in QA's inbox
DONE_DEP = "20260101T000000Z_000091_from_QA"  # one QA completed


def ident(n: int) -> str:
    return f"20260101T000000Z_{n:06d}_from_QA"


# What a waiting file is made of: its extra headers, and whether it may be taken.
KINDS = {
    "ready": ({}, True),
    "blocked": ({"blocked_reason": "which schema?"}, False),
    "on_open": ({"depends_on": OPEN_DEP}, False),
    "on_done": ({"depends_on": DONE_DEP}, True),
    "blocked_on_open": ({"blocked_reason": "both", "depends_on": OPEN_DEP}, False),
}


def dependencies(project: Project) -> None:
    put(project, OPEN_DEP, to="QA")
    put(project, DONE_DEP, to="QA", box="inbox/completed", completed_at="2026-01-01T00:00:00Z")


def lay(
    project: Project, role: str, kinds: tuple[str, ...], priorities: tuple[str, ...]
) -> list[str]:
    """One file per kind, in queue order; their names."""
    names = []
    for n, (kind, pri) in enumerate(zip(kinds, priorities, strict=True), 1):
        names.append(name(ident(n), role, pri))
        project.put(role, names[-1], id=ident(n), priority=pri, **KINDS[kind][0])
    return names


def test_not_ready_says_why_and_blocked_wins() -> None:
    """The pure rule: blocked beats dependencies; no header is always ready."""

    def item(**headers: str) -> Item:
        return Item("/x", hf.Handoff(list(headers.items()), ""))

    never = lambda path, ids: False  # noqa: E731
    assert not_ready(item(), never) is None
    assert not_ready(item(blocked_reason="r", depends_on="a"), never) == IS_BLOCKED
    assert not_ready(item(depends_on="a"), never) == ON_DEPENDENCIES
    assert not_ready(item(depends_on="a"), lambda path, ids: ids == ["a"]) is None
    line = not_ready_line([IS_BLOCKED, ON_DEPENDENCIES, ON_DEPENDENCIES])
    assert line == "NOT_READY: 3 waiting: 1 blocked, 2 on dependencies (see handoffd status)"


MIXES = sorted(set(itertools.product(KINDS, repeat=3)))[::7]  # a spread of 18 of the 125


@pytest.mark.parametrize("kinds", MIXES, ids="-".join)
def test_task_mode_takes_the_first_ready_file_or_says_what_is_not_ready(
    project: Project, kinds: tuple[str, ...]
) -> None:
    dependencies(project)
    names = lay(project, "coder", kinds, ("50",) * 3)
    result = run(project, "ready_for_next")
    assert result.code == 0, result.err
    ready = [n for n, kind in zip(names, kinds, strict=True) if KINDS[kind][1]]
    if ready:
        taken = project.box("coder", "inbox/in_process") / ready[0]
        assert result.out.startswith(f"TASK: {taken}\n") and result.err == ""
    else:
        blocked = sum(1 for kind in kinds if kind.startswith("blocked"))
        assert (result.out, result.err) == ("NO_TASK\n", f"NOT_READY: 3 waiting: {blocked} "
                                            f"blocked, {3 - blocked} on dependencies (see "
                                            "handoffd status)\n")  # fmt: skip


BATCH_MIXES = [
    (("blocked", "ready", "ready"), ("10", "20", "20")),  # first ready's priority: 20
    (("on_open", "on_done", "ready"), ("10", "10", "10")),
    (("ready", "blocked", "on_done"), ("30", "30", "30")),
    (("blocked_on_open", "on_open", "blocked"), ("10", "10", "10")),
    (("on_open", "ready", "ready"), ("10", "20", "30")),
]


@pytest.mark.parametrize(("kinds", "priorities"), BATCH_MIXES)
def test_batch_mode_takes_every_ready_file_of_the_first_ready_files_priority(
    project: Project, kinds: tuple[str, ...], priorities: tuple[str, ...]
) -> None:
    dependencies(project)
    names = lay(project, "cleaner", kinds, priorities)
    result = run(project, "ready_for_next", role="cleaner")
    assert result.code == 0, result.err
    ready = [(n, p) for n, kind, p in zip(names, kinds, priorities, strict=True) if KINDS[kind][1]]
    if not ready:
        assert result.out == "NO_TASK\n" and result.err.startswith("NOT_READY: 3 waiting: ")
        return
    wanted = [n for n, p in ready if p == ready[0][1]]
    [batch] = list(project.box("cleaner", "inbox/in_process").iterdir())
    assert sorted(p.name for p in batch.iterdir()) == wanted
    assert result.out.startswith(f"BATCH: {batch}\nCOUNT: {len(wanted)}\n")


def test_a_dependent_file_is_taken_once_its_dependency_is_done(project: Project) -> None:
    dependencies(project)
    put(project, ident(1), depends_on=OPEN_DEP)
    assert run(project, "ready_for_next").out == "NO_TASK\n"
    assert run(project, "ready_for_next", role="QA").code == 0
    assert run(project, "done_with_current", role="QA").code == 0
    taken = run(project, "ready_for_next")
    assert taken.out.startswith(
        f"TASK: {project.box('coder', 'inbox/in_process') / name(ident(1))}"
    )
    assert f"DEPENDS_ON: {OPEN_DEP}@QA GREEN\nPAYLOAD:\n" in taken.out


def test_the_task_block_shows_the_reason_and_each_dependency_in_order(project: Project) -> None:
    """Between TASK_NAME and PAYLOAD: BLOCKED_REASON, then one DEPENDS_ON per card."""
    dependencies(project)
    put(project, ident(1), box="inbox/in_process", task="parse", blocked_reason="ask QA",
        depends_on=f"{DONE_DEP},{OPEN_DEP}", dequeued_at="2026-01-01T00:00:00Z")  # fmt: skip
    result = run(project, "ready_for_next")
    path = project.box("coder", "inbox/in_process") / name(ident(1))
    assert result.out == (
        f"TASK: {path}\nFROM: coder\nTYPE: note\nPRIORITY: 50\nTASK_NAME: parse\n"
        f"BLOCKED_REASON: ask QA\nDEPENDS_ON: {DONE_DEP}@QA GREEN\n"
        f"DEPENDS_ON: {OPEN_DEP}@QA ORANGE\nPAYLOAD:\nDo the thing.\n"
    )


def test_a_file_without_these_headers_prints_exactly_the_section_4_block(project: Project) -> None:
    put(project, ident(1), task="t")
    result = run(project, "ready_for_next")
    path = project.box("coder", "inbox/in_process") / name(ident(1))
    assert (result.out, result.err) == (
        f"TASK: {path}\nFROM: coder\nTYPE: note\nPRIORITY: 50\nTASK_NAME: t\n"
        "PAYLOAD:\nDo the thing.\n", "",
    )  # fmt: skip


# --- every mix, in process (the rule itself; the commands above run a spread of them) -------


def inbox_with(tmp_path: Path, kinds: tuple[str, ...], priorities: tuple[str, ...]) -> Inbox:
    handoffs = tmp_path / "h"
    new = handoffs / "inbox" / "new"
    new.mkdir(parents=True)
    for n, (kind, pri) in enumerate(zip(kinds, priorities, strict=True), 1):
        fields = [("id", ident(n)), ("priority", pri), *KINDS[kind][0].items()]
        (new / name(ident(n), "x", pri)).write_bytes(hf.Handoff(fields, "b\n").render())
    return Inbox(str(handoffs))


def done_if_done_dep(path: str, wanted: list[str]) -> bool:
    return wanted == [DONE_DEP]


ALL_MIXES = list(itertools.product(KINDS, repeat=3))


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_every_mix_of_three_waiting_files_takes_exactly_the_ready_ones_first(
    tmp_path: Path, mode: str
) -> None:
    for index, kinds in enumerate(ALL_MIXES):
        priorities = ("20", "10", "20") if index % 2 else ("10", "10", "10")
        with inbox_with(tmp_path / str(index), kinds, priorities) as inbox:
            order = sorted(range(3), key=lambda i: name(ident(i + 1), "x", priorities[i]))
            ready = [i for i in order if KINDS[kinds[i]][1]]
            if mode == "task":
                taken = inbox.take_task(done_if_done_dep)
                got = [] if taken is None else [taken.path]
                wanted = [ready[0]] if ready else []
            else:
                batch = inbox.take_batch(done_if_done_dep)
                got = [] if batch is None else [item.path for item in batch[1]]
                wanted = (
                    [i for i in ready if priorities[i] == priorities[ready[0]]] if ready else []
                )
            assert [Path(p).name for p in got] == [
                name(ident(i + 1), "x", priorities[i]) for i in wanted
            ], (kinds, priorities)
            if not ready:
                reasons = inbox.ready(done_if_done_dep)[1]
                blocked = sum(1 for kind in kinds if kind.startswith("blocked"))
                assert reasons.count(IS_BLOCKED) == blocked and len(reasons) == 3
