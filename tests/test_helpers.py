"""The agent-facing commands end to end (docs/protocol.md §1, §3, §4): the installed console
scripts run as subprocesses in a real git project, as a role or with SWARMFORGE_ROLE unset.

Roles of the fixture project: coder (main checkout, task mode), cleaner
(.worktrees/cleaner, batch mode), QA (.worktrees/QA, empty mode column = task).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.ops.queue import USAGE
from tests.conftest import Project, Result, git, run_command, snapshot, without_daemon_warning

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"
STAMP = r"\d{8}T\d{6}Z"
BATCH_NAME = re.compile(rf"batch_{STAMP}_\d{{6}}")

BODIES = {
    "blank-lines-inside": "first paragraph\n\n\nsecond paragraph\n",
    "no-trailing-newline": "the last line has no newline",
    "non-ascii": "Caf\u00e9 na\u00efve \u00fcber \U0001f680\U0001f389 \u2014 \u65e5\u672c\u8a9e\n",
    "crlf-inside": "windows line\r\nanother\r\n\r\nlast\n",
}


# --- expected output --------------------------------------------------------------------


def task_block(
    path: Path | str,
    body: str,
    *,
    sender: str = "coder",
    kind: str = "note",
    priority: str = "50",
    task: str | None = None,
) -> str:
    lines = [f"TASK: {path}", f"FROM: {sender}", f"TYPE: {kind}", f"PRIORITY: {priority}"]
    if task is not None:
        lines.append(f"TASK_NAME: {task}")
    return "\n".join([*lines, "PAYLOAD:"]) + "\n" + body


def batch_block(directory: Path | str, blocks: list[str], priority: str = "50") -> str:
    head = f"BATCH: {directory}\nCOUNT: {len(blocks)}\nPRIORITY: {priority}\n"
    return head + "".join(f"\nBATCH_ITEM: {n}\n{block}" for n, block in enumerate(blocks, 1))


def refusal(message: str, paths: list[Path] | tuple[Path, ...] = ()) -> str:
    return "".join(f"{line}\n" for line in [message, *(f"- {p}" for p in paths)])


def assert_result(result: Result, code: int, out: str = "", err: str = "") -> None:
    assert (result.code, result.out, result.err) == (code, out, err)


# --- reading the inbox ------------------------------------------------------------------


def names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory)) if directory.exists() else []


def header_keys(path: Path) -> list[str]:
    return [key for key, _ in hf.read(str(path)).headers]


def queue_state(project: Project, role: str) -> dict[str, bytes | None]:
    """A role's handoff tree less its heartbeat, which every helper call renews (§8)."""
    tree = snapshot(project.handoffs(role))
    tree.pop("heartbeat", None)
    return tree


def only_batch(project: Project, role: str, box: str = "inbox/in_process") -> Path:
    [name] = names(project.box(role, box))
    assert BATCH_NAME.fullmatch(name), name
    return project.box(role, box) / name


def queued_files(project: Project, role: str) -> list[str]:
    return [n for n in names(project.box(role, "outbox")) if n.endswith(".handoff")]


# --- inbox shapes for the refusal table (each returns the paths the refusal lists) ------


def a_batch(project: Project, role: str) -> list[Path]:
    batch = project.box(role, "inbox/in_process") / "batch_20260615T140531Z_000001"
    project.put(role, "50_a.handoff", box=f"inbox/in_process/{batch.name}")
    return [batch]


def two_batches(project: Project, role: str) -> list[Path]:
    batches = [a_batch(project, role)[0], a_batch(project, role)[0].with_name("batch_x_000002")]
    project.put(role, "50_b.handoff", box=f"inbox/in_process/{batches[1].name}")
    return sorted(batches)


def a_task(project: Project, role: str) -> list[Path]:
    return [project.put(role, "50_a.handoff", box="inbox/in_process")]


def two_tasks(project: Project, role: str) -> list[Path]:
    return [*a_task(project, role), project.put(role, "60_b.handoff", box="inbox/in_process")]


def a_task_and_a_batch(project: Project, role: str) -> list[Path]:
    """Both shapes at once: task mode lists the batch, batch mode lists the task."""
    task, batch = a_task(project, role), a_batch(project, role)
    return task if project.role_mode(role) == "batch" else batch


def nothing(project: Project, role: str) -> list[Path]:
    return []


Shape = Callable[[Project, str], list[Path]]

# (command, shape, message, exit code): every refusal row of docs/protocol.md §4. Task commands
# run as coder (task mode), batch commands as cleaner (batch mode), so the mode-dispatching
# command of the same role must refuse identically.
REFUSALS: list[tuple[str, Shape, str, int]] = [
    (
        "ready_for_next_task",
        a_task_and_a_batch,
        "TASK_IN_PROCESS_IS_BATCH: use ready_for_next.sh or done_with_current.sh.",
        2,
    ),
    (
        "ready_for_next_task",
        two_tasks,
        "AMBIGUOUS_TASK_STATE: multiple tasks are already in process.",
        2,
    ),
    (
        "ready_for_next_batch",
        a_task_and_a_batch,
        "TASK_IN_PROCESS_IS_SINGLE: use ready_for_next.sh or done_with_current.sh.",
        2,
    ),
    (
        "ready_for_next_batch",
        two_batches,
        "AMBIGUOUS_TASK_STATE: multiple batches are already in process.",
        2,
    ),
    ("done_with_current_task", a_batch, "CURRENT_WORK_IS_BATCH: use done_with_current.sh.", 2),
    ("done_with_current_task", nothing, "NO_CURRENT_TASK", 1),
    (
        "done_with_current_task",
        two_tasks,
        "AMBIGUOUS_TASK_STATE: multiple tasks are in process.",
        2,
    ),
    (
        "done_with_current_batch",
        a_task,
        "CURRENT_WORK_IS_SINGLE_TASK: use done_with_current.sh.",
        2,
    ),
    ("done_with_current_batch", nothing, "NO_CURRENT_BATCH", 1),
    (
        "done_with_current_batch",
        two_batches,
        "AMBIGUOUS_TASK_STATE: multiple batches are in process.",
        2,
    ),
]


def refusal_cases() -> list[object]:
    cases = []
    for command, shape, message, code in REFUSALS:
        role = "coder" if command.endswith("_task") else "cleaner"
        for called in (command, command.rsplit("_", 1)[0]):
            case_id = f"{called}-as-{role}-{shape.__name__}"
            cases.append(pytest.param(called, role, shape, message, code, id=case_id))
    return cases


@pytest.mark.parametrize(("command", "role", "shape", "message", "code"), refusal_cases())
def test_refusals_print_the_token_and_paths_and_change_nothing(
    project: Project, command: str, role: str, shape: Shape, message: str, code: int
) -> None:
    listed = shape(project, role)
    project.put(role, "00_waiting.handoff")  # new work must not be touched either
    before = queue_state(project, role)
    assert_result(project.run(command, role=role), code, err=refusal(message, listed))
    assert queue_state(project, role) == before


# --- ready_for_next_task ----------------------------------------------------------------


def test_ready_for_next_task_with_nothing_waiting_prints_no_task(project: Project) -> None:
    assert_result(project.run("ready_for_next_task", role="coder"), 0, "NO_TASK\n")
    project.box("coder", "inbox/new").mkdir(parents=True)
    assert_result(project.run("ready_for_next", role="coder"), 0, "NO_TASK\n")


def test_ready_for_next_task_takes_the_first_file_by_name(project: Project) -> None:
    project.put("coder", "50_later.handoff")
    project.put(
        "coder", "20_first.handoff", body="First.\n", priority="20", type="git_handoff", task="t-9"
    )
    result = project.run("ready_for_next_task", role="coder")
    taken = project.box("coder", "inbox/in_process/20_first.handoff")
    expected = task_block(taken, "First.\n", kind="git_handoff", priority="20", task="t-9")
    assert_result(result, 0, expected)
    assert names(project.box("coder", "inbox/new")) == ["50_later.handoff"]
    assert header_keys(taken)[-1] == "dequeued_at"
    assert re.fullmatch(ISO, hf.read(str(taken)).get("dequeued_at") or "")


def test_ready_for_next_task_resumes_the_task_in_process_without_restamping(
    project: Project,
) -> None:
    project.put("coder", "50_a.handoff", body="Resume me.\n")
    first = project.run("ready_for_next_task", role="coder")
    taken = project.box("coder", "inbox/in_process/50_a.handoff")
    stamped = taken.read_bytes()
    project.put("coder", "00_urgent.handoff")
    assert_result(project.run("ready_for_next_task", role="coder"), 0, first.out)
    assert taken.read_bytes() == stamped


def test_unknown_headers_print_as_unknown_and_priority_defaults_to_50(project: Project) -> None:
    path = project.box("coder", "inbox/new") / "x.handoff"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"id: x\n\nbare\n")
    taken = project.box("coder", "inbox/in_process/x.handoff")
    expected = task_block(taken, "bare\n", sender="unknown", kind="unknown")
    assert_result(project.run("ready_for_next", role="coder"), 0, expected)


# --- ready_for_next_batch ---------------------------------------------------------------


def test_ready_for_next_batch_with_nothing_waiting_prints_no_task(project: Project) -> None:
    assert_result(project.run("ready_for_next_batch", role="cleaner"), 0, "NO_TASK\n")
    assert_result(project.run("ready_for_next", role="cleaner"), 0, "NO_TASK\n")


def test_ready_for_next_batch_takes_every_file_of_the_first_priority_into_one_dir(
    project: Project,
) -> None:
    project.put("cleaner", "30_a.handoff", body="A\n", priority="30")
    project.put("cleaner", "30_b.handoff", body="B\n", priority="30", type="git_handoff", task="tb")
    project.put("cleaner", "40_c.handoff", body="C\n", priority="40")
    project.put("cleaner", "50_d.handoff", body="D\n", priority="30")  # the header decides
    result = project.run("ready_for_next_batch", role="cleaner")
    batch = only_batch(project, "cleaner")
    blocks = [
        task_block(batch / "30_a.handoff", "A\n", priority="30"),
        task_block(batch / "30_b.handoff", "B\n", kind="git_handoff", priority="30", task="tb"),
        task_block(batch / "50_d.handoff", "D\n", priority="30"),
    ]
    assert_result(result, 0, batch_block(batch, blocks, "30"))
    assert names(project.box("cleaner", "inbox/new")) == ["40_c.handoff"]
    assert all(header_keys(batch / n)[-1] == "dequeued_at" for n in names(batch))


def test_ready_for_next_batch_resumes_the_batch_in_process_without_restamping(
    project: Project,
) -> None:
    project.put("cleaner", "50_a.handoff")
    first = project.run("ready_for_next", role="cleaner")
    before = snapshot(project.box("cleaner", "inbox/in_process"))
    project.put("cleaner", "50_b.handoff")
    assert_result(project.run("ready_for_next_batch", role="cleaner"), 0, first.out)
    assert snapshot(project.box("cleaner", "inbox/in_process")) == before


# --- done_with_current ------------------------------------------------------------------


def test_done_with_current_task_completes_then_prints_no_task(project: Project) -> None:
    project.put("coder", "50_a.handoff")
    project.run("ready_for_next", role="coder")
    result = project.run("done_with_current_task", role="coder")
    done = project.box("coder", "inbox/completed/50_a.handoff")
    assert_result(result, 0, f"COMPLETED: {done}\nNO_TASK\n")
    assert header_keys(done)[-2:] == ["dequeued_at", "completed_at"]
    assert names(project.box("coder", "inbox/in_process")) == []


def test_done_with_current_task_completes_then_takes_the_next_task(project: Project) -> None:
    project.put("coder", "50_a.handoff")
    project.put("coder", "60_b.handoff", body="Next.\n", priority="60")
    project.run("ready_for_next", role="coder")
    result = project.run("done_with_current", role="coder")
    done = project.box("coder", "inbox/completed/50_a.handoff")
    taken = project.box("coder", "inbox/in_process/60_b.handoff")
    assert_result(result, 0, f"COMPLETED: {done}\n" + task_block(taken, "Next.\n", priority="60"))


def test_done_with_current_batch_completes_every_file_then_takes_the_next_batch(
    project: Project,
) -> None:
    project.put("cleaner", "20_a.handoff", body="A\n", priority="20")
    project.put("cleaner", "20_b.handoff", body="B\n", priority="20")
    project.put("cleaner", "70_c.handoff", body="C\n", priority="70")
    project.run("ready_for_next", role="cleaner")
    first = only_batch(project, "cleaner")
    result = project.run("done_with_current_batch", role="cleaner")
    done = project.box("cleaner", "inbox/completed") / first.name
    second = only_batch(project, "cleaner")
    assert second.name != first.name
    expected = (
        f"COMPLETED: {done / '20_a.handoff'}\n"
        f"COMPLETED: {done / '20_b.handoff'}\n"
        f"COMPLETED_BATCH: {done}\n"
        + batch_block(second, [task_block(second / "70_c.handoff", "C\n", priority="70")], "70")
    )
    assert_result(result, 0, expected)
    assert all(header_keys(done / n)[-2:] == ["dequeued_at", "completed_at"] for n in names(done))


def test_done_with_current_batch_with_nothing_left_ends_with_no_task(project: Project) -> None:
    project.put("cleaner", "50_a.handoff")
    project.run("ready_for_next", role="cleaner")
    batch = only_batch(project, "cleaner")
    result = project.run("done_with_current", role="cleaner")
    done = project.box("cleaner", "inbox/completed") / batch.name
    expected = f"COMPLETED: {done / '50_a.handoff'}\nCOMPLETED_BATCH: {done}\nNO_TASK\n"
    assert_result(result, 0, expected)


def completed_lines(project: Project, role: str, name: str) -> str:
    """What done_with_current prints for finishing the one task or batch holding `name`."""
    completed = project.box(role, "inbox/completed")
    if project.role_mode(role) == "task":
        return f"COMPLETED: {completed / name}\n"
    [batch] = names(completed)
    return f"COMPLETED: {completed / batch / name}\nCOMPLETED_BATCH: {completed / batch}\n"


@pytest.mark.parametrize("role", ["coder", "cleaner"])
def test_done_with_current_reports_completion_even_when_the_next_file_is_broken(
    project: Project, role: str
) -> None:
    project.put(role, "50_a.handoff")
    project.run("ready_for_next", role=role)
    broken = project.box(role, "inbox/new/60_broken.handoff")
    broken.write_bytes(b"no header block")
    result = project.run("done_with_current", role=role)
    assert (result.code, result.out) == (2, completed_lines(project, role, "50_a.handoff"))
    assert result.err == (
        f"INVALID_HANDOFF: {broken}: no header block (header lines, then an empty line). "
        f"Move the file out of the inbox to go on.\n- {broken}\n"
    )
    assert names(project.box(role, "inbox/in_process")) == []


# --- receive modes ----------------------------------------------------------------------


def test_an_empty_receive_mode_column_means_task_mode(project: Project) -> None:
    project.put("QA", "50_a.handoff", body="qa\n")
    taken = project.box("QA", "inbox/in_process/50_a.handoff")
    assert_result(project.run("ready_for_next", role="QA"), 0, task_block(taken, "qa\n"))


@pytest.mark.parametrize("command", ["ready_for_next", "done_with_current"])
def test_an_unknown_receive_mode_is_refused_and_changes_nothing(
    project: Project, command: str
) -> None:
    text = (project.root / ".swarmforge" / "roles.tsv").read_text()
    project.write_roles(text.replace("\tbatch\n", "\tstream\n"))
    project.put("cleaner", "50_a.handoff")
    before = queue_state(project, "cleaner")
    assert_result(project.run(command, role="cleaner"), 2, err="INVALID_RECEIVE_MODE: stream\n")
    assert queue_state(project, "cleaner") == before


def test_the_explicit_task_and_batch_commands_ignore_the_receive_mode(project: Project) -> None:
    project.put("cleaner", "50_a.handoff", body="x\n")
    taken = project.box("cleaner", "inbox/in_process/50_a.handoff")
    assert_result(project.run("ready_for_next_task", role="cleaner"), 0, task_block(taken, "x\n"))


# --- byte-exact bodies ------------------------------------------------------------------


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_task_mode_keeps_the_body_byte_for_byte_through_take_and_complete(
    project: Project, body: str
) -> None:
    original = project.put("coder", "50_a.handoff", body=body).read_bytes()
    result = project.run("ready_for_next", role="coder")
    taken = project.box("coder", "inbox/in_process/50_a.handoff")
    assert result.raw == task_block(taken, body).encode()
    project.run("done_with_current", role="coder")
    done = project.box("coder", "inbox/completed/50_a.handoff").read_bytes()
    assert_stamped_copy(original, done, ["dequeued_at", "completed_at"])


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_batch_mode_keeps_the_body_byte_for_byte_through_take_and_complete(
    project: Project, body: str
) -> None:
    original = project.put("cleaner", "50_a.handoff", body=body).read_bytes()
    project.put("cleaner", "50_b.handoff", body="second\n")
    result = project.run("ready_for_next", role="cleaner")
    batch = only_batch(project, "cleaner")
    blocks = [
        task_block(batch / "50_a.handoff", body),
        task_block(batch / "50_b.handoff", "second\n"),
    ]
    assert result.raw == batch_block(batch, blocks).encode()
    project.run("done_with_current", role="cleaner")
    done = (project.box("cleaner", "inbox/completed") / batch.name / "50_a.handoff").read_bytes()
    assert_stamped_copy(original, done, ["dequeued_at", "completed_at"])


def assert_stamped_copy(original: bytes, copy: bytes, added: list[str]) -> None:
    """`copy` is `original` with exactly the `added` headers inserted before the empty line."""
    head, _, body = original.partition(b"\n\n")
    copy_head, _, copy_body = copy.partition(b"\n\n")
    assert copy_body == body
    lines = copy_head.split(b"\n")
    assert b"\n".join(lines[: -len(added)]) == head
    assert [line.split(b": ")[0].decode() for line in lines[-len(added) :]] == added
    assert all(re.fullmatch(ISO, line.split(b": ")[1].decode()) for line in lines[-len(added) :])


def test_a_note_travels_from_queue_to_completed_with_headers_in_order(project: Project) -> None:
    draft = project.draft(project.note_draft(to="coder", message="Tidy the tests \u2728"))
    queued = Path(queued_path(project.run("swarm_handoff", str(draft), role="cleaner")))
    delivered = project.deliver(queued, "coder").read_bytes()
    result = project.run("ready_for_next", role="coder")
    taken = project.box("coder", "inbox/in_process") / queued.name
    body = "Re-read your role and constitution.\n\nTidy the tests \u2728\n"
    assert_result(result, 0, task_block(taken, body, sender="cleaner"))
    project.run("done_with_current", role="coder")
    done = project.box("coder", "inbox/completed") / queued.name
    assert header_keys(done) == [
        *["id", "from", "to", "priority", "type", "message", "created_at"],
        *["recipient", "enqueued_at", "dequeued_at", "completed_at"],
    ]
    assert_stamped_copy(delivered, done.read_bytes(), ["dequeued_at", "completed_at"])


def test_git_handoffs_travel_to_a_batch_role_as_one_batch(project: Project) -> None:
    commit = project.commit()
    for task in ("t-1", "t-2"):
        draft = project.draft(
            f"type: git_handoff\nto: cleaner\npriority: 40\ntask: {task}\ncommit: {commit}\n"
        )
        project.deliver(
            queued_path(project.run("swarm_handoff", str(draft), role="coder")), "cleaner"
        )
    result = project.run("ready_for_next", role="cleaner")
    batch = only_batch(project, "cleaner")
    body = f"Re-read your role and constitution.\n\nmerge_and_process coder {commit}\n"
    blocks = [
        task_block(batch / name, body, kind="git_handoff", priority="40", task=task)
        for name, task in zip(names(batch), ("t-1", "t-2"), strict=True)
    ]
    assert_result(result, 0, batch_block(batch, blocks, "40"))


# --- broken inbox files -----------------------------------------------------------------

BROKEN = {
    "not-utf8": (b"id: x\n\n\xff\xfe\n", "not UTF-8 text"),
    "no-headers": (b"hello\n", "no header block"),
}


@pytest.mark.parametrize(("data", "complaint"), BROKEN.values(), ids=BROKEN.keys())
@pytest.mark.parametrize("role", ["coder", "cleaner"])
def test_a_broken_inbox_file_is_named_with_exit_2_and_nothing_moves(
    project: Project, role: str, data: bytes, complaint: str
) -> None:
    broken = project.box(role, "inbox/new/00_broken.handoff")
    broken.parent.mkdir(parents=True)
    broken.write_bytes(data)
    project.put(role, "50_fine.handoff")
    before = queue_state(project, role)
    result = project.run("ready_for_next", role=role)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"INVALID_HANDOFF: {broken}: {complaint}")
    assert result.err.endswith(f"\n- {broken}\n")
    assert "Traceback" not in result.err
    assert queue_state(project, role) == before


def test_a_broken_file_in_process_blocks_completion_and_nothing_moves(project: Project) -> None:
    broken = project.box("coder", "inbox/in_process/50_a.handoff")
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"\xff")
    before = queue_state(project, "coder")
    result = project.run("done_with_current", role="coder")
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"INVALID_HANDOFF: {broken}: not UTF-8 text")
    assert queue_state(project, "coder") == before


# --- crash shapes -----------------------------------------------------------------------


def test_a_take_killed_before_stamping_resumes_and_gets_stamped(project: Project) -> None:
    path = project.put("coder", "50_a.handoff", box="inbox/in_process", body="b\n")
    assert_result(project.run("ready_for_next", role="coder"), 0, task_block(path, "b\n"))
    assert header_keys(path)[-1] == "dequeued_at"


def test_an_empty_batch_dir_from_a_killed_take_is_ignored(project: Project) -> None:
    for role in ("coder", "cleaner"):
        empty = project.box(role, "inbox/in_process/batch_20260615T140531Z_000001")
        empty.mkdir(parents=True)
        assert_result(project.run("ready_for_next", role=role), 0, "NO_TASK\n")
        assert not empty.exists()


def test_stray_hidden_temp_files_are_ignored_and_a_killed_stamps_temp_swept(
    project: Project,
) -> None:
    """new/ belongs to the daemon, whose staged copies are hidden temp files: left alone.
    A stamping temp in in_process/ can only be a killed helper's: removed."""
    for role in ("coder", "cleaner"):
        project.put(role, ".x.tmp")
        project.put(role, ".50_a.handoff.99.0.tmp", box="inbox/in_process")
        assert_result(project.run("ready_for_next", role=role), 0, "NO_TASK\n")
        assert names(project.box(role, "inbox/new")) == [".x.tmp"]
        assert names(project.box(role, "inbox/in_process")) == []


# --- a commit that has not arrived (docs/protocol.md §15) -------------------------------


def git_handoff(
    project: Project, commit: str, role: str = "coder", name: str = "50_g.handoff"
) -> Path:
    return project.put(
        role,
        name,
        type="git_handoff",
        task="slice-3",
        commit=commit,
        body=f"Re-read your role and constitution.\n\nmerge_and_process QA {commit}\n",
    )


def plain_block(path: Path, commit: str) -> str:
    """§4's TASK block of `git_handoff`'s file, as swarm-forge prints it."""
    head = f"TASK: {path}\nFROM: coder\nTYPE: git_handoff\nPRIORITY: 50\nTASK_NAME: slice-3\n"
    return f"{head}PAYLOAD:\nRe-read your role and constitution.\n\nmerge_and_process QA {commit}\n"


MISSING = "COMMIT_MISSING: deadbeef00 is not in this repository (git fetch?)\n"


@pytest.mark.parametrize("helper", ["ready_for_next", "ready_for_next_task"])
def test_a_git_handoff_whose_commit_is_not_here_says_commit_missing_on_stderr_only(
    project: Project, helper: str
) -> None:
    """stdout is §4's block byte for byte (docs/protocol.md §15, "A commit that has not
    arrived"): swarm-forge's agents and tests read it so; the line is on stderr, also
    when the block is printed again (a resume)."""
    path = git_handoff(project, "deadbeef00")
    block = plain_block(project.box("coder", "inbox/in_process") / path.name, "deadbeef00")
    for _ in range(2):  # taken, then the same work again
        taken = project.run(helper, role="coder")
        assert (taken.code, taken.out, taken.err) == (0, block, MISSING)


def test_done_with_current_says_the_next_ones_missing_commit_on_stderr(project: Project) -> None:
    first = git_handoff(project, project.commit("coder"), name="50_a.handoff")
    second = git_handoff(project, "deadbeef00", name="50_b.handoff")
    assert project.run("ready_for_next", role="coder").err == ""
    done = project.run("done_with_current", role="coder")
    completed = project.box("coder", "inbox/completed") / first.name
    block = plain_block(project.box("coder", "inbox/in_process") / second.name, "deadbeef00")
    assert (done.code, done.out, done.err) == (0, f"COMPLETED: {completed}\n{block}", MISSING)


def test_a_batch_says_each_missing_commit_on_stderr_and_its_block_byte_for_byte(
    project: Project,
) -> None:
    """cleaner takes work in batches: each item's TASK block is §4's, the lines on stderr."""
    here = project.commit("cleaner")
    for name, commit in (("50_a.handoff", "deadbeef00"), ("50_b.handoff", here),
                         ("50_c.handoff", "deadbeef01")):  # fmt: skip
        git_handoff(project, commit, role="cleaner", name=name)
    for helper in ("ready_for_next", "ready_for_next_batch"):  # taken, then again
        taken = project.run(helper, role="cleaner")
        [batch] = os.listdir(project.box("cleaner", "inbox/in_process"))
        folder = project.box("cleaner", "inbox/in_process") / batch
        items = [plain_block(folder / n, c) for n, c in (("50_a.handoff", "deadbeef00"),
                 ("50_b.handoff", here), ("50_c.handoff", "deadbeef01"))]  # fmt: skip
        head = f"BATCH: {folder}\nCOUNT: 3\nPRIORITY: 50\n"
        assert taken.out == head + "".join(f"\nBATCH_ITEM: {n}\n{item}"
                                           for n, item in enumerate(items, 1))  # fmt: skip
        assert taken.err == MISSING + MISSING.replace("deadbeef00", "deadbeef01")


def test_a_git_handoff_whose_commit_is_here_prints_the_plain_block(project: Project) -> None:
    head = git(project.root, "rev-parse", "--short=10", "HEAD")
    path = git_handoff(project, head, role="QA")  # another worktree of the same repository
    taken = project.run("ready_for_next", role="QA")
    assert taken.out == plain_block(project.box("QA", "inbox/in_process") / path.name, head)
    assert taken.err == ""


def test_a_commit_header_that_is_no_object_name_is_missing_and_never_given_to_git(
    project: Project,
) -> None:
    """The header is untrusted: `--output=x` handed to git would be an option, not a name."""
    git_handoff(project, "--output=x\x1b")
    taken = project.run("ready_for_next", role="coder")
    assert taken.err == "COMMIT_MISSING: --output=x\\x1b is not in this repository (git fetch?)\n"
    assert not (project.root / "x").exists() and "COMMIT_MISSING" not in taken.out


def test_a_worktree_git_cannot_read_says_nothing_of_the_commit(project: Project) -> None:
    """No repository to ask (git says so): nothing is claimed about the commit."""
    git_handoff(project, "deadbeef00", role="QA")
    os.rename(project.worktrees["QA"] / ".git", project.worktrees["QA"] / "git-moved")
    env = {"GIT_CEILING_DIRECTORIES": str(project.worktrees["QA"].parent)}
    from tests.test_board_commands import run

    out = run(project, "ready_for_next", role="QA", env=env)
    assert out.code == 0 and "COMMIT_MISSING" not in out.out + out.err, out


# --- swarm_handoff: success -------------------------------------------------------------


def queued_path(result: Result) -> str:
    assert (result.code, without_daemon_warning(result.err)) == (0, ""), result.err
    match = re.fullmatch(r"HANDOFF QUEUED: (.+)\n", result.out)
    assert match, result.out
    return match.group(1)


def test_swarm_handoff_queues_a_git_handoff_with_the_canonical_commit(project: Project) -> None:
    commit = project.commit()
    assert commit != commit.upper(), "the fixed commit needs hex letters"
    draft = project.draft(
        f"type: git_handoff\nto: cleaner,QA\npriority: 50\ntask: t-1\ncommit: {commit.upper()}\n"
    )
    path = Path(queued_path(project.run("swarm_handoff", str(draft), role="coder")))
    assert path.is_absolute()
    assert path.parent == project.box("coder", "outbox")
    assert re.fullmatch(rf"50_({STAMP})_000001_from_coder_to_cleaner_QA\.handoff", path.name)
    stamp = path.name.split("_")[1]
    assert re.fullmatch(
        rf"id: {stamp}_000001_from_coder\n"
        "from: coder\nto: cleaner,QA\npriority: 50\ntype: git_handoff\n"
        f"role: coder\ntask: t-1\ncommit: {commit}\n"
        rf"created_at: {ISO}\n"
        "\n"
        "Re-read your role and constitution.\n"
        "\n"
        f"merge_and_process coder {commit}\n",
        path.read_text(),
    )
    assert not draft.exists()
    assert queued_files(project, "coder") == [path.name]


def test_swarm_handoff_queues_a_note(project: Project) -> None:
    draft = project.draft("type: note\nto: coder\npriority: 07\nmessage: Waiting on QA result.\n")
    path = Path(queued_path(project.run("swarm_handoff", str(draft), role="QA")))
    assert path.parent == project.box("QA", "outbox")
    assert re.fullmatch(rf"07_{STAMP}_000001_from_QA_to_coder\.handoff", path.name)
    handoff = hf.read(str(path))
    assert header_keys(path) == ["id", "from", "to", "priority", "type", "message", "created_at"]
    assert handoff.get("message") == "Waiting on QA result."
    assert handoff.body == "Re-read your role and constitution.\n\nWaiting on QA result.\n"


def test_each_send_from_a_worktree_takes_the_next_sequence_number(project: Project) -> None:
    paths = []
    for _ in range(3):
        draft = project.draft(project.note_draft())
        paths.append(queued_path(project.run("swarm_handoff", str(draft), role="cleaner")))
    assert [os.path.basename(p).split("_")[2] for p in paths] == ["000001", "000002", "000003"]


# --- swarm_handoff: the draft is refused (exit 2, kept, nothing queued) -----------------


def git_draft(project: Project, **fields: str | None) -> str:
    base: dict[str, str | None] = {
        "type": "git_handoff",
        "to": "cleaner",
        "priority": "50",
        "task": "t-1",
        "commit": project.commit(),
    }
    merged = {**base, **fields}
    return "".join(f"{k}: {v}\n" for k, v in merged.items() if v is not None)


def note_draft(**fields: str | None) -> str:
    base: dict[str, str | None] = {
        "type": "note",
        "to": "cleaner",
        "priority": "50",
        "message": "m",
    }
    merged = {**base, **fields}
    return "".join(f"{k}: {v}\n" for k, v in merged.items() if v is not None)


BODY_ERROR = "draft handoffs may contain headers only; payloads are generated by swarm_handoff.sh."

# (id, draft maker, expected errors): every message of docs/protocol.md §3 step 5. `{commit}`
# in an error stands for the draft's commit header.
INVALID: list[tuple[str, Callable[[Project], str], list[str]]] = [
    ("body", lambda p: note_draft() + "\nA payload.\n", [f"Line 6: {BODY_ERROR}"]),
    ("no-colon-space", lambda p: note_draft() + "oops\n", ["Line 5: expected 'field: value'."]),
    (
        "empty-value",
        lambda p: note_draft() + "task: \n",
        ["Line 5: field and value must both be non-empty."],
    ),
    (
        "reserved",
        lambda p: note_draft() + "from: coder\n",
        ["Line 5: header 'from' is reserved and must not be written by agents."],
    ),
    (
        "unknown-header",
        lambda p: note_draft() + "colour: red\n",
        ["Line 5: unknown header 'colour'."],
    ),
    ("duplicate-header", lambda p: note_draft() + "to: QA\n", ["Line 5: duplicate header 'to'."]),
    (
        "missing-type",
        lambda p: note_draft(type=None, message=None),
        ["Missing required header 'type'."],
    ),
    ("missing-to", lambda p: note_draft(to=None), ["Missing required header 'to'."]),
    (
        "missing-priority",
        lambda p: note_draft(priority=None),
        ["Missing required header 'priority'."],
    ),
    (
        "bad-type",
        lambda p: note_draft(type="memo", message=None),
        ["Header 'type' must be one of git_handoff, note or packet; got 'memo'."],
    ),
    (
        "bad-priority",
        lambda p: note_draft(priority="100"),
        ["Header 'priority' must be two digits from 00 to 99; got '100'."],
    ),
    (
        "empty-recipient",
        lambda p: note_draft(to="cleaner,"),
        ["Header 'to' contains an empty recipient."],
    ),
    (
        "underscore-recipient",
        lambda p: note_draft(to="clean_er"),
        ["Recipient role 'clean_er' is invalid; role names may not contain underscores."],
    ),
    ("duplicate-recipient", lambda p: note_draft(to="QA,coder,QA"), ["Duplicate recipient 'QA'."]),
    (
        "unknown-recipient",
        lambda p: note_draft(to="ghost"),
        ["Unknown recipient role 'ghost'."],
    ),
    (
        "field-not-for-type",
        lambda p: git_draft(p, message="m"),
        [
            "Header 'message' is not allowed for type 'git_handoff'.",
            "Header 'message' is only allowed for note.",
        ],
    ),
    (
        "missing-task",
        lambda p: git_draft(p, task=None),
        ["Missing required header 'task' for git_handoff."],
    ),
    (
        "long-task",
        lambda p: git_draft(p, task="t" * 81),
        ["Header 'task' must be no longer than 80 characters; got 81."],
    ),
    (
        "missing-commit",
        lambda p: git_draft(p, commit=None),
        ["Missing required header 'commit' for git_handoff."],
    ),
    (
        "short-commit",
        lambda p: git_draft(p, commit=p.commit(short=7)),
        ["Header 'commit' must be exactly 10 hexadecimal characters; got '{commit}'."],
    ),
    (
        "non-hex-commit",
        lambda p: git_draft(p, commit="xyzxyzxyz0"),
        ["Header 'commit' must be exactly 10 hexadecimal characters; got 'xyzxyzxyz0'."],
    ),
    (
        "unknown-commit",
        lambda p: git_draft(p, commit="0000000000"),
        ["Header 'commit' must resolve to exactly one Git object; '0000000000' matched 0."],
    ),
    (
        "tree-commit",
        lambda p: git_draft(p, commit=git(p.root, "rev-parse", "--short=10", "HEAD^{tree}")),
        ["Header 'commit' must resolve to a commit; '{commit}' resolves to 'tree'."],
    ),
    (
        "commit-on-note",
        lambda p: note_draft(commit=p.commit()),
        [
            "Header 'commit' is not allowed for type 'note'.",
            "Header 'commit' is only allowed for git_handoff.",
        ],
    ),
    (
        "task-on-note",
        lambda p: note_draft(task="t"),
        [
            "Header 'task' is not allowed for type 'note'.",
            "Header 'task' is only allowed for git_handoff.",
        ],
    ),
    (
        "missing-message",
        lambda p: note_draft(message=None),
        ["Missing required header 'message' for note."],
    ),
    (
        "long-message",
        lambda p: note_draft(message="\u00e9" * 81),
        ["Header 'message' must be no longer than 80 characters; got 81."],
    ),
    (
        "task-with-a-tab",  # a digest could never find its thread again
        lambda p: git_draft(p, task="parser\tslice"),
        ["Header 'task' must not contain control characters."],
    ),
    (
        "message-with-an-escape",
        lambda p: note_draft(message="hi\033]0;owned\007"),
        ["Header 'message' must not contain control characters."],
    ),
    (
        "texts-with-an-override-or-a-delete",
        lambda p: note_draft(message="a\u202eb", blocked_reason="wait\x7fdone"),
        [
            "Header 'message' must not contain control characters.",
            "Header 'blocked_reason' must not contain control characters.",
        ],
    ),
    (
        "message-without-type",
        lambda p: note_draft(type=None),
        ["Missing required header 'type'.", "Header 'message' is only allowed for note."],
    ),
]


@pytest.mark.parametrize(("make", "errors"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_an_invalid_draft_is_reported_kept_and_nothing_is_queued(
    project: Project, make: Callable[[Project], str], errors: list[str]
) -> None:
    text = make(project)
    draft = project.draft(text)
    commit = re.search(r"^commit: (.*)$", text, re.MULTILINE)
    errors = [e.format(commit=commit.group(1) if commit else "") for e in errors]
    result = project.run("swarm_handoff", str(draft), role="coder")
    listed = "".join(f"- {e}\n" for e in errors)
    usage = USAGE  # which an unknown recipient closes with the roles there are
    if any(e.startswith("Unknown recipient role") for e in errors):
        usage += "\nKnown roles: QA, cleaner, coder.\n"
    assert_result(result, 2, err=f"HANDOFF INVALID: {draft}\n\nErrors:\n{listed}\n{usage}")
    assert draft.read_text() == text
    assert queued_files(project, "coder") == []


# --- swarm_handoff: exit 1 --------------------------------------------------------------


@pytest.mark.parametrize("args", [(), ("a", "b")], ids=["no-argument", "two-arguments"])
def test_swarm_handoff_without_exactly_one_argument_prints_usage(
    project: Project, args: tuple[str, ...]
) -> None:
    assert_result(project.run("swarm_handoff", *args, role="coder"), 1, err=USAGE)


@pytest.mark.parametrize("missing", ["nope.txt", "src"], ids=["missing", "a-directory"])
def test_swarm_handoff_needs_a_regular_draft_file(project: Project, missing: str) -> None:
    expected = f"Draft file not found: {missing}\n"
    assert_result(project.run("swarm_handoff", missing, role="coder"), 1, err=expected)


def test_a_missing_draft_is_reported_before_a_missing_role(
    project: Project, tmp_path: Path
) -> None:
    result = project.run("swarm_handoff", "nope.txt", role=None, cwd=tmp_path)
    assert_result(result, 1, err="Draft file not found: nope.txt\n")


def test_swarm_handoff_outside_any_project_cannot_find_the_root(
    project: Project, tmp_path: Path
) -> None:
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    draft = project.draft(project.note_draft(), where=lonely)
    result = project.run("swarm_handoff", str(draft), role="coder", cwd=lonely)
    assert (result.code, result.out) == (1, "")
    assert result.err.splitlines() == [
        "Cannot find SwarmForge project root",
        f"Looked for .swarmforge/roles.tsv in {lonely} and every directory above it.",
        "Run `handoffd init` in the project's root to lay one out.",
    ]
    assert draft.exists()


def test_swarm_handoff_from_an_unknown_sender_role(project: Project) -> None:
    draft = project.draft(project.note_draft())
    result = project.run("swarm_handoff", str(draft), role="ghost", cwd=project.root)
    assert_result(result, 1, err="Unknown sender role: ghost\n")
    assert draft.exists()


def test_other_helpers_name_an_unknown_role(project: Project) -> None:
    result = project.run("ready_for_next", role="ghost", cwd=project.root)
    assert_result(result, 1, err="Unknown role: ghost (known roles: QA, cleaner, coder)\n")


def test_a_broken_roles_file_is_reported_by_line(project: Project) -> None:
    project.write_roles(f"coder\tcoder\t{project.root}\nbad_role\tx\t/w/x\n")
    result = project.run("ready_for_next", role="coder")
    assert result.code == 1
    assert result.err.startswith(f"{project.root}/.swarmforge/roles.tsv:2: invalid role name")


def test_roles_sharing_a_worktree_are_a_named_configuration_error(project: Project) -> None:
    project.write_roles(f"coder\tcoder\t{project.root}\nreviewer\tr\t{project.root}\n")
    result = project.run("ready_for_next", role="coder")
    assert result.code == 1
    assert "roles 'coder' and 'reviewer' share the worktree" in result.err


# --- the working directory: subdirectories and role inference ---------------------------


def deep_in(project: Project, role: str) -> Path:
    deep = project.worktrees[role] / "src" / "deep"
    deep.mkdir(parents=True, exist_ok=True)
    return deep


@pytest.mark.parametrize("role", ["cleaner", None], ids=["role-set", "role-inferred"])
def test_swarm_handoff_from_a_subdirectory_queues_into_the_roles_outbox(
    project: Project, role: str | None
) -> None:
    deep = deep_in(project, "cleaner")
    project.draft(project.note_draft(to="coder"), where=deep)
    path = Path(queued_path(project.run("swarm_handoff", "draft.txt", role=role, cwd=deep)))
    assert path.parent == project.box("cleaner", "outbox")
    assert "_from_cleaner_to_coder" in path.name
    assert not (deep / ".swarmforge").exists()
    assert not (deep / "draft.txt").exists()


def test_ready_for_next_from_a_subdirectory_reads_the_roles_inbox(project: Project) -> None:
    project.put("cleaner", "50_a.handoff", body="deep\n")
    result = project.run("ready_for_next", role=None, cwd=deep_in(project, "cleaner"))
    batch = only_batch(project, "cleaner")
    assert_result(result, 0, batch_block(batch, [task_block(batch / "50_a.handoff", "deep\n")]))


def sender_from(project: Project, cwd: Path) -> str:
    """The role swarm_handoff infers when run from `cwd` with SWARMFORGE_ROLE unset."""
    draft = project.draft(project.note_draft(to="QA"), where=cwd)
    path = queued_path(project.run("swarm_handoff", str(draft), role=None, cwd=cwd))
    return hf.read(path).get("from") or ""


def test_the_deepest_worktree_is_the_calling_role(project: Project) -> None:
    assert sender_from(project, project.worktrees["cleaner"]) == "cleaner"
    assert sender_from(project, deep_in(project, "cleaner")) == "cleaner"
    assert sender_from(project, project.root / "src") == "coder"


def test_a_sibling_named_like_a_worktree_is_not_inside_it(project: Project) -> None:
    sibling = project.root / ".worktrees" / "cleaner-old"
    sibling.mkdir()
    assert sender_from(project, sibling) == "coder"


def test_outside_every_worktree_the_role_must_be_set(project: Project, tmp_path: Path) -> None:
    spare = tmp_path.resolve() / "spare"  # a worktree of the project that no role owns
    git(project.root, "worktree", "add", "-q", str(spare), "-b", "spare")
    draft = project.draft(project.note_draft(), where=spare)
    for command, args in [("swarm_handoff", [str(draft)]), ("ready_for_next", [])]:
        result = project.run(command, *args, role=None, cwd=spare)
        assert_result(result, 1, err="Set SWARMFORGE_ROLE.\n")
    assert draft.exists()
    assert_result(project.run("ready_for_next", role="QA", cwd=spare), 0, "NO_TASK\n")


@pytest.mark.parametrize(
    ("role", "command"), [("coder", "ready_for_next"), ("cleaner", "ready_for_next")]
)
def test_simultaneous_takes_by_one_role_claim_one_piece_of_work(
    project: Project, role: str, command: str
) -> None:
    """Two agents' calls racing (or one agent retrying) must not put two tasks in process."""
    import subprocess

    from tests.conftest import helper_env

    for n in range(4):
        project.put(role, f"50_2026010{n}T000000Z_00000{n}_from_coder_to_{role}.handoff")
    env, cwd, pipe = helper_env(role), project.worktrees[role], subprocess.PIPE
    calls = [subprocess.Popen([command], cwd=cwd, env=env, stdout=pipe) for _ in range(12)]
    results = [(call.wait(timeout=60), call.stdout.read()) for call in calls if call.stdout]
    assert [code for code, _ in results] == [0] * 12
    in_process = list((project.box(role, "inbox/in_process")).iterdir())
    assert len(in_process) == 1, in_process
    assert len({out for _, out in results}) == 1, "every call must show the same work"


# --- start-up: what the helpers import (docs/protocol.md §8, start-up headroom) ---------------

HEAVY = ("click", "structlog", "yaml", "frontmatter", "typing", "enum", "re", "dataclasses")
PROBE = """
import atexit, sys
sys.path.insert(0, {repo!r})
before = set(sys.modules)
atexit.register(lambda: print(" ".join(sorted(set(sys.modules) - before)), file=sys.stderr))
sys.argv = [{name!r}, *{args!r}]
from handoffd.adapters import console as helpers
getattr(helpers, {name!r})()
"""


def imported_by(project: Project, name: str, *args: str) -> set[str]:
    """The modules the helper `name` imports beyond what the bare interpreter had: `-S`, so
    no site hook (an editable install's imports `re`) hides one, and no site-packages."""
    repo = str(Path(__file__).resolve().parent.parent)
    code = PROBE.format(name=name, args=args, repo=repo)
    result = run_command(sys.executable, "-S", "-c", code, cwd=project.root, role="coder")
    assert result.code == 0, result.err
    return set(result.err.strip().split("\n")[-1].split())


@pytest.mark.parametrize("name", ["ready_for_next", "done_with_current", "swarm_handoff"])
def test_the_helpers_import_no_heavy_module(project: Project, name: str) -> None:
    project.put("coder", "50_a.handoff")
    project.run("ready_for_next", role="coder")
    args = (str(project.draft(project.note_draft())),) if name == "swarm_handoff" else ()
    loaded = imported_by(project, name, *args)
    assert "handoffd.queue.heartbeat" in loaded  # the probe saw the helper's own imports
    # swarm_handoff runs git through subprocess, whose locale import brings re and enum: the
    # git process it starts costs far more, so only its own imports are held to the list
    allowed = {"re", "enum"} if name == "swarm_handoff" else set()
    heavy = sorted(m for m in loaded if m.partition(".")[0] in set(HEAVY) - allowed)
    assert heavy == [], f"{name} imports {heavy}"
