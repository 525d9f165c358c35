"""The one read-only scan: a project's queue into a snapshot, while the queue moves."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from handoffd.core import config
from handoffd.queue import scan
from handoffd.queue.scan import State
from handoffd.snapshot.snapshot import take_snapshot
from tests.conftest import Project, snapshot
from tests.daemon_support import queue

NAME = "07_20260615T140531Z_000042_from_architect_to_coder_cleaner.handoff"


def roles(project: Project) -> dict[str, config.Role]:
    return config.load_roles(str(project.root))


def test_states_are_iterable_and_are_the_names_status_prints() -> None:
    assert list(State) == ["outbox", "failed", "dismissed", "new", "in_process", "completed",
                           "sent"]  # fmt: skip
    assert set(State.OPEN) | set(State.CLOSED) == set(State)


def test_scan_finds_every_state_batches_included_and_ignores_other_names(
    project: Project,
) -> None:
    outbox = queue(project, "coder", ["cleaner"])
    failed = project.put("coder", "50_20260101T000000Z_000900_from_coder_to_QA.handoff",
                         box="failed")  # fmt: skip
    (failed.parent / (failed.name + ".error")).write_text("why\n")
    new = project.put("QA", NAME.replace("architect", "coder"))
    batch = project.put("cleaner", NAME, box="inbox/in_process/batch_20260101T000000Z_000001")
    done = project.put("QA", NAME.replace("000042", "000043"), box="inbox/completed")
    for junk in ("notes.txt", NAME + "~", "." + NAME + ".tmp"):
        (project.box("QA", "inbox/new") / junk).write_text("x")
    found = take_snapshot(str(project.root))
    where = {(e.role, e.state, e.path) for e in found.entries()}
    assert where == {
        ("coder", State.OUTBOX, str(outbox)),
        ("coder", State.FAILED, str(failed)),
        ("QA", State.NEW, str(new)),
        ("cleaner", State.IN_PROCESS, str(batch)),
        ("QA", State.COMPLETED, str(done)),
    }
    [in_batch] = [e for e in found.open if e.state == State.IN_PROCESS]
    assert in_batch.batch == str(batch.parent)


def test_scan_is_read_only(project: Project) -> None:
    """Stray temp files and an empty batch folder are the inbox's to sweep, never the scan's."""
    queue(project, "coder", ["cleaner"])
    (project.box("cleaner", "inbox/in_process") / "batch_20260101T000000Z_000001").mkdir(
        parents=True
    )
    (project.box("cleaner", "inbox/new")).mkdir(parents=True, exist_ok=True)
    (project.box("cleaner", "inbox/new") / ".stray.tmp").write_text("half")
    before = snapshot(project.root)
    take_snapshot(str(project.root))
    assert snapshot(project.root) == before


def test_open_headers_are_read_and_history_headers_only_on_demand(project: Project) -> None:
    project.put("QA", NAME, owner="open")
    done = project.put("QA", NAME.replace("000042", "000043"), box="inbox/completed", owner="h")
    found = take_snapshot(str(project.root))
    [open_entry] = found.open
    [history] = found.history
    assert open_entry.headers["owner"] == "open" and open_entry.mtime is not None
    assert history._headers is None  # listed, not opened
    assert history.headers["owner"] == "h" and history.path == str(done)


def test_a_file_that_vanished_after_listing_is_reported_as_moved(project: Project) -> None:
    path = project.put("QA", NAME)
    entries = list(scan._list(roles(project)["QA"], tuple(State)))
    os.rename(path, project.box("QA", "inbox/new") / ("gone-" + NAME))
    assert scan._load_open(entries, {}) is False


def test_a_file_seen_twice_mid_rename_is_kept_once_at_its_later_place() -> None:
    early = scan.Entry("QA", State.NEW, f"/h/inbox/new/{NAME}")
    later = scan.Entry("QA", State.IN_PROCESS, f"/h/inbox/in_process/batch_x/{NAME}", "batch_x")
    done = scan.Entry("QA", State.COMPLETED, f"/h/inbox/completed/{NAME}")
    assert scan._dedupe([early, later]) == [later]
    assert scan._dedupe([later, done, early]) == [done]


def test_an_original_and_a_copy_of_one_name_are_two_entries() -> None:
    original = scan.Entry("QA", State.OUTBOX, f"/h/outbox/{NAME}")
    copy = scan.Entry("QA", State.NEW, f"/h/inbox/new/{NAME}")
    assert len(scan._dedupe([original, copy])) == 2


def test_files_moving_on_while_scanned_are_each_counted_once(project: Project) -> None:
    """A real mover renames files new/ → in_process/ → completed/ while scans run."""
    qa = roles(project)["QA"]
    names = [NAME.replace("000042", f"{n:06d}") for n in range(60)]
    for name in names:
        project.put("QA", name)
    done = threading.Event()

    def mover() -> None:
        for name in names:
            os.rename(qa.path("inbox/new", name), qa.path("inbox/in_process", name))
        for name in names:
            os.rename(qa.path("inbox/in_process", name), qa.path("inbox/completed", name))
        done.set()

    project.box("QA", "inbox/in_process").mkdir(parents=True, exist_ok=True)
    project.box("QA", "inbox/completed").mkdir(parents=True, exist_ok=True)
    thread = threading.Thread(target=mover)
    thread.start()
    scans = 0
    while not done.is_set() or scans == 0:
        entries = scan.scan_role(qa)
        assert sorted(e.name for e in entries) == names
        scans += 1
    thread.join()


def test_the_daemon_is_not_running_with_a_stale_pid_file(project: Project) -> None:
    daemon_dir = project.root / ".swarmforge" / "daemon"
    daemon_dir.mkdir()
    (daemon_dir / "handoffd.pid").write_text(f"{os.getpid()}\n")  # a live pid, no lock held
    found = take_snapshot(str(project.root))
    assert not found.daemon.running


def test_listing_reads_no_file(project: Project) -> None:
    project.put("QA", NAME)
    [entry] = scan.listing(roles(project)["QA"], (State.NEW, State.IN_PROCESS))
    assert entry.state == State.NEW and entry._headers is None


def test_a_completed_handoff_is_found_by_id_batches_included_without_listing_history(
    project: Project,
) -> None:
    single = project.put("QA", NAME, box="inbox/completed")
    batched = project.put("cleaner", NAME, box="inbox/completed/batch_20260101T000000Z_000001")
    project.put("QA", NAME.replace("000042", "000043"), box="inbox/completed")
    found = take_snapshot(str(project.root))
    hits = found.completed("20260615T140531Z_000042_from_architect")
    assert sorted((e.role, e.path, e.batch) for e in hits) == [
        ("QA", str(single), None),
        ("cleaner", str(batched), str(batched.parent)),
    ]
    assert found.completed("20260615T140531Z_000004_from_architect") == []
    assert found._history is None  # the look-up listed names, not the history entries


def test_history_is_listed_on_first_use_and_a_file_seen_open_and_done_is_kept_done(
    project: Project,
) -> None:
    """A copy completed between the open listing and the history listing counts once."""
    path = project.put("QA", NAME, box="inbox/in_process")
    found = take_snapshot(str(project.root))
    assert [e.state for e in found.open] == [State.IN_PROCESS]
    done = project.box("QA", "inbox/completed")
    done.mkdir(parents=True)
    os.rename(path, done / NAME)
    assert [(e.state, e.name) for e in found.history] == [(State.COMPLETED, NAME)]
    assert found.open == []


def test_a_queue_folder_behind_a_link_is_not_listed_so_no_view_reads_outside_files(
    project: Project, tmp_path: os.PathLike[str]
) -> None:
    """Hostile files: `inbox/new` and `inbox/completed` replaced by links to folders outside
    the project holding queue-named files.  The scan lists neither (nor a linked batch
    folder), so status, the web board, resume and the dependency look-up never read them."""
    outside = os.path.join(tmp_path, "outside")
    for folder in ("new", "completed", "batch"):
        os.makedirs(os.path.join(outside, folder))
        with open(os.path.join(outside, folder, NAME), "w") as file:
            file.write("task: STOLEN\n\nsecret\n")
    qa = project.box("QA", "inbox")
    qa.mkdir(parents=True, exist_ok=True)
    for folder in ("new", "completed"):
        if (qa / folder).exists():
            (qa / folder).rmdir()
        (qa / folder).symlink_to(os.path.join(outside, folder))
    batch = project.box("cleaner", "inbox/in_process") / "batch_20260101T000000Z_000001"
    batch.parent.mkdir(parents=True, exist_ok=True)
    batch.symlink_to(os.path.join(outside, "batch"))
    found = take_snapshot(str(project.root))
    assert [e.path for e in found.entries()] == []
    assert found.completed("20260615T140531Z_000042_from_architect") == []
    assert [e.path for e in found.history] == []


# --- the archive's listing (docs/protocol.md §9, §13) ------------------------------------------


def _age_folders(root: Path) -> None:
    past = time.time() - 60
    for folder, _, _ in os.walk(root):
        os.utime(folder, (past, past))


def test_the_archive_lists_green_names_newest_first_and_lists_again_only_what_changed(
    project: Project,
) -> None:
    from handoffd.snapshot.snapshot import GreenListing

    for n in (3, 1, 2):
        project.put("QA", f"50_20260101T000000Z_00000{n}_from_coder_to_QA.handoff",
                    box="inbox/completed")  # fmt: skip
    project.put("coder", "10_20260102T000000Z_000009_from_coder_to_QA.handoff",
                box="failed/dismissed")  # fmt: skip
    _age_folders(project.root)
    kept = GreenListing()
    roles = config.load_roles(str(project.root))
    rows = kept.rows(roles)
    assert [(row[1], row[2], Path(row[3]).name[3:26]) for row in rows] == [
        ("coder", "dismissed", "20260102T000000Z_000009"),
        ("QA", "completed", "20260101T000000Z_000003"),
        ("QA", "completed", "20260101T000000Z_000002"),
        ("QA", "completed", "20260101T000000Z_000001"),
    ]  # fmt: skip
    assert kept.rows(roles) is rows  # nothing changed: nothing listed or sorted again
    project.put("QA", "50_20260103T000000Z_000004_from_coder_to_QA.handoff", box="inbox/completed")
    again = kept.rows(roles)
    assert again is not rows and Path(again[0][3]).name.startswith("50_20260103T")


def test_a_done_dependency_is_found_by_its_id_header_when_its_name_is_hand_made(
    project: Project,
) -> None:
    """`depends_on: manual-1` names a handoff done as `completed/10_manual.handoff` with
    `id: manual-1`: the look-up finds it by that header (the name spells no id), so the
    dependent's TASK block shows it green, as the board names it."""
    from tests.test_board_commands import run

    project.put("QA", "10_manual.handoff", box="inbox/completed", id="manual-1",
                completed_at="2026-01-01T00:00:00Z")  # fmt: skip
    project.put("coder", "50_20260101T000000Z_000001_from_QA_to_coder.handoff",
                id="20260101T000000Z_000001_from_QA", depends_on="manual-1")  # fmt: skip
    [done] = take_snapshot(str(project.root)).done("manual-1")
    assert (done.role, done.name, done.id) == ("QA", "10_manual.handoff", "manual-1")
    taken = run(project, "ready_for_next")
    assert "DEPENDS_ON: manual-1@QA GREEN\n" in taken.out, taken.out


def test_an_outbox_original_beside_a_failed_one_of_its_name_is_a_card_of_its_own(
    project: Project,
) -> None:
    """Not a file caught mid-rename (that one has left the outbox once seen in failed/):
    both are on the board, the refused one keeping its card's name, and retry still
    refuses to put one over the other."""
    from tests.test_board_commands import run

    name = "50_20260101T000000Z_000900_from_QA_to_designer.handoff"
    ident = "20260101T000000Z_000900_from_QA"
    failed = project.put("QA", name, box="failed", id=ident)
    (failed.parent / (name + ".error")).write_text("Unknown recipient role: designer\n")
    outbox = project.put("QA", name, box="outbox", id=ident)
    found = take_snapshot(str(project.root))
    assert [(e.state, e.path) for e in found.open if e.role == "QA"] == [
        (State.FAILED, str(failed)), (State.OUTBOX, str(outbox)),
    ]  # fmt: skip
    import json

    shown = run(project, "status", "--json", role=None, cwd=project.root)
    cards = {card["card"]: card["state"] for card in json.loads(shown.out)}
    assert cards[f"{ident}@QA"] == "failed" and cards[f"{name}@QA"] == "outbox"
    retried = run(project, "retry", "--force", f"{ident}@QA", role=None, cwd=project.root)
    assert retried.err.startswith(f"RETRY_CONFLICT: {ident}@QA")
