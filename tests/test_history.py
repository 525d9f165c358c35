"""The history index behind `digest --task` (handoffd/snapshot/history.py): a history
header is read once, an unchanged folder is not listed again, a torn line is ignored."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from handoffd.core import config
from handoffd.snapshot import history, indexfile
from handoffd.snapshot.snapshot import take_snapshot
from tests.conftest import Project
from tests.digest_support import run

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


BATCH = "inbox/completed/batch_20260101T000001Z_000001"


def test_a_batch_dir_is_listed_once_then_known_from_the_index(project):
    path = put(project, "batched", box=BATCH)
    settle(project, BATCH)
    settle(project)
    assert [f.state for f in history.lookup(cleaner(project), "task:batched")] == ["completed"]
    assert f"{BATCH}/\t1\t{OLD_NS}\n" in index_file(project, "all")  # its count and mtime
    with open(path, "r+b") as file:  # rewritten in place: the dir's mtime stays
        file.write(file.read().replace(b"task: batched", b"task: changed"))
    assert [f.task for f in history.role_files(cleaner(project))] == ["batched"]  # not listed


def test_open_folders_come_from_the_scan_afresh(project):
    put(project, "live", box="inbox/new")
    settle(project, "inbox/new")
    assert history.lookup(cleaner(project), "task:live") == []  # never indexed
    found = history.thread(take_snapshot(str(project.root)), "task:live")
    assert [f.state for f in found] == ["new"]
    put(project, "other", box="inbox/new")  # same name: the header changed in place
    assert history.thread(take_snapshot(str(project.root)), "task:live") == []


def test_a_file_seen_open_and_in_history_is_kept_at_its_later_place(project):
    put(project, "moving", box="inbox/in_process")
    snapshot = take_snapshot(str(project.root))
    project.box("cleaner", "inbox/completed").mkdir()
    os.rename(
        project.box("cleaner", "inbox/in_process") / NAME,
        project.box("cleaner", "inbox/completed") / NAME,
    )  # completed between the scan and the history look-up
    found = history.thread(snapshot, "task:moving")
    assert [f.state for f in found] == ["completed"]


# --- the index never outlives the files it names ------------------------------------------


def batch_copy(project: Project, n: int, task: str) -> Path:
    """Copy n of a batch cleaner completed, from coder, with `task`."""
    name = NAME.replace("000009", f"{n:06d}")
    ident = IDENT.replace("000009", f"{n:06d}")
    stamps = {"enqueued_at": "2026-01-01T00:00:01Z", "completed_at": "2026-01-01T00:00:05Z"}
    return project.put("cleaner", name, box=BATCH, id=ident, to="cleaner", task=task, **stamps)


def outcomes(project: Project) -> dict[str, str]:
    """Each thread carry-forward shows, by task: its Outcome line."""
    result = run("carry-forward", project, "-n", "9", "--json")
    assert result.returncode == 0, result.stderr
    found = {}
    for item in json.loads(result.stdout):
        title, outcome = item["markdown"].split("\n")[:2]
        found[title.split(" · ")[0].removeprefix("# Task ")] = outcome
    return found


def test_carry_forward_forgets_batch_files_deleted_or_moved_back_to_new(project):
    """A batch file indexed, then deleted or moved back to `new/`, is never still shown as
    `completed by cleaner at ` (no time: no file); carry-forward agrees with the files."""
    gone, back, stays = (batch_copy(project, n, f"task-{n}") for n in (1, 2, 3))
    settle(project, BATCH)
    settle(project)
    assert outcomes(project) == {
        f"task-{n}": "**Outcome** completed by cleaner at 2026-01-01 00:00Z" for n in (1, 2, 3)
    }
    gone.unlink()
    new = project.box("cleaner", "inbox/new")
    new.mkdir(parents=True)
    back.rename(new / back.name)
    shown = outcomes(project)
    assert shown == {
        "task-2": "**Outcome** waiting in cleaner's inbox since 2026-01-01 00:00Z",
        "task-3": "**Outcome** completed by cleaner at 2026-01-01 00:00Z",
    }
    relatives = [line.split("\t")[0] for line in index_file(project, "all").splitlines()]
    assert f"{BATCH}/{gone.name}" not in relatives and f"{BATCH}/{back.name}" not in relatives
    assert f"{BATCH}/{stays.name}" in relatives


# --- a torn or foreign index is skipped and rebuilt, never believed or followed -----------


def digest_task(project: Project, task: str) -> str:
    result = run("digest", project, "--task", task)
    assert result.returncode == 0, result.stderr
    return result.stdout


def sent_and_completed(project: Project, task: str) -> None:
    """A handoff of `task` from coder to cleaner, sent and completed, both indexed."""
    project.put("coder", NAME, box="sent", id=IDENT, to="cleaner", task=task)
    put(project, task)
    for role, box in (("coder", "sent"), ("cleaner", "inbox/completed")):
        os.utime(project.box(role, box), ns=(OLD_NS, OLD_NS))
    assert "completed by cleaner" in digest_task(project, task)  # indexes both


def test_a_line_torn_mid_character_is_skipped_and_its_bucket_rebuilt(project):
    sent_and_completed(project, "café")
    bucket = project.handoffs("cleaner") / ".digest-index" / history.bucket("task:café")
    with open(bucket, "ab") as file:  # a crash mid-append, then the next append's line feed
        file.write(b"inbox/completed/other.handoff\tcaf\xc3\n")  # "café", cut inside its "é"
    assert "**Outcome** completed by cleaner at" in digest_task(project, "café")
    assert b"\xc3\n" not in bucket.read_bytes()  # made anew from `all`


def test_a_bad_byte_in_every_bucket_still_finds_the_task(project):
    sent_and_completed(project, "parser")
    for role in ("coder", "cleaner", "QA"):
        folder = project.handoffs(role) / ".digest-index"
        for bucket in folder.glob("b-*"):
            with open(bucket, "ab") as file:
                file.write(b"\xff\n")
    assert "**Outcome** completed by cleaner at" in digest_task(project, "parser")


def test_a_task_with_a_tab_from_a_hand_made_file_is_indexed_and_found(project):
    sent_and_completed(project, "tab\there")
    settle(project)
    assert "**Outcome** completed by cleaner at" in digest_task(project, "tab\there")
    assert f"{NAME}\ttab\\there\t" in index_file(project, "all")  # one line, escaped


def test_a_fifo_in_place_of_a_bucket_is_never_waited_on(project):
    put(project, "kept")
    settle(project)
    history.lookup(cleaner(project), "task:kept")
    bucket = project.handoffs("cleaner") / ".digest-index" / history.bucket("task:kept")
    bucket.unlink()
    os.mkfifo(bucket)
    code = (
        "import sys; from handoffd.core import config; from handoffd.snapshot import history; "
        "role = config.load_roles(sys.argv[1])['cleaner']; "
        "print([f.task for f in history.lookup(role, 'task:kept')])"
    )
    result = subprocess.run([sys.executable, "-c", code, str(project.root)], capture_output=True,
                            text=True, timeout=10, check=False)  # fmt: skip
    assert result.stdout == "['kept']\n", result.stderr
    assert bucket.is_file() and not bucket.is_symlink()  # the FIFO replaced by a real bucket


def test_a_symlinked_bucket_or_index_folder_is_never_read_or_written_through(project, tmp_path):
    put(project, "kept")
    settle(project)
    history.lookup(cleaner(project), "task:kept")
    folder = project.handoffs("cleaner") / ".digest-index"
    decoy = tmp_path / "decoy"
    lie = f"inbox/completed/{NAME.replace('000009', '000077')}\tkept\tx\n"
    decoy.write_text(lie)
    bucket = folder / history.bucket("task:kept")
    bucket.unlink()
    bucket.symlink_to(decoy)
    assert [f.task for f in history.lookup(cleaner(project), "task:kept")] == ["kept"]
    assert decoy.read_text() == lie and not bucket.is_symlink()
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(folder)
    folder.symlink_to(outside)
    assert [f.task for f in history.lookup(cleaner(project), "task:kept")] == ["kept"]
    assert list(outside.iterdir()) == [] and folder.is_dir() and not folder.is_symlink()


def test_an_oversized_index_file_is_not_read_whole(project, monkeypatch):
    put(project, "kept")
    settle(project)
    history.lookup(cleaner(project), "task:kept")
    bucket = project.handoffs("cleaner") / ".digest-index" / history.bucket("task:kept")
    monkeypatch.setattr(indexfile, "READ_LIMIT", 4096)
    with open(bucket, "ab") as file:
        file.write(b"x" * 8192 + b"\n")
    assert [f.task for f in history.lookup(cleaner(project), "task:kept")] == ["kept"]
    assert bucket.stat().st_size < 4096


def test_a_line_naming_a_path_outside_history_is_never_opened(project):
    """A line the index never writes (`..` out of history, into the open folders or out of
    the project) names nothing, even where a file is there."""
    put(project, "kept")
    put(project, "kept", box="inbox/new", name=NAME.replace("000009", "000010"))
    project.box("cleaner", "sent").mkdir()  # so that `sent/..` leads somewhere
    settle(project)
    history.lookup(cleaner(project), "task:kept")
    bucket = project.handoffs("cleaner") / ".digest-index" / history.bucket("task:kept")
    outside = NAME.replace("000009", "000010")
    with open(bucket, "a") as file:
        file.write(f"sent/../inbox/new/{outside}\tkept\tx\ninbox/new/{outside}\tkept\tx\n")
    found = history.lookup(cleaner(project), "task:kept")
    assert [(f.state, os.path.basename(f.path)) for f in found] == [("completed", NAME)]


def test_an_index_locked_elsewhere_is_neither_waited_on_for_ever_nor_half_written(project):
    """Another process holds the index's lock (docs/protocol.md §15, "Locks"): a look-up
    still answers, from the files, and writes nothing to the index (a folder counted as
    listed while its files are missing would lose them from later look-ups); once the
    lock is free, the next look-up indexes them."""
    from tests.test_operator import HOLD

    put(project, "kept")
    settle(project)
    folder = project.handoffs("cleaner") / history.INDEX
    folder.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        found = history.lookup(cleaner(project), "task:kept")
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert [f.task for f in found] == ["kept"]
    assert sorted(os.listdir(folder)) == []
    assert [f.task for f in history.lookup(cleaner(project), "task:kept")] == ["kept"]
    assert "kept" in index_file(project, "all")
