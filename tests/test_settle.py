"""A file written straight into an outbox is taken only once whole (docs/protocol.md §5):
the pure rule, the kernel's answer to "is it open for writing", and real writers (`cat >`,
`cp`, a program writing in slow pieces) racing a running daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd import settle
from tests.conftest import Project, wait_for
from tests.daemon_support import (
    events,
    finish,
    handoff_bytes,
    handoff_name,
    inbox,
    open_daemon,
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
