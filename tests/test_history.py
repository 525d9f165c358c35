"""The history index behind `digest --task` (handoffd/continuity/history.py): a history
header is read once, an unchanged folder is not listed again, a torn line is ignored."""

from __future__ import annotations

import os

from handoffd import config, scan
from handoffd.continuity import history, threads
from tests.conftest import Project

NAME = "50_20260101T000000Z_000009_from_coder_to_cleaner.handoff"
IDENT = "20260101T000000Z_000009_from_coder"
OLD_NS = 1_700_000_000 * 10**9  # long settled


def put(project: Project, task: str, box: str = "inbox/completed", name: str = NAME) -> str:
    path = project.put(
        "cleaner", name, box=box, id=IDENT, task=task, completed_at="2026-01-01T00:00:01Z"
    )
    return str(path)


def settle(project: Project, box: str = "inbox/completed") -> None:
    """Age the folder's mtime, as if the last change were long ago."""
    os.utime(project.box("cleaner", box), ns=(OLD_NS, OLD_NS))


def cleaner(project: Project) -> config.Role:
    return config.load_roles(str(project.root))["cleaner"]


def index_file(project: Project, name: str) -> str:
    return (project.handoffs("cleaner") / ".digest-index" / name).read_text()


def test_a_history_file_is_indexed_under_its_task_and_its_id(project):
    put(project, "kept")
    settle(project)
    found = history.lookup(cleaner(project), "task:kept")
    assert [(f.state, f.task, f.activity) for f in found] == [
        ("completed", "kept", "2026-01-01T00:00:01Z")
    ]
    line = f"inbox/completed/{NAME}\tkept\t2026-01-01T00:00:01Z\n"
    assert index_file(project, "all") == line
    assert line in index_file(project, history.bucket("task:kept"))
    assert line in index_file(project, history.bucket(f"id:{IDENT}"))
    assert [f.task for f in history.lookup(cleaner(project), f"id:{IDENT}")] == ["kept"]


def test_an_unchanged_folder_is_not_listed_again(project):
    put(project, "kept")
    settle(project)
    history.lookup(cleaner(project), "task:kept")
    put(project, "kept", name=NAME.replace("000009", "000010"))
    settle(project)  # the folder looks untouched: the new file stays unseen
    assert len(history.lookup(cleaner(project), "task:kept")) == 1
    os.utime(project.box("cleaner", "inbox/completed"), ns=(OLD_NS + 1, OLD_NS + 1))
    assert len(history.lookup(cleaner(project), "task:kept")) == 2


def test_a_folder_changed_moments_ago_is_listed_again_next_time(project):
    put(project, "kept")  # mtime now: too fresh to trust
    history.lookup(cleaner(project), "task:kept")
    assert "inbox/completed\t\n" in index_file(project, "folders")
    put(project, "kept", name=NAME.replace("000009", "000010"))
    assert len(history.lookup(cleaner(project), "task:kept")) == 2


def test_a_torn_line_is_ignored_and_its_file_indexed_again(project):
    put(project, "kept")
    settle(project)
    history.lookup(cleaner(project), "task:kept")
    folder = project.handoffs("cleaner") / ".digest-index"
    torn = f"inbox/completed/{NAME}\tke"  # a crash mid-append: no newline
    (folder / "all").write_text(torn)
    (folder / history.bucket("task:kept")).write_text(torn)
    (folder / "folders").unlink()
    assert [f.task for f in history.lookup(cleaner(project), "task:kept")] == ["kept"]


def test_a_removed_history_file_is_gone_from_lookups(project):
    path = put(project, "kept")
    settle(project)
    history.lookup(cleaner(project), "task:kept")
    os.unlink(path)
    settle(project)
    assert history.lookup(cleaner(project), "task:kept") == []


def test_a_batch_dir_is_listed_once_then_known_from_the_index(project):
    put(project, "batched", box="inbox/completed/batch_20260101T000001Z_000001")
    settle(project)
    assert [f.state for f in history.lookup(cleaner(project), "task:batched")] == ["completed"]
    assert "inbox/completed/batch_20260101T000001Z_000001/\t\t\n" in index_file(project, "all")
    assert len(history.role_files(cleaner(project))) == 1


def test_open_folders_come_from_the_scan_afresh(project):
    put(project, "live", box="inbox/new")
    settle(project, "inbox/new")
    assert history.lookup(cleaner(project), "task:live") == []  # never indexed
    found = threads.thread_files(scan.scan(str(project.root)), "task:live")
    assert [f.state for f in found] == ["new"]
    put(project, "other", box="inbox/new")  # same name: the header changed in place
    assert threads.thread_files(scan.scan(str(project.root)), "task:live") == []


def test_a_file_seen_open_and_in_history_is_kept_at_its_later_place(project):
    put(project, "moving", box="inbox/in_process")
    snapshot = scan.scan(str(project.root))
    project.box("cleaner", "inbox/completed").mkdir()
    os.rename(
        project.box("cleaner", "inbox/in_process") / NAME,
        project.box("cleaner", "inbox/completed") / NAME,
    )  # completed between the scan and the history look-up
    found = threads.thread_files(snapshot, "task:moving")
    assert [f.state for f in found] == ["completed"]
