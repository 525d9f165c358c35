"""A file in an outbox is taken only once whole, and at once when it arrived whole
(docs/protocol.md §5.6): the pure rule, the kernel's answer to "is it open for writing",
what the events said with a real watcher (late, or racing a writer), and real writers
(write-then-rename, `cat >`, `cp`, a program writing in slow pieces) against a running
daemon."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from watchdog.events import FileSystemEvent

from handoffd.daemon.daemon import Daemon
from handoffd.delivery import settle
from tests.conftest import Project, wait_for
from tests.daemon_support import (
    events,
    finish,
    handoff_bytes,
    handoff_name,
    inbox,
    open_daemon,
    queue,
    spawn,
    terminate,
    wait_event,
)

BODY = "Re-read your role.\n\n" + "a long body line that takes a while to write\n" * 40


def stat_like(mtime_ns: int, ctime_ns: int, regular: bool = True) -> os.stat_result:
    mode = 0o100644 if regular else 0o010644
    s = mtime_ns / 1e9
    c = ctime_ns / 1e9
    return os.stat_result(
        (mode, 1, 1, 1, 0, 0, 100, 0, int(s), int(c), 0.0, s, c, 0, mtime_ns, ctime_ns)
    )


@pytest.mark.parametrize(
    ("mtime", "ctime", "now", "writing", "expected"),
    [
        (100.0, 100.2, 100.2, False, 0.0),  # renamed in after its last write: at once
        (100.0, 100.0, 100.2, False, 0.8),  # written in place 0.2 s ago: 0.8 s more
        (100.0, 100.0, 101.5, False, 0.0),  # written in place, still for 1.5 s
        (100.0, 100.2, 100.2, True, settle.RECHECK),  # renamed, yet someone still writes
        (500.0, 100.0, 100.5, False, 0.5),  # a future mtime cannot stretch the wait
    ],
    ids=["renamed", "fresh-in-place", "settled-in-place", "open-for-writing", "future-mtime"],
)
def test_wait_says_how_long_a_file_must_still_stand(
    mtime: float, ctime: float, now: float, writing: bool, expected: float
) -> None:
    info = stat_like(int(mtime * 1e9), int(ctime * 1e9))
    assert settle.wait(info, now, writing) == pytest.approx(expected)


def test_a_file_that_is_not_regular_never_waits() -> None:
    assert settle.wait(stat_like(10**11, 10**11, regular=False), 100.0, True) == 0.0


@pytest.mark.parametrize(
    ("mtime", "ctime", "now", "renamed", "expected"),
    [
        (100.0, 100.0, 100.0, True, 0.0),  # renamed in within one clock tick of its write
        (100.0, 100.0, 101.2, False, 0.0),  # written in place, and stood still since
        (100.0, 100.5, 100.5, False, 1.0),  # written in place: a later ctime proves nothing
        (100.0, 100.5, 100.5, None, 0.0),  # no event seen: the times decide, as before
    ],
    ids=["renamed-same-tick", "written-settled", "written-then-chmod", "no-event"],
)
def test_what_the_events_said_decides_before_the_times_do(
    mtime: float, ctime: float, now: float, renamed: bool | None, expected: float
) -> None:
    info = stat_like(int(mtime * 1e9), int(ctime * 1e9))
    assert settle.wait(info, now, False, renamed) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("said", "ctime", "expected"),
    [
        (None, 100.0, (None, False)),
        (settle.WRITTEN, 100.5, (False, False)),
        (settle.MOVED, 100.0, (True, False)),  # a rename brings a whole file
        (settle.CREATED, 100.5, (True, False)),  # a link after the last write
        (settle.CREATED, 100.0, (True, True)),  # a link, or a writer's open: ask the watcher
    ],
    ids=["no-event", "written", "moved", "created-later-ctime", "created-same-tick"],
)
def test_a_creation_is_believed_a_link_only_once_the_watcher_caught_up_unless_times_show_it(
    said: str | None, ctime: float, expected: tuple[bool | None, bool]
) -> None:
    assert settle.renamed(said, stat_like(int(100e9), int(ctime * 1e9))) == expected


def test_being_written_is_true_exactly_while_some_process_holds_it_open_for_writing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.handoff"
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sys; f = open(sys.argv[1], 'w'); print(1, flush=True);"
         " sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert writer.stdout is not None and writer.stdout.readline() == "1\n"
    reader = open(path, "rb")  # noqa: SIM115 - a reader alone does not count
    try:
        assert settle.being_written(str(path))
        writer.communicate("")
        assert not settle.being_written(str(path))
    finally:
        reader.close()
        if writer.poll() is None:
            writer.kill()


def test_a_file_written_in_place_waits_until_it_stood_still_then_goes(project: Project) -> None:
    name = handoff_name("coder", ["QA"])
    daemon = open_daemon(project)
    path = project.box("coder", "outbox") / name
    path.write_bytes(handoff_bytes(name, "coder", "QA", body=BODY))

    # The file's own times stand for "now": a slow machine must not let it settle meanwhile.
    daemon.courier.clock = lambda: os.stat(path).st_ctime
    daemon.step(0.0)
    assert inbox(project, "QA") == [] and path.exists()
    assert daemon.courier.next_retry() is not None  # it is looked at again, not forgotten
    # A hair past QUIET: st_ctime as a float rounds, and must not land a nanosecond short.
    daemon.courier.clock = lambda: os.stat(path).st_ctime + settle.QUIET + 0.01
    daemon.step(1.0)
    assert inbox(project, "QA") == [name]
    assert not events(project, "failed")


# --- the events' word, and the races around it (a real watcher, the daemon stepped) -------

LAG = 0.1  # seconds the watcher's thread is held up per event, as on a loaded machine


@pytest.fixture
def watched(project: Project) -> Iterator[Daemon]:
    """A daemon stepped by the test, with a real watcher on the outboxes."""
    daemon = open_daemon(project, watch=True)
    daemon.step(0.0)  # arms the watches
    # The file's own times stand for "now": a file written in place never settles meanwhile.
    daemon.courier.clock = lambda: 0.0
    yield daemon
    daemon.close()


def lagging(daemon: Daemon) -> None:
    """Hold up the watcher's thread before each event: they reach it late, but in order."""
    assert daemon.watcher is not None
    handler = daemon.watcher.handler
    real = handler.on_any_event

    def late(event: FileSystemEvent) -> None:
        time.sleep(LAG)
        real(event)

    handler.on_any_event = late  # type: ignore[method-assign]


def said(daemon: Daemon, path: Path) -> str | None:
    assert daemon.watcher is not None
    return daemon.watcher.said(str(path), os.lstat(path))


def test_a_file_written_in_place_is_not_taken_for_a_link_while_its_writes_are_on_their_way(
    project: Project, watched: Daemon
) -> None:
    """Its creation reached the watcher, its writes not yet: a link and a writer's open look
    alike until then, so the daemon waits for the watcher to catch up before believing it."""
    lagging(watched)
    name = handoff_name("coder", ["QA"])
    path = project.box("coder", "outbox") / name
    with open(path, "wb") as file:  # in place, whole, closed: still not to be taken yet
        file.write(handoff_bytes(name, "coder", "QA"))
    wait_for(lambda: said(watched, path) == settle.CREATED, timeout=5, what="the creation")

    watched.step(1.0)

    assert inbox(project, "QA") == [] and path.exists()
    assert said(watched, path) == settle.WRITTEN  # the writes came through before deciding
    assert str(path) in watched.courier.settling


def test_a_file_linked_into_the_outbox_is_taken_at_once_even_from_a_late_watcher(
    project: Project, watched: Daemon
) -> None:
    lagging(watched)
    name = handoff_name("coder", ["QA"])
    temp = project.box("coder", "outbox/tmp") / f".{name}.tmp"
    temp.parent.mkdir(exist_ok=True)
    temp.write_bytes(handoff_bytes(name, "coder", "QA"))
    path = project.box("coder", "outbox") / name
    os.link(temp, path)
    temp.unlink()
    wait_for(lambda: said(watched, path) == settle.CREATED, timeout=5, what="the link")

    watched.step(1.0)

    assert inbox(project, "QA") == [name]


def test_a_file_renamed_in_and_then_rewritten_in_place_waits_to_stand_still(
    project: Project, watched: Daemon
) -> None:
    name = handoff_name("coder", ["QA"])
    path = queue(project, "coder", ["QA"], name)
    wait_for(lambda: said(watched, path) == settle.MOVED, timeout=5, what="the rename")
    with open(path, "wb") as file:  # the same name, now written in place
        file.write(handoff_bytes(name, "coder", "QA", body=BODY))

    watched.step(1.0)  # whether or not the watcher has seen the writes yet

    assert inbox(project, "QA") == [] and path.exists()
    assert str(path) in watched.courier.settling


def test_a_file_renamed_in_and_then_opened_for_writing_waits_for_the_writer(
    project: Project, watched: Daemon
) -> None:
    name = handoff_name("coder", ["QA"])
    path = queue(project, "coder", ["QA"], name)
    wait_for(lambda: said(watched, path) == settle.MOVED, timeout=5, what="the rename")
    with open(path, "ab"):
        watched.step(1.0)
        assert inbox(project, "QA") == []
        assert watched.courier.settling[str(path)] == 1.0 + settle.RECHECK


# --- real writers against a running daemon ------------------------------------------------


@pytest.fixture
def daemon(project: Project) -> Iterator[subprocess.Popen[str]]:
    process = spawn(project)
    wait_event(project, "started", where=lambda e: e["pid"] == process.pid)
    yield process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        finish(process)
    terminate(process)


SLOW_WRITER = """
import sys, time
data = open(sys.argv[1], "rb").read()
pieces = [data[i * len(data) // 4:(i + 1) * len(data) // 4] for i in range(4)]
with open(sys.argv[2], "wb") as out:
    for piece in pieces:
        out.write(piece)
        out.flush()
        time.sleep(0.5)
"""

REOPENING_WRITER = """
import sys, time
data = open(sys.argv[1], "rb").read()
for i in range(4):
    with open(sys.argv[2], "ab") as out:
        out.write(data[i * len(data) // 4:(i + 1) * len(data) // 4])
    time.sleep(0.4)
"""


def test_cat_cp_and_slow_writers_straight_into_the_outbox_are_all_delivered_whole(
    project: Project, daemon: subprocess.Popen[str], tmp_path: Path
) -> None:
    outbox = project.box("coder", "outbox")
    expected: dict[str, bytes] = {}
    writers = []
    for index in range(40):
        name = handoff_name("coder", ["QA"])
        data = handoff_bytes(name, "coder", "QA", body=f"{index}\n{BODY}")
        source = tmp_path / name
        source.write_bytes(data)
        expected[name] = data
        kind = index % 4
        if kind == 0:
            subprocess.run(f'cat "{source}" > "{outbox / name}"', shell=True, check=True)
        elif kind == 1:
            subprocess.run(["cp", str(source), str(outbox / name)], check=True)
        else:
            program = SLOW_WRITER if kind == 2 else REOPENING_WRITER
            writers.append(subprocess.Popen(
                [sys.executable, "-c", program, str(source), str(outbox / name)]
            ))  # fmt: skip
    for writer in writers:
        assert writer.wait(timeout=30) == 0

    wait_for(lambda: len(inbox(project, "QA")) == len(expected), timeout=30, what="all 40")
    assert sorted(inbox(project, "QA")) == sorted(expected)
    for name, data in expected.items():
        copy = (project.box("QA", "inbox/new") / name).read_bytes()
        assert copy.split(b"\n\n", 1)[1] == data.split(b"\n\n", 1)[1], f"{name} cut short"
    assert not events(project, "failed")
    assert not os.path.exists(project.box("coder", "failed")) or not os.listdir(
        project.box("coder", "failed")
    )


def test_run_once_waits_for_a_file_still_being_written_and_delivers_it_whole(
    project: Project, tmp_path: Path
) -> None:
    name = handoff_name("coder", ["QA"])
    data = handoff_bytes(name, "coder", "QA", body=BODY)
    source = tmp_path / name
    source.write_bytes(data)
    outbox = project.box("coder", "outbox")
    outbox.mkdir(parents=True, exist_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(source), str(outbox / name)])
    wait_for(lambda: (outbox / name).exists(), what="the writer to start")

    code, _, err = finish(spawn(project, "--once"), timeout=60)

    assert writer.wait(timeout=30) == 0
    assert code == 0, err
    assert inbox(project, "QA") == [name]
    copy = (project.box("QA", "inbox/new") / name).read_bytes()
    assert copy.split(b"\n\n", 1)[1] == data.split(b"\n\n", 1)[1]


PICKUP_SAMPLES = 30
PICKUP_P50 = 0.2  # seconds: far above a pass (milliseconds), far below QUIET (1 s)
PICKUP_GIVE_UP = 0.4  # seconds one sample waits before it counts as slow


def arrival_delay(path: Path, started: float) -> float:
    """Seconds from `started` until `path` exists, or PICKUP_GIVE_UP once that passed."""
    while not path.exists():
        if time.perf_counter() - started > PICKUP_GIVE_UP:
            return PICKUP_GIVE_UP
        time.sleep(0.001)
    return time.perf_counter() - started


def test_a_plain_write_then_rename_is_taken_in_milliseconds_not_after_the_quiet_time(
    project: Project, daemon: subprocess.Popen[str]
) -> None:
    """docs/protocol.md §3's writer with nothing more: a plain write in outbox/tmp/ (no
    fsync, no stat), then os.replace into outbox/.  Within one clock tick of the write the
    rename leaves ctime equal to mtime, so times alone cannot tell it from a file written
    in place; the rename event does."""
    outbox, new = project.box("coder", "outbox"), project.box("QA", "inbox/new")
    drafts = outbox / "tmp"
    drafts.mkdir(parents=True, exist_ok=True)
    delays: list[float] = []
    for _ in range(PICKUP_SAMPLES):
        name = handoff_name("coder", ["QA"])
        temp = drafts / f".{name}.tmp"
        with open(temp, "wb") as file:
            file.write(handoff_bytes(name, "coder", "QA"))
        started = time.perf_counter()
        os.replace(temp, outbox / name)
        delays.append(arrival_delay(new / name, started))
        if sum(d >= PICKUP_GIVE_UP for d in delays) > PICKUP_SAMPLES // 2:
            break  # the median is lost already: fail now, not 30 quiet times later
    assert statistics.median(delays) < PICKUP_P50, sorted(delays)
    wait_for(lambda: len(inbox(project, "QA")) == len(delays), timeout=10, what="every sample")
    assert not events(project, "failed")
