"""The inbox state machine (docs/protocol.md §4), in process, on real files.

The end-to-end table through the installed commands is in test_helpers.py; this file
pins the transitions themselves, the crash shapes and batch naming.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.core.outcome import Refusal
from handoffd.queue import inbox, items
from handoffd.queue.inbox import Inbox
from handoffd.queue.items import Listing
from tests.conftest import HANG, Project, snapshot

STAMP = "20260615T140531Z"


class Box:
    """A role's handoff directory and its Inbox, with helpers to lay files out."""

    def __init__(self, handoffs: Path) -> None:
        self.handoffs = handoffs
        self.inbox = Inbox(str(handoffs))
        self.new = handoffs / "inbox" / "new"
        self.in_process = handoffs / "inbox" / "in_process"
        self.completed = handoffs / "inbox" / "completed"

    def put(
        self, folder: Path, name: str, priority: str = "50", body: str = "body\n", **more: str
    ) -> Path:
        headers = {"id": name, "from": "coder", "type": "note", "priority": priority, **more}
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_bytes(hf.Handoff(list(headers.items()), body).render())
        return path

    def names(self, folder: Path) -> list[str]:
        return sorted(os.listdir(folder)) if folder.exists() else []


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path / "handoffs")


def header(path: Path | str, key: str) -> str | None:
    return hf.read(str(path)).get(key)


def refusal(call: object) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()  # type: ignore[operator]
    return caught.value


# --- pure decisions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("finishing", "message"),
    [
        (False, "TASK_IN_PROCESS_IS_BATCH: use ready_for_next.sh or done_with_current.sh."),
        (True, "CURRENT_WORK_IS_BATCH: use done_with_current.sh."),
    ],
)
def test_task_mode_refuses_a_batch_in_process(finishing: bool, message: str) -> None:
    error = refusal(lambda: items.current_task(Listing(["/f"], ["/b"]), finishing=finishing))
    assert (error.code, error.message, error.paths) == (2, message, ["/b"])


@pytest.mark.parametrize(
    ("finishing", "message"),
    [
        (False, "AMBIGUOUS_TASK_STATE: multiple tasks are already in process."),
        (True, "AMBIGUOUS_TASK_STATE: multiple tasks are in process."),
    ],
)
def test_task_mode_refuses_several_tasks_in_process(finishing: bool, message: str) -> None:
    error = refusal(lambda: items.current_task(Listing(["/a", "/b"], []), finishing=finishing))
    assert (error.code, error.message, error.paths) == (2, message, ["/a", "/b"])


@pytest.mark.parametrize(
    ("finishing", "message"),
    [
        (False, "TASK_IN_PROCESS_IS_SINGLE: use ready_for_next.sh or done_with_current.sh."),
        (True, "CURRENT_WORK_IS_SINGLE_TASK: use done_with_current.sh."),
    ],
)
def test_batch_mode_refuses_a_single_task_in_process(finishing: bool, message: str) -> None:
    error = refusal(lambda: items.current_batch(Listing(["/f"], ["/b"]), finishing=finishing))
    assert (error.code, error.message, error.paths) == (2, message, ["/f"])


@pytest.mark.parametrize(
    ("finishing", "message"),
    [
        (False, "AMBIGUOUS_TASK_STATE: multiple batches are already in process."),
        (True, "AMBIGUOUS_TASK_STATE: multiple batches are in process."),
    ],
)
def test_batch_mode_refuses_several_batches_in_process(finishing: bool, message: str) -> None:
    error = refusal(lambda: items.current_batch(Listing([], ["/a", "/b"]), finishing=finishing))
    assert (error.code, error.message, error.paths) == (2, message, ["/a", "/b"])


def test_one_item_or_none_in_process_is_the_current_work() -> None:
    assert items.current_task(Listing(["/f"], []), finishing=True) == "/f"
    assert items.current_task(Listing([], []), finishing=False) is None
    assert items.current_batch(Listing([], ["/b"]), finishing=True) == "/b"
    assert items.current_batch(Listing([], []), finishing=False) is None


def test_a_refusal_renders_its_line_then_one_dash_line_per_path() -> None:
    assert Refusal(2, "NOPE", ["/a", "/b"]).render() == "NOPE\n- /a\n- /b\n"
    assert Refusal(1, "NO_CURRENT_TASK").render() == "NO_CURRENT_TASK\n"


# --- task mode --------------------------------------------------------------------------


def test_take_task_claims_the_first_file_by_name_and_stamps_dequeued_at(box: Box) -> None:
    for name in ("50_b.handoff", "10_z.handoff", "50_a.handoff"):
        box.put(box.new, name)
    item = box.inbox.take_task()
    assert item is not None
    assert item.path == str(box.in_process / "10_z.handoff")
    assert box.names(box.new) == ["50_a.handoff", "50_b.handoff"]
    assert header(item.path, "dequeued_at") == item.handoff.get("dequeued_at") is not None


def test_take_task_on_an_empty_or_missing_inbox_is_none(box: Box) -> None:
    assert box.inbox.take_task() is None
    box.new.mkdir(parents=True)
    assert box.inbox.take_task() is None


def test_take_task_resumes_the_task_in_process_without_restamping(box: Box) -> None:
    box.put(box.new, "50_a.handoff")
    first = box.inbox.take_task()
    assert first is not None
    before = Path(first.path).read_bytes()
    box.put(box.new, "00_urgent.handoff")
    again = box.inbox.take_task()
    assert again is not None
    assert again.path == first.path
    assert Path(first.path).read_bytes() == before


def test_a_task_taken_but_never_stamped_is_stamped_on_resume(box: Box) -> None:
    path = box.put(box.in_process, "50_a.handoff")  # take killed between rename and stamp
    item = box.inbox.take_task()
    assert item is not None
    assert item.path == str(path)
    assert header(path, "dequeued_at") is not None


def test_hidden_temp_files_and_directories_are_not_work(box: Box) -> None:
    box.put(box.new, ".00_x.handoff.123.0.tmp")
    (box.new / "00_a_directory").mkdir()
    box.put(box.in_process, ".50_y.handoff.9.1.tmp")
    assert box.inbox.take_task() is None
    box.put(box.new, "50_real.handoff")
    item = box.inbox.take_task()
    assert item is not None
    assert item.path == str(box.in_process / "50_real.handoff")
    assert box.names(box.new) == [".00_x.handoff.123.0.tmp", "00_a_directory"]


@pytest.mark.parametrize(
    ("data", "complaint"),
    [(b"id: 1\n\n\xff bad", "not UTF-8 text"), (b"no header block here", "no header block")],
    ids=["not-utf8", "no-headers"],
)
def test_a_broken_waiting_file_is_refused_by_name_and_nothing_moves(
    box: Box, data: bytes, complaint: str
) -> None:
    box.new.mkdir(parents=True)
    broken = box.new / "00_broken.handoff"
    broken.write_bytes(data)
    box.put(box.new, "50_fine.handoff")
    before = snapshot(box.handoffs)
    error = refusal(box.inbox.take_task)
    assert error.code == 2
    assert error.message.startswith(f"INVALID_HANDOFF: {broken}: {complaint}")
    assert error.paths == [str(broken)]
    assert snapshot(box.handoffs) == before


def test_finish_task_stamps_completed_at_and_moves_the_file_to_completed(box: Box) -> None:
    box.put(box.new, "50_a.handoff", body="keep\r\nme")
    box.inbox.take_task()
    assert box.inbox.finish_task() == [str(box.completed / "50_a.handoff")]
    done = box.completed / "50_a.handoff"
    handoff = hf.read(str(done))
    assert [k for k, _ in handoff.headers][-2:] == ["dequeued_at", "completed_at"]
    assert handoff.body == "keep\r\nme"
    assert box.names(box.in_process) == []


def test_finish_task_never_overwrites_a_completed_file_of_the_same_name(box: Box) -> None:
    old = box.put(box.completed, "50_a.handoff", body="the first one\n")
    box.put(box.in_process, "50_a.handoff", body="the second one\n")
    [target] = box.inbox.finish_task()
    assert target == str(box.completed / "50_a.2.handoff")
    assert hf.read(str(old)).body == "the first one\n"
    assert hf.read(target).body == "the second one\n"


def test_finish_task_with_nothing_in_process_is_no_current_task(box: Box) -> None:
    error = refusal(box.inbox.finish_task)
    assert (error.code, error.render()) == (1, "NO_CURRENT_TASK\n")


# --- batch mode -------------------------------------------------------------------------


def test_take_batch_claims_every_file_of_the_first_files_priority(box: Box) -> None:
    for name, priority in [("20_a.handoff", "20"), ("20_c.handoff", "20"), ("50_b.handoff", "50")]:
        box.put(box.new, name, priority=priority)
    box.put(box.new, "30_odd.handoff", priority="20")  # the header decides, not the name
    taken = box.inbox.take_batch()
    assert taken is not None
    directory, items = taken
    assert re.fullmatch(r"batch_\d{8}T\d{6}Z_000001", os.path.basename(directory))
    assert os.path.dirname(directory) == str(box.in_process)
    assert [os.path.basename(i.path) for i in items] == [
        "20_a.handoff",
        "20_c.handoff",
        "30_odd.handoff",
    ]
    assert all(header(i.path, "dequeued_at") for i in items)
    assert box.names(box.new) == ["50_b.handoff"]


def test_a_file_without_priority_counts_as_50(box: Box) -> None:
    box.new.mkdir(parents=True)
    (box.new / "00_nopriority.handoff").write_bytes(b"id: x\n\nbody\n")
    box.put(box.new, "10_fifty.handoff", priority="50")
    box.put(box.new, "20_other.handoff", priority="20")
    taken = box.inbox.take_batch()
    assert taken is not None
    assert [os.path.basename(i.path) for i in taken[1]] == [
        "00_nopriority.handoff",
        "10_fifty.handoff",
    ]


def test_take_batch_resumes_the_batch_in_process_without_restamping(box: Box) -> None:
    box.put(box.new, "50_a.handoff")
    taken = box.inbox.take_batch()
    assert taken is not None
    before = snapshot(box.in_process)
    box.put(box.new, "50_late.handoff")
    again = box.inbox.take_batch()
    assert again is not None
    assert again[0] == taken[0]
    assert [i.path for i in again[1]] == [i.path for i in taken[1]]
    assert snapshot(box.in_process) == before


def test_a_batch_item_never_stamped_is_stamped_on_resume(box: Box) -> None:
    batch = box.in_process / f"batch_{STAMP}_000001"
    path = box.put(batch, "50_a.handoff")
    taken = box.inbox.take_batch()
    assert taken is not None
    assert taken[0] == str(batch)
    assert header(path, "dequeued_at") is not None


def test_an_empty_batch_dir_left_by_a_crash_is_removed_and_ignored(box: Box) -> None:
    empty = box.in_process / f"batch_{STAMP}_000001"
    empty.mkdir(parents=True)
    assert box.inbox.take_task() is None
    assert not empty.exists()
    empty.mkdir()
    box.put(box.new, "50_a.handoff")
    taken = box.inbox.take_batch()
    assert taken is not None
    assert [os.path.basename(i.path) for i in taken[1]] == ["50_a.handoff"]


def test_a_batch_dir_holding_only_a_temp_file_is_not_a_batch(box: Box) -> None:
    stray = box.in_process / f"batch_{STAMP}_000001"
    box.put(stray, ".50_a.handoff.77.0.tmp")
    assert box.inbox.take_batch() is None
    assert box.inbox.take_task() is None


def test_batch_names_are_unique_across_in_process_and_completed(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hf, "id_stamp", lambda now=None: STAMP)
    (box.completed / f"batch_{STAMP}_000001").mkdir(parents=True)
    box.put(box.new, "50_a.handoff")
    first = box.inbox.take_batch()
    assert first is not None
    assert os.path.basename(first[0]) == f"batch_{STAMP}_000002"
    box.inbox.finish_batch()
    box.put(box.new, "50_b.handoff")
    second = box.inbox.take_batch()
    assert second is not None
    assert os.path.basename(second[0]) == f"batch_{STAMP}_000003"


def test_finish_batch_stamps_every_file_and_moves_the_batch_under_its_name(box: Box) -> None:
    box.put(box.new, "50_a.handoff", body="A")
    box.put(box.new, "50_b.handoff", body="B\n")
    taken = box.inbox.take_batch()
    assert taken is not None
    name = os.path.basename(taken[0])
    directory, files = box.inbox.finish_batch()
    assert directory == str(box.completed / name)
    assert files == [str(box.completed / name / n) for n in ("50_a.handoff", "50_b.handoff")]
    assert [hf.read(f).body for f in files] == ["A", "B\n"]
    assert all(header(f, "completed_at") for f in files)
    assert box.names(box.in_process) == []


def test_finish_batch_with_nothing_in_process_is_no_current_batch(box: Box) -> None:
    error = refusal(box.inbox.finish_batch)
    assert (error.code, error.render()) == (1, "NO_CURRENT_BATCH\n")


def test_finish_batch_with_a_broken_file_stamps_and_moves_nothing(box: Box) -> None:
    batch = box.in_process / f"batch_{STAMP}_000001"
    box.put(batch, "50_a.handoff")
    (batch / "50_b.handoff").write_bytes(b"\xff\xfe")
    before = snapshot(box.handoffs)
    error = refusal(box.inbox.finish_batch)
    assert error.code == 2
    assert error.paths == [str(batch / "50_b.handoff")]
    assert snapshot(box.handoffs) == before


# --- either mode: naming work, release, headers (docs/protocol.md §8) --------------------

NAME = "50_20260615T140531Z_000042_from_architect_to_coder_QA.handoff"


@pytest.mark.parametrize(
    "ident", ["20260615T140531Z_000042_from_architect", NAME, NAME.removesuffix(".handoff")]
)
def test_a_file_is_named_by_its_id_its_name_or_its_stem(ident: str) -> None:
    assert items.names_match(NAME, ident)


def test_a_prefix_of_an_id_names_nothing() -> None:
    assert not items.names_match(NAME, "20260615T140531Z_000042_from_arch")


def test_current_work_is_either_shape_and_refuses_two() -> None:
    assert items.current_work(Listing(["/f"], [])) == "/f"
    assert items.current_work(Listing([], ["/b"])) == "/b"
    assert items.current_work(Listing([], [])) is None
    error = refusal(lambda: items.current_work(Listing(["/f"], ["/b"])))
    assert (error.code, error.paths) == (2, ["/f", "/b"])


def test_release_refuses_when_a_file_of_that_name_already_waits(box: Box) -> None:
    box.put(box.new, "50_a.handoff")
    box.inbox.take_task()
    box.put(box.new, "50_a.handoff")  # e.g. put back by hand
    before = snapshot(box.handoffs)
    error = refusal(box.inbox.release)
    assert (error.code, error.message.split(":")[0]) == (2, "RELEASE_CONFLICT")
    assert snapshot(box.handoffs) == before


def test_release_of_a_broken_file_moves_nothing(box: Box) -> None:
    box.in_process.mkdir(parents=True)
    (box.in_process / "50_a.handoff").write_bytes(b"no header block")
    error = refusal(box.inbox.release)
    assert error.message.startswith("INVALID_HANDOFF: ")
    assert box.names(box.in_process) == ["50_a.handoff"]


def test_set_header_reads_every_file_before_writing_any(box: Box) -> None:
    box.put(box.new, "50_a.handoff")
    box.put(box.new, "50_b.handoff")
    box.inbox.take_batch()
    [batch] = box.names(box.in_process)
    broken = box.in_process / batch / "50_b.handoff"
    broken.write_bytes(b"broken")
    error = refusal(lambda: box.inbox.set_header(None, "blocked_reason", "r"))
    assert error.code == 2
    assert header(box.in_process / batch / "50_a.handoff", "blocked_reason") is None


# --- durability: what a power cut may not undo (the whole model: test_power_loss.py) ----


def flushes(monkeypatch: pytest.MonkeyPatch, box: Box) -> list[str]:
    """The folders fsynced from now on, in order, as paths relative to the inbox."""
    seen: list[str] = []
    real = inbox.durable.fsync_dir

    def spy(path: str) -> None:
        seen.append(os.path.relpath(path, box.handoffs / "inbox"))
        real(path)

    monkeypatch.setattr(inbox.durable, "fsync_dir", spy)
    return seen


def test_a_step_flushes_each_folder_it_changed_once_before_its_lock_is_released(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    """done_with_current in task mode changes in_process/ (stamp, move out, next take),
    completed/ and new/: each is fsynced once, when the step ends, before the caller can
    print COMPLETED or TASK."""
    box.put(box.new, "50_a.handoff")
    box.put(box.new, "50_b.handoff")
    box.completed.mkdir()
    with box.inbox:
        box.inbox.take_task()
    seen = flushes(monkeypatch, box)
    with box.inbox:
        box.inbox.finish_task()
        box.inbox.take_task()
        assert seen == []  # nothing yet: one flush per folder per step, not per file
    assert sorted(seen) == ["completed", "in_process", "new"]


def test_a_batch_is_flushed_before_it_moves_and_a_new_batch_dir_before_files_move_in(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's stamps are changes inside its dir, its move a change of its parents: the
    dir is flushed first, or a power cut may keep the moved batch without its stamps.  A
    new batch dir is flushed into in_process/ before any file is claimed into it, or a cut
    may keep the claims and lose the dir with them."""
    box.put(box.new, "50_a.handoff")
    box.in_process.mkdir()
    box.completed.mkdir()
    seen = flushes(monkeypatch, box)
    with box.inbox:
        batch, _ = box.inbox.take_batch() or ("", [])
        assert seen == ["in_process"]  # the mkdir, flushed at once
    name = os.path.basename(batch)
    assert sorted(seen[1:]) == ["in_process/" + name, "new"]
    seen.clear()
    with box.inbox:
        box.inbox.finish_batch()
        assert seen == ["in_process/" + name]
    assert sorted(seen[1:]) == ["completed", "in_process"]


# --- folders behind a link (docs/protocol.md Part II), through the installed helpers -----------

TAKEN = "50_20260101T000000Z_000001_from_QA_to_coder.handoff"
LINKED = {  # the folder that is a link, what the outside folder holds, the helper run
    "inbox": ({"new/" + TAKEN: b"id: x\n\nfrom outside\n"}, "ready_for_next"),
    "inbox/new": ({TAKEN: b"id: x\n\nfrom outside\n"}, "ready_for_next"),
    "inbox/in_process": ({TAKEN: b"id: x\n\nfrom outside\n"}, "ready_for_next"),
    "inbox/completed": ({}, "done_with_current"),
}


@pytest.mark.parametrize("box", sorted(LINKED))
def test_an_inbox_folder_behind_a_link_is_refused_and_nothing_moves_in_or_out(
    project: Project, tmp_path: Path, box: str
) -> None:
    """Taking from a linked new/ would read and move a file from outside the project,
    finishing into a linked completed/ would carry one out: the helper refuses first, and
    leaves the live file alone (nothing changed)."""
    files, helper = LINKED[box]
    if helper == "done_with_current":
        project.put("coder", TAKEN, box="inbox/in_process", dequeued_at="2026-01-01T00:00:00Z")
    outside = tmp_path / "elsewhere"
    for name, data in files.items():
        (outside / name).parent.mkdir(parents=True, exist_ok=True)
        (outside / name).write_bytes(data)
    outside.mkdir(exist_ok=True)
    before = snapshot(outside)
    folder = project.handoffs("coder") / box
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.is_dir():
        shutil.rmtree(folder)
    folder.symlink_to(outside)
    result = project.run(helper, role="coder", timeout=HANG)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"LINKED_FOLDER: {folder} is a symbolic link, not a folder; handoffd never follows "
        "it (nothing was taken or changed). Replace it with a real folder and run this "
        "again.\n"
    )
    assert snapshot(outside) == before
    # nothing changed, so the live file is not rewritten (it would list what the link shows)
    assert not (project.worktrees["coder"] / ".swarmforge" / "HANDOFF.md").exists()


@pytest.mark.parametrize("link", [".swarmforge/handoffs", ".swarmforge"])
@pytest.mark.parametrize("helper", ["ready_for_next", "heartbeat", "idle"])
def test_a_handoff_directory_behind_a_link_is_refused_and_nothing_is_written_outside(
    project: Project, tmp_path: Path, link: str, helper: str
) -> None:
    """`H` (or the worktree's `.swarmforge/`) replaced by a link to an outside folder that
    holds an inbox: the helpers neither take its work nor write a heartbeat or an idle mark
    there (the daemon refuses the same link; only the worktree is trusted, docs/protocol.md
    §15 "Links of both kinds")."""
    outside = tmp_path / "elsewhere"
    inside = outside / "handoffs" if link == ".swarmforge" else outside
    (inside / "inbox" / "new").mkdir(parents=True)
    (inside / "inbox" / "new" / TAKEN.replace("to_coder", "to_QA")).write_bytes(
        b"id: x\n\nfrom outside\n"
    )
    for name in ("heartbeat", "idle"):
        (inside / name).write_bytes(b"theirs\n")
    before = snapshot(outside)
    folder = project.worktrees["QA"] / link
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.is_dir():
        shutil.rmtree(folder)
    folder.symlink_to(outside)
    command = {"heartbeat": ("handoffd", "heartbeat"), "idle": ("handoffd", "idle")}.get(
        helper, (helper,)
    )
    result = project.run(*command, role="QA", timeout=HANG)
    assert result.code != 0 and "TASK" not in result.out
    assert str(folder) in result.err and "a symbolic link, not a folder" in result.err
    assert snapshot(outside) == before


def test_a_file_whose_name_holds_a_control_character_is_never_taken(project: Project) -> None:
    """One planted in `new/` by hand (the daemon refuses such a name, docs/protocol.md §15):
    the agent is never given a TASK line that holds it; the next plain file is taken."""
    planted = "10_20260101T000000Z_000001_from_QA_to_coder\x1b]0;pwned\x07.handoff"
    project.put("coder", planted)
    project.put("coder", "50_20260101T000000Z_000002_from_QA_to_coder.handoff")
    taken = project.run("ready_for_next", role="coder")
    assert taken.code == 0 and taken.out.startswith("TASK: "), taken.err
    assert "000002" in taken.out.splitlines()[0] and "\x1b" not in taken.out + taken.err
    assert (project.box("coder", "inbox/new") / planted).exists()


def test_a_batch_dir_whose_name_holds_a_control_character_is_no_batch(project: Project) -> None:
    """A `batch_…` folder planted in `in_process/` with an escape sequence in its name is
    never printed on a BATCH line: it is no batch, and the waiting work is taken."""
    planted = project.box("cleaner", "inbox/in_process") / "batch_\x1b]0;pwned\x07"
    planted.mkdir(parents=True)
    project.put("cleaner", "50_20260101T000000Z_000001_from_QA_to_cleaner.handoff",
                box="inbox/in_process/" + planted.name)  # fmt: skip
    project.put("cleaner", "50_20260101T000000Z_000002_from_QA_to_cleaner.handoff")
    taken = project.run("ready_for_next", role="cleaner")
    assert taken.code == 0 and taken.out.startswith("BATCH: "), taken.err
    assert "\x1b" not in taken.out + taken.err and "000002" in taken.out
