"""Reports on disk: the §8 layout, string-only front matter, durable writes, the newest 50."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from handoffd.queue import reports
from tests import crashstates, crashtrace
from tests.crashtrace import Step
from tests.fault_support import strace_problem

ID = "20260615T140531Z_000042_from_architect"
NOW = 1_781_532_331.25  # 2026-06-15T14:05:31.25Z


def test_store_writes_the_section_8_name_and_front_matter(tmp_path: Path) -> None:
    text_in = "\nWorking.\n"
    path = reports.store(str(tmp_path), ID, "RUNNING", "coder", "claude", "c-1", text_in, NOW)
    assert path == str(tmp_path / "reports" / ID / "20260615T140531.250000Z_RUNNING.md")
    text = Path(path).read_text()
    assert text.startswith("---\nstatus: RUNNING\nrole: coder\nagent: claude\nconversation: c-1\n")
    assert "\nreported_at: '2026-06-15T14:05:31.250000Z'\n---\n" in text
    assert text.endswith("---\n\nWorking.\n")  # surrounding blank lines trimmed


def test_read_keeps_every_value_a_string(tmp_path: Path) -> None:
    path = reports.store(str(tmp_path), ID, "DONE", "05", "yes", "2026-01-01", "Body", NOW)
    report = reports.read(path)
    assert (report.status, report.role, report.agent, report.conversation) == (
        "DONE",
        "05",
        "yes",
        "2026-01-01",
    )
    assert report.reported_at == "2026-06-15T14:05:31.250000Z"
    assert report.text == "Body"


def test_hand_written_unquoted_values_stay_strings(tmp_path: Path) -> None:
    path = tmp_path / "r_DONE.md"
    path.write_text("---\nstatus: DONE\nrole: 05\nagent: yes\nreported_at: 2026-06-15\n---\nok\n")
    report = reports.read(str(path))
    assert (report.role, report.agent, report.reported_at) == ("05", "yes", "2026-06-15")


def test_a_report_without_front_matter_takes_its_status_from_its_name(tmp_path: Path) -> None:
    path = tmp_path / "20260615T140531.000000Z_BLOCKED.md"
    path.write_text("just text\n")
    report = reports.read(str(path))
    assert (report.status, report.role, report.text) == ("BLOCKED", "", "just text")
    assert report.reported_at == "2026-06-15T14:05:31.000000Z"  # so the board shows a time


def test_first_line_is_the_first_line_that_is_not_blank(tmp_path: Path) -> None:
    path = reports.store(str(tmp_path), ID, "RUNNING", "coder", "", "", "\n  Halfway.\nMore.", NOW)
    assert reports.read(path).first_line == "Halfway."
    empty = reports.store(str(tmp_path), ID, "RUNNING", "coder", "", "", "", NOW + 1)
    assert reports.read(empty).first_line == ""


def test_files_are_in_the_order_written_by_mtime_then_name_and_only_reports(
    tmp_path: Path,
) -> None:
    """docs/protocol.md Part II: the last written is the latest, whatever its name says."""
    paths = {}
    for offset in (3, 1, 2):
        paths[offset] = reports.store(str(tmp_path), ID, "RUNNING", "r", "a", "", f"n{offset}",
                                      NOW + offset)  # fmt: skip
        os.utime(paths[offset], ns=(offset, 10**9 * (10 - offset)))  # n3 oldest, n1 newest
    (tmp_path / "reports" / ID / ".x.md.1.0.tmp").write_text("temp")
    texts = [reports.read(p).text for p in reports.report_paths(str(tmp_path), ID)]
    assert texts == ["n3", "n2", "n1"]
    for path in paths.values():  # one mtime for all: the name decides
        os.utime(path, ns=(0, 10**9))
    texts = [reports.read(p).text for p in reports.report_paths(str(tmp_path), ID)]
    assert texts == ["n1", "n2", "n3"]


def test_no_reports_is_an_empty_list(tmp_path: Path) -> None:
    assert reports.report_paths(str(tmp_path), ID) == []


def test_two_reports_in_one_microsecond_both_stay(tmp_path: Path) -> None:
    first = reports.store(str(tmp_path), ID, "DONE", "r", "a", "", "one", NOW)
    second = reports.store(str(tmp_path), ID, "DONE", "r", "a", "", "two", NOW)
    assert first != second
    assert [reports.read(p).text for p in reports.report_paths(str(tmp_path), ID)] == ["one", "two"]


def test_51_reports_keep_the_newest_50(tmp_path: Path) -> None:
    for n in range(51):
        reports.store(str(tmp_path), ID, "RUNNING", "r", "a", "", f"n{n}", NOW + n)
    kept = reports.report_paths(str(tmp_path), ID)
    assert len(kept) == reports.KEEP == 50
    assert reports.read(kept[0]).text == "n1"  # n0, the oldest, is gone
    assert reports.read(kept[-1]).text == "n50"
    assert not [n for n in os.listdir(tmp_path / "reports" / ID) if n.startswith(".")]


def test_reported_at_is_the_time_the_name_carries_to_the_microsecond(tmp_path: Path) -> None:
    """docs/protocol.md §8: a report's name and its `reported_at` state one time; a clock
    reading whose float is a hair under a microsecond boundary must not split them."""
    now = 1_764_508_094.1792018  # times 10**6 this float lands a hair under a whole number
    for _ in range(2):  # the second, in the same microsecond, takes the next one
        path = reports.store(str(tmp_path), ID, "DONE", "r", "a", "", "x", now)
        stamp = os.path.basename(path).split("_")[0]  # yyyymmddThhmmss.ffffffZ
        reported = reports.read(path).reported_at
        assert reported.replace("-", "").replace(":", "") == stamp, (path, reported)


STORE = """
import sys
from handoffd.queue import reports
path = reports.store(sys.argv[1], {ident!r}, "RUNNING", "coder", "claude", "", "Working.", {now!r})
print("REPORTED: " + path, flush=True)
"""


def test_a_report_stored_in_a_handoff_directory_it_made_survives_a_power_cut(
    tmp_path: Path,
) -> None:
    """`REPORTED:` is printed once the report is durable, folders included: a handoff
    directory made for the report (a role that never had mail) is flushed into its parent
    like every folder below it, or a cut could forget it, and the report with it."""
    problem = strace_problem()
    if problem:
        pytest.skip(problem)
    base = tmp_path / "r0000000"
    (base / "wt").mkdir(parents=True)
    (tmp_path / "traces").mkdir()
    handoffs = base / "wt" / ".swarmforge" / "handoffs"
    code = STORE.format(ident=ID, now=NOW)
    step = Step("store", [sys.executable, "-c", code, str(handoffs)], str(base), dict(os.environ))
    recorded = crashtrace.record([step], str(base), str(tmp_path / "traces"))

    def kept(tree: crashtrace.Tree, heard: list[crashtrace.Op]) -> list[str]:
        said = b"".join(op.data for op in heard if op.kind == "said").decode()
        named = [line.removeprefix("REPORTED: ") for line in said.splitlines()]
        return [
            f"{p} was reported, then lost" for p in named if p[len(str(base)) + 1 :] not in tree
        ]

    result = crashstates.explore(recorded, kept, [])
    assert not result.findings, result.report()


def test_storing_a_report_sweeps_the_temp_a_killed_writer_left_in_its_folder(
    tmp_path: Path,
) -> None:
    """A writer killed between its temp file and the rename leaves a hidden file no reader
    sees; the next report on that handoff removes it (its pid is gone), never a live one's."""
    handoffs = str(tmp_path / "h")
    first = reports.store(handoffs, "id1", "RUNNING", "coder", "a", "", "one", 1.0)
    folder = Path(first).parent
    gone = folder / ".20260101T000000.000000Z_ANSWER.md.999999999.0.tmp"  # no such pid
    live = folder / f".20260101T000000.000000Z_ANSWER.md.{os.getpid()}.7.tmp"
    gone.write_text("half")
    live.write_text("being written")
    reports.store(handoffs, "id1", "RUNNING", "coder", "a", "", "two", 2.0)
    assert not gone.exists() and live.exists()


@pytest.mark.parametrize("planted", ["fifo", "file"])
@pytest.mark.parametrize("where", ["reports", f"reports/{ID}"])
def test_a_fifo_or_file_where_a_report_folder_should_be_is_refused_naming_it(
    tmp_path: Path, planted: str, where: str
) -> None:
    """Nothing can be written through a FIFO or a file (it is no link, and it may be
    someone's): it is left as it is, and the refusal is one line with its full path and
    what to do, never a bare `<id>: …` that leaves the person to find it."""
    handoffs = tmp_path / "H"
    path = handoffs / where
    path.parent.mkdir(parents=True)
    if planted == "fifo":
        os.mkfifo(path)
    else:
        path.write_text("notes\n")
    with pytest.raises(OSError) as raised:
        reports.store(str(handoffs), ID, "ANSWER", "coder", "ann", "", "x", NOW)
    what = "a FIFO" if planted == "fifo" else "a regular file"
    assert str(raised.value) == (
        f"{path}: {what}, not a folder: remove it, then run this again (no report was written)"
    )
    assert path.is_fifo() if planted == "fifo" else path.read_text() == "notes\n"


def test_has_answer_sees_an_answers_name_and_nothing_else(tmp_path: Path) -> None:
    """The helpers' one look for an operator's answer: a name, no file read."""
    assert not reports.has_answer(str(tmp_path), ID)  # no folder
    reports.store(str(tmp_path), ID, "RUNNING", "coder", "claude", "", "Working.", NOW)
    assert not reports.has_answer(str(tmp_path), ID)
    reports.store(str(tmp_path), ID, reports.ANSWER, "coder", "op", "", "Yes.", NOW + 1)
    assert reports.has_answer(str(tmp_path), ID)


@pytest.mark.parametrize("linked", ["reports", f"reports/{ID}"])
def test_has_answer_follows_no_link_to_an_answer_elsewhere(tmp_path: Path, linked: str) -> None:
    """Anyone may write under `.swarmforge/`: an answer behind a link is none (Part II)."""
    elsewhere = tmp_path / "elsewhere"
    reports.store(str(elsewhere), ID, reports.ANSWER, "coder", "op", "", "Yes.", NOW)
    handoffs = tmp_path / "H"
    (handoffs / linked).parent.mkdir(parents=True)
    target = elsewhere / "reports" / (ID if linked.endswith(ID) else "")
    (handoffs / linked).symlink_to(target)
    assert reports.has_answer(str(elsewhere), ID)
    assert not reports.has_answer(str(handoffs), ID)


@pytest.mark.parametrize("ident", ["", "..", f"../../reports/{ID}", f"{ID}\0", ".hidden", "a/b"])
def test_has_answer_refuses_an_id_that_is_no_folder_name(tmp_path: Path, ident: str) -> None:
    """A header's id names one folder under `H/reports/`, never a way out of it."""
    handoffs = tmp_path / "H"
    reports.store(str(tmp_path), ID, reports.ANSWER, "coder", "op", "", "Yes.", NOW)
    (handoffs / "reports" / ".hidden").mkdir(parents=True)  # an answer's name in a dot-folder
    (handoffs / "reports" / ".hidden" / f"20260615T140531.250000Z{reports.ANSWER_SUFFIX}").touch()
    (handoffs / "reports" / "a").mkdir()  # and in a folder `a/b` would reach through `a`
    (handoffs / "reports" / "a" / "b").mkdir()
    (handoffs / "reports" / "a" / "b" / f"20260615T140531.250000Z{reports.ANSWER_SUFFIX}").touch()
    assert not reports.has_answer(str(handoffs), ident)
