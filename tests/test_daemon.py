"""The daemon (docs/protocol.md §5-6): its passes stepped with a fake clock, and the real
`handoffd run` process with its events, signals, stop file, log and readiness notices."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from handoffd.core import config
from handoffd.daemon.audit import audit
from handoffd.delivery import journal
from tests.conftest import SAID, Project, plant, wait_for
from tests.daemon_support import (
    RecordingWaker,
    Tmux,
    add_role,
    events,
    finish,
    handoffd,
    inbox,
    log_path,
    open_daemon,
    pid_file,
    queue,
    read_log,
    rewrite_roles,
    spawn,
    terminate,
    tmux_server,
    use_socket,
    wait_event,
)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


# --- stepping with a fake clock -------------------------------------------------------


def woken(daemon: object) -> list[str]:
    waker = daemon.waker  # type: ignore[attr-defined]
    assert isinstance(waker, RecordingWaker)
    return waker.woken()


def renotify_times(daemon: object, role: str, start: float, until: float) -> list[float]:
    """Step once a second from `start` to `until`; the times `role` was asked to wake."""
    times = []
    now = start
    while now <= until:
        before = woken(daemon).count(role)
        daemon.step(now)  # type: ignore[attr-defined]
        if woken(daemon).count(role) > before:
            times.append(now)
        now += 1.0
    return times


def take(project: Project, role: str) -> Path:
    """What ready_for_next does to the first waiting file: new/ → in_process/."""
    name = inbox(project, role)[0]
    target = project.box(role, "inbox/in_process") / name
    os.rename(project.box(role, "inbox/new") / name, target)
    return target


def test_an_idle_role_with_mail_is_woken_again_after_the_interval_doubling(
    project: Project,
) -> None:
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, renotify_after=10)

    assert renotify_times(daemon, "QA", 0, 80) == [0, 10, 30, 70]  # delivery, then re-notify
    assert [e["role"] for e in events(project, "renotify")] == ["QA"] * 3


class HeldWaker(RecordingWaker):
    """A waker whose wake-ups for `waits_for` wait for a pane that has not gone idle yet."""

    def __init__(self, waits_for: str) -> None:
        super().__init__()
        self.waits_for = waits_for

    def waiting(self, role: str) -> bool:
        return role == self.waits_for


class TextHeldWaker(HeldWaker):
    """A waker whose wake-up for `waits_for` waits behind a person's text in its box."""

    def held(self, role: str) -> bool:
        return role == self.waits_for


def test_no_renotify_while_the_roles_wake_up_still_waits_for_an_idle_pane(
    project: Project,
) -> None:
    """A re-notify repeats a wake-up the role had and did not answer: one not typed yet
    (its pane busy, or not yet quiet for --idle-after) is not repeated, nor counted as a
    re-notify; the interval runs from when it stops waiting."""
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, renotify_after=10)
    daemon.waker = HeldWaker("QA")  # type: ignore[assignment]
    assert renotify_times(daemon, "QA", 0, 60) == [0]  # the delivery's own wake-up
    assert events(project, "renotify") == []
    daemon.waker.waits_for = ""  # typed now: the role has had it, and re-notify runs again
    times = renotify_times(daemon, "QA", 61, 90)
    assert times and 70 <= times[0] <= 71 + daemon.rescan_every, times


def test_a_wake_up_held_behind_a_persons_text_is_asked_for_again_at_each_re_notify_due(
    project: Project,
) -> None:
    """docs/protocol.md §17: a wake-up waiting behind a person's text may wait for good, so
    re-notify goes on (the waker counts each as one more attempt that waits, typing
    nothing), on its doubling schedule, as for a line typed and not answered."""
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, renotify_after=10)
    daemon.waker = TextHeldWaker("QA")  # type: ignore[assignment]
    times = renotify_times(daemon, "QA", 0, 80)
    assert len(times) == 4 and times[0] == 0, times  # the delivery's, then 10, 20 and 40 s on
    assert [later - earlier for earlier, later in itertools.pairwise(times[1:])] == [20, 40]
    assert len(events(project, "renotify")) == 3


def test_a_busy_role_is_not_woken_again_though_mail_waits(project: Project) -> None:
    queue(project, "coder", ["QA"])
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, renotify_after=10)
    daemon.step(0)
    take(project, "QA")

    assert renotify_times(daemon, "QA", 1, 100) == []


def test_the_renotify_interval_resets_when_the_role_takes_work(project: Project) -> None:
    queue(project, "coder", ["QA"])
    daemon = open_daemon(project, renotify_after=10)
    assert renotify_times(daemon, "QA", 0, 40) == [0, 10, 30]  # next one would be at 70

    taken = take(project, "QA")
    assert renotify_times(daemon, "QA", 41, 50) == []
    os.rename(taken, project.box("QA", "inbox/completed") / taken.name)
    queue(project, "coder", ["QA"])  # new mail: a regular wake-up, then 10 s again

    regular, again = renotify_times(daemon, "QA", 51, 75)
    assert regular == 51 and 61 <= again <= 61 + daemon.rescan_every  # checked on rescans


def test_a_role_without_mail_is_never_woken(project: Project) -> None:
    daemon = open_daemon(project, renotify_after=10)
    assert renotify_times(daemon, "QA", 0, 100) == []


def test_a_role_with_only_blocked_mail_is_not_woken_again_until_ready_mail_comes(
    project: Project,
) -> None:
    queue(project, "coder", ["QA"], blocked_reason="needs the staging password")
    daemon = open_daemon(project, renotify_after=10)
    assert renotify_times(daemon, "QA", 0, 80) == [0]  # the delivery's wake-up alone
    assert events(project, "renotify") == []

    queue(project, "coder", ["QA"])  # ready mail beside it: nagged as ever, when due
    times = renotify_times(daemon, "QA", 81, 100)
    assert times and times[0] <= 81 + 10 + daemon.rescan_every, times


def test_mail_waiting_on_a_dependency_is_woken_again_only_once_the_dependency_is_done(
    project: Project,
) -> None:
    from handoffd.ops.readiness import for_daemon

    first = queue(project, "coder", ["cleaner"])
    daemon = open_daemon(project, renotify_after=10)
    daemon.dependencies = for_daemon  # what `handoffd run` gives it
    daemon.step(0)  # delivered to cleaner, who leaves it in new/
    queue(project, "cleaner", ["QA"], depends_on=first.name.split("_", 1)[1].split("_to_")[0])
    assert renotify_times(daemon, "QA", 1, 80) == [1]  # the delivery's wake-up alone

    done = project.box("cleaner", "inbox/completed") / first.name
    os.rename(project.box("cleaner", "inbox/new") / first.name, done)
    times = renotify_times(daemon, "QA", 81, 100)
    assert times and times[0] <= 81 + 10 + daemon.rescan_every, times


def test_a_readiness_check_that_fails_costs_a_wake_up_too_many_never_the_pass(
    project: Project,
) -> None:
    """The board behind the dependency check reads untrusted files: whatever it raises is
    logged and the mail counts as ready; the pass still delivers what came meanwhile."""

    def broken(root: str, roles: object) -> object:
        raise ValueError("a header nobody expected")

    queue(project, "coder", ["QA"], depends_on="20260101T000000Z_000009_from_coder")
    daemon = open_daemon(project, renotify_after=10)
    daemon.dependencies = broken  # type: ignore[assignment]
    daemon.step(0)
    later = queue(project, "coder", ["cleaner"])
    times = renotify_times(daemon, "QA", 1, 20)
    assert times and times[0] <= 1 + 10 + daemon.rescan_every, times
    assert (project.box("cleaner", "inbox/new") / later.name).exists()
    [failed] = events(project, "readiness_failed")[:1]
    assert failed["error"] == "ValueError: a header nobody expected"


def test_a_copy_redelivered_on_restart_gets_no_wake_up_until_the_renotify_interval(
    project: Project,
) -> None:
    path = queue(project, "coder", ["QA"])
    crashed = open_daemon(project)
    # The first daemon stages the copy and commits its journal, then dies before publishing.
    courier, roles = crashed.courier, crashed.roles.get()[0]
    entries = [courier._stage(sender, p, roles, 0.0) for sender, p in courier._ready(roles, 0.0)]
    assert entries and all(entries) and courier._commit(entries, 0.0)  # type: ignore[arg-type]
    assert inbox(project, "QA") == [] and path.exists()

    daemon = open_daemon(project, renotify_after=10)  # the restart recovers the journal

    assert inbox(project, "QA") == [path.name] and not path.exists()
    assert [e["files"] for e in events(project, "recovered")] == [[path.name]]
    assert renotify_times(daemon, "QA", 0, 9) == []
    assert renotify_times(daemon, "QA", 10, 10) == [10]  # waiting mail is still noticed


def test_a_pass_delivers_more_than_one_batch_over_successive_steps(project: Project) -> None:
    from handoffd.delivery.delivery import BATCH_LIMIT

    for _ in range(BATCH_LIMIT + 5):
        queue(project, "coder", ["QA"])
    daemon = open_daemon(project)

    daemon.step(0)
    assert len(inbox(project, "QA")) == BATCH_LIMIT and daemon.courier.backlog
    daemon.step(0.1)
    assert len(inbox(project, "QA")) == BATCH_LIMIT + 5 and not daemon.courier.backlog


def test_roles_tsv_changes_apply_on_the_next_pass(project: Project, tmp_path: Path) -> None:
    daemon = open_daemon(project)
    daemon.step(0)
    extra = tmp_path / "extra"
    extra.mkdir()
    add_role(project, "extra", extra)
    path = queue(project, "extra", ["QA"])

    daemon.step(0.1)

    assert inbox(project, "QA") == [path.name]
    assert events(project, "config_loaded")[-1]["roles"] == ["QA", "cleaner", "coder", "extra"]


def test_a_broken_roles_tsv_is_logged_and_the_last_good_roles_keep_working(
    project: Project,
) -> None:
    daemon = open_daemon(project)
    good = (project.root / config.ROLES_FILE).read_text()
    rewrite_roles(project, good + "broken\tline\n")
    path = queue(project, "coder", ["QA"])

    daemon.step(0)

    assert inbox(project, "QA") == [path.name]
    [error] = events(project, "config_error")
    assert "roles.tsv:5" in error["error"] and error["kept"] == ["QA", "cleaner", "coder"]
    daemon.step(1)
    assert len(events(project, "config_error")) == 1  # reported once, not every pass


# --- the real process -----------------------------------------------------------------


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Daemon processes a test spawned; any still running are killed at teardown."""
    spawned: list[subprocess.Popen[str]] = []
    yield spawned
    for process in spawned:
        terminate(process)


def run_daemon(
    project: Project, procs: list[subprocess.Popen[str]], *args: str, **env: str
) -> subprocess.Popen[str]:
    process = spawn(project, *args, env=env)
    procs.append(process)
    wait_event(project, "started", where=lambda e: e["pid"] == process.pid)
    return process


def stop_daemon(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    process.send_signal(signal.SIGTERM)
    return finish(process)


def wait_delivered(project: Project, role: str, name: str, timeout: float = 10.0) -> float:
    """Wait until `name` is in `role`'s new/; the monotonic time it was seen."""
    target = project.box(role, "inbox/new") / name
    wait_for(target.exists, timeout, what=f"{name} in {role}'s inbox")
    return time.monotonic()


def test_a_new_outbox_file_is_picked_up_by_its_event_well_before_the_rescan(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    first = queue(project, "coder", ["QA"])
    process = run_daemon(project, procs)
    # The first pass is a rescan; the next one is due 2 s after it.  A file dropped right
    # after the first pass and picked up within 1 s can only have come through an event.
    rescan = wait_delivered(project, "QA", first.name)
    dropped = time.monotonic()
    second = queue(project, "coder", ["cleaner"])
    seen = wait_delivered(project, "cleaner", second.name, timeout=5)

    assert seen - dropped < 1.0 and seen - rescan < 1.5, (dropped - rescan, seen - dropped)
    assert stop_daemon(process)[0] == 0


def test_a_deleted_and_recreated_outbox_is_watched_again_after_the_next_rescan(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    process = run_daemon(project, procs)
    outbox = project.box("coder", "outbox")
    shutil.rmtree(outbox)
    outbox.mkdir()
    # Found by the next rescan, which also re-arms the watch on the new directory; on a
    # loaded machine the watcher's thread may not have seen the old one go by then, and
    # the rescan after re-arms it instead (a file meanwhile waits for that rescan) ...
    first = queue(project, "coder", ["QA"])
    wait_delivered(project, "QA", first.name, timeout=5)
    second = queue(project, "coder", ["cleaner"])
    rescan = wait_delivered(project, "cleaner", second.name, timeout=5)
    # ... so from then on a file comes through an event, well before the next rescan.
    dropped = time.monotonic()
    third = queue(project, "coder", ["QA"])
    seen = wait_delivered(project, "QA", third.name, timeout=5)

    assert seen - dropped < 1.0, (dropped - rescan, seen - dropped)
    assert stop_daemon(process)[0] == 0


def test_a_role_added_to_roles_tsv_is_delivered_without_a_restart(
    project: Project, procs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    process = run_daemon(project, procs)
    extra = tmp_path / "extra"
    extra.mkdir()
    add_role(project, "extra", extra)
    wait_event(project, "config_loaded", where=lambda e: "extra" in e["roles"])
    outgoing = queue(project, "extra", ["QA"])
    incoming = queue(project, "coder", ["extra"])

    wait_delivered(project, "QA", outgoing.name)
    wait_delivered(project, "extra", incoming.name)
    assert stop_daemon(process)[0] == 0


def test_a_role_appended_in_place_and_sent_to_at_once_gets_its_first_mail(
    project: Project, procs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    """`echo >> roles.tsv`, then a handoff to the new role before the daemon re-read the
    file: it reads it again rather than refuse the recipient as unknown."""
    process = run_daemon(project, procs)
    newbie = tmp_path / "newbie"
    newbie.mkdir()
    with open(project.root / ".swarmforge" / "roles.tsv", "a", encoding="utf-8") as file:
        file.write(f"newbie\tnewbie\t{newbie}\tnewbie\n")
    project.worktrees["newbie"] = newbie
    incoming = queue(project, "coder", ["newbie"])

    wait_delivered(project, "newbie", incoming.name)
    assert not events(project, "failed")
    assert stop_daemon(process)[0] == 0


def test_a_sender_whose_sent_is_a_plain_file_stops_no_one_elses_mail(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    """coder's sent/ replaced by a plain file: its handoff reaches QA once and waits in
    its outbox, while cleaner and QA keep exchanging mail through a running daemon."""
    sent = project.box("coder", "sent")
    shutil.rmtree(sent, ignore_errors=True)
    sent.parent.mkdir(parents=True, exist_ok=True)
    sent.write_text("in the way\n")
    stuck = queue(project, "coder", ["QA"])
    process = run_daemon(project, procs)
    wait_event(project, "publish_stuck", where=lambda e: e["file"] == stuck.name)

    for _ in range(5):
        there = queue(project, "cleaner", ["QA"])
        back = queue(project, "QA", ["cleaner"])
        wait_delivered(project, "QA", there.name)
        wait_delivered(project, "cleaner", back.name)

    assert inbox(project, "QA").count(stuck.name) == 1 and stuck.exists()
    assert [e["file"] for e in events(project, "delivered")].count(stuck.name) == 1
    assert stop_daemon(process)[0] == 0


def test_a_broken_roles_tsv_never_stops_the_running_daemon(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    process = run_daemon(project, procs)
    good = (project.root / config.ROLES_FILE).read_text()
    rewrite_roles(project, good + "two\tcolumns\n")
    wait_event(project, "config_error")
    path = queue(project, "coder", ["cleaner", "QA"])

    wait_delivered(project, "cleaner", path.name)
    wait_delivered(project, "QA", path.name)
    assert process.poll() is None
    loaded = len(events(project, "config_loaded"))
    rewrite_roles(project, good)  # fixed: picked up again
    wait_for(lambda: len(events(project, "config_loaded")) > loaded, what="config reloaded")
    assert stop_daemon(process)[0] == 0


@pytest.mark.parametrize("what", ["fifo", "link"])
def test_a_roles_tsv_swapped_for_a_fifo_or_a_link_is_logged_and_the_last_good_roles_serve(
    project: Project, procs: list[subprocess.Popen[str]], tmp_path: Path, what: str
) -> None:
    """Never waited on nor followed (docs/protocol.md Part II): the daemon says what it
    found, once, and goes on delivering with the roles it had."""
    process = run_daemon(project, procs)
    swap = project.root / ".swarmforge" / ".roles.tsv.swap"
    plant(swap, what, tmp_path)
    os.rename(swap, project.root / config.ROLES_FILE)
    error = wait_event(project, "config_error")
    assert f"{SAID[what]}, not a regular file" in error["error"]
    assert error["kept"] == ["QA", "cleaner", "coder"]
    path = queue(project, "coder", ["QA"])
    wait_delivered(project, "QA", path.name)
    assert stop_daemon(process)[0] == 0
    assert len(events(project, "config_error")) == 1


def test_sigterm_in_the_middle_of_a_backlog_exits_0_and_leaves_a_consistent_queue(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    for _ in range(300):
        queue(project, "coder", ["cleaner", "QA"])
    process = spawn(project)
    procs.append(process)
    wait_event(project, "started")

    code, _, err = stop_daemon(process)

    assert code == 0, err
    assert not pid_file(project).exists()
    assert events(project, "stopped")
    roles = config.load_roles(str(project.root))
    report = audit(str(project.root), roles)
    assert report.ok, report.problems  # consistent at rest, whatever was left undelivered
    once = handoffd("run", "--once", str(project.root), timeout=60)
    assert once.returncode == 0, once.stderr
    report = audit(str(project.root), roles)
    assert report.ok, report.problems
    assert report.count("sent") == 300
    assert len(inbox(project, "cleaner")) == len(inbox(project, "QA")) == 300


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_sigterm_or_sigint_stops_an_idle_daemon_with_exit_0(
    project: Project, procs: list[subprocess.Popen[str]], signum: int
) -> None:
    process = run_daemon(project, procs)
    process.send_signal(signum)

    code, _, err = finish(process, timeout=10)

    assert code == 0, err
    assert not pid_file(project).exists()
    assert read_log(project)[-1]["event"] == "stopped"


def test_renotify_after_on_the_command_line_sets_the_interval(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    queue(project, "coder", ["QA"])
    run_daemon(project, procs, "--renotify-after", "0.2")

    first = wait_event(project, "renotify", timeout=5, where=lambda e: e["role"] == "QA")
    second = wait_event(
        project, "renotify", timeout=5, where=lambda e: e["timestamp"] > first["timestamp"]
    )

    gap = datetime.fromisoformat(second["timestamp"]) - datetime.fromisoformat(first["timestamp"])
    assert 0.3 < gap.total_seconds() < 2.0  # the second interval is doubled: 0.4 s


def test_the_stop_file_stops_a_running_daemon_with_exit_0(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    process = run_daemon(project, procs)
    (project.root / ".swarmforge" / "daemon" / "stop").touch()

    code, _, err = finish(process, timeout=10)

    assert code == 0, err
    assert not pid_file(project).exists()
    assert not (project.root / ".swarmforge" / "daemon" / "stop").exists()
    assert read_log(project)[-1]["event"] == "stopped"


def test_a_stop_file_left_from_before_does_not_stop_a_new_daemon(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    stop_file = project.root / ".swarmforge" / "daemon" / "stop"
    stop_file.parent.mkdir(parents=True)
    stop_file.touch()
    process = run_daemon(project, procs)
    path = queue(project, "coder", ["QA"])

    wait_delivered(project, "QA", path.name)
    assert process.poll() is None
    assert stop_daemon(process)[0] == 0


def test_a_directory_named_stop_stops_the_daemon_too(project: Project) -> None:
    """Whatever `daemon/stop` is, it is taken away and honoured, never a pass that fails
    forever on removing it."""
    daemon = open_daemon(project)
    stop = project.root / ".swarmforge" / "daemon" / "stop"
    (stop / "inside").mkdir(parents=True)

    daemon.step(0)

    assert daemon.stopping and not stop.exists()
    assert events(project, "pass_failed") == []


def test_run_once_delivers_everything_queued_then_exits_0(project: Project) -> None:
    for _ in range(300):
        queue(project, "coder", ["QA"])
    process = spawn(project, "--once")

    code, _, err = finish(process, timeout=60)

    assert code == 0, err
    assert len(inbox(project, "QA")) == 300
    assert [n for n in os.listdir(project.box("coder", "outbox")) if n != "tmp"] == []
    assert not pid_file(project).exists()


def test_the_log_is_json_lines_with_every_event_and_its_fields(
    project: Project, tmux: Tmux, tmp_path: Path
) -> None:
    tmux.session("QA")  # cleaner has no session: its wake-up fails
    use_socket(project, tmux.socket)
    add_role(project, "ghost", tmp_path / "nowhere")
    good = queue(project, "coder", ["QA", "cleaner"])
    bad = queue(project, "coder", ["QA"], data=b"not a handoff\n")
    later = queue(project, "coder", ["ghost"])  # its worktree is missing: deferred

    code, _, err = finish(spawn(project, "--once"), timeout=30)

    assert code == 0, err
    lines = log_path(project).read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    for entry in entries:
        stamp = entry["timestamp"]
        assert datetime.fromisoformat(stamp.replace("Z", "+00:00")).utcoffset() is not None
        assert isinstance(entry["event"], str)
    by_event: dict[str, list[dict[str, object]]] = {}
    for entry in entries:
        by_event.setdefault(entry["event"], []).append(entry)
    order = [entry["event"] for entry in entries]
    assert order.index("started") < order.index("delivered") and order[-1] == "stopped"
    assert by_event["started"][0]["pid"] == by_event["stopped"][0]["pid"]
    [delivered] = by_event["delivered"]
    assert (delivered["file"], delivered["recipients"]) == (good.name, ["QA", "cleaner"])
    [failed] = by_event["failed"]
    assert failed["file"] == bad.name and failed["reason"]
    assert by_event["deferred"][0]["file"] == later.name and by_event["deferred"][0]["reason"]
    assert [e["role"] for e in by_event["wake"]] == ["QA"]
    # coder, whose handoff was refused, is told so; it has no session either
    wakes_failed = sorted(by_event["wake_failed"], key=lambda e: str(e["role"]))
    assert [(e["role"], e["refused"], bool(e["error"])) for e in wakes_failed] == [
        ("cleaner", False, True),
        ("coder", True, True),
    ]
    assert tmux.wakes("QA") == 1


# --- systemd readiness ----------------------------------------------------------------


class NotifySocket:
    """A unix datagram socket standing in for systemd's notify socket."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="hd-", dir="/tmp")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)

    def receive(self, timeout: float = 10.0) -> str:
        self.sock.settimeout(timeout)
        return self.sock.recv(4096).decode()

    def until(self, message: str, timeout: float = 10.0) -> list[str]:
        """Messages received up to and including `message`."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while message not in seen:
            seen.append(self.receive(max(0.01, deadline - time.monotonic())))
        return seen

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def notify_socket() -> Iterator[NotifySocket]:
    sock = NotifySocket()
    yield sock
    sock.close()


def test_run_tells_systemd_ready_after_start_up_and_stopping_on_sigterm(
    project: Project, procs: list[subprocess.Popen[str]], notify_socket: NotifySocket
) -> None:
    process = spawn(project, env={"NOTIFY_SOCKET": notify_socket.path})
    procs.append(process)

    assert notify_socket.receive() == "READY=1"
    assert events(project, "started")  # logged before readiness is announced
    process.send_signal(signal.SIGTERM)
    assert notify_socket.until("STOPPING=1") == ["STOPPING=1"]  # no watchdog pings unasked
    assert finish(process)[0] == 0


def test_run_pings_the_systemd_watchdog_when_asked(
    project: Project, procs: list[subprocess.Popen[str]], notify_socket: NotifySocket
) -> None:
    env = {"NOTIFY_SOCKET": notify_socket.path, "WATCHDOG_USEC": "200000"}  # every 0.1 s
    process = spawn(project, env=env)
    procs.append(process)

    assert notify_socket.receive() == "READY=1"
    pings = [notify_socket.receive(timeout=2) for _ in range(3)]
    assert pings == ["WATCHDOG=1"] * 3
    process.send_signal(signal.SIGTERM)
    assert notify_socket.until("STOPPING=1")[-1] == "STOPPING=1"
    assert finish(process)[0] == 0


def test_a_roles_tsv_being_written_in_place_is_read_only_once_it_stands_still(
    project: Project,
) -> None:
    """A half-written roles.tsv (here: truncated to its first role) must not turn the
    missing roles' mail into failures as 'unknown recipient'."""
    daemon = open_daemon(project)
    daemon.step(0)
    path = project.root / config.ROLES_FILE
    whole = path.read_text()
    with open(path, "r+", encoding="utf-8") as file:  # in place, as `echo >>` or an editor
        file.truncate(whole.index("\n", whole.index("\ncoder") + 1) + 1)
    queued = queue(project, "coder", ["QA"])

    daemon.step(0.1)

    assert inbox(project, "QA") == [queued.name], "the last good roles still deliver"
    assert daemon.roles.settling
    stale = time.time() - 10
    os.utime(path, (stale, stale))  # it stood still: now it is read
    daemon.step(0.2)
    assert events(project, "config_loaded")[-1]["roles"] == ["coder"]


def test_a_corrupt_committed_journal_is_set_aside_and_delivery_goes_on(project: Project) -> None:
    """A journal the disk damaged cannot be replayed; it must not stop every delivery.
    (Damaged: a line of the commit itself is garbled.  A line of another commit is what a
    power cut leaves of an in-place rewrite, which is no commit at all: test_journal.py.)"""
    damaged = '{"token": "0123abcd", "sender": \x00\x00\ncommit 0123abcd\n'
    journal_path = project.root / ".swarmforge" / "daemon" / "handoffd.journal"
    journal_path.parent.mkdir(parents=True)
    journal_path.write_text(damaged)
    daemon = open_daemon(project)  # start-up replays the journal first
    path = queue(project, "coder", ["QA"])

    daemon.step(0)

    assert inbox(project, "QA") == [path.name]
    assert journal.load(str(journal_path)) is None  # the journal in use is a fresh one
    kept = journal_path.parent / "handoffd.journal.corrupt"
    assert kept.read_text() == damaged
    assert [e["kept_as"] for e in events(project, "journal_corrupt")] == [
        "handoffd.journal.corrupt"
    ]


def test_a_pass_that_keeps_failing_backs_off_instead_of_spinning(project: Project) -> None:
    """Each failure is logged and retried later, the wait doubling: the daemon must not burn
    a core retrying a pass that fails at once (e.g. an archive folder made unwritable)."""
    import threading

    daemon = open_daemon(project)
    calls: list[float] = []

    def failing_step(now: float) -> None:
        calls.append(now)
        raise OSError(13, "injected: permission denied")

    daemon.step = failing_step  # type: ignore[method-assign]
    runner = threading.Thread(target=daemon.run)
    runner.start()
    time.sleep(1.5)  # the observation window itself, not a synchronisation
    daemon.request_stop()
    runner.join(timeout=30)

    assert not runner.is_alive()
    assert 1 <= len(calls) <= 3, f"{len(calls)} passes in 1.5 s"
    assert len(events(project, "pass_failed")) == len(calls)


def test_run_and_start_log_their_wake_up_options_on_the_started_line(
    project: Project, procs: list[subprocess.Popen[str]]
) -> None:
    """`status` is another process: it learns --stall-wakes from this line (§14)."""
    process = run_daemon(project, procs, "--idle-after", "0.5", "--idle-wait", "9",
                         "--stall-wakes", "5", "--renotify-after", "7")  # fmt: skip
    [started] = events(project, "started")
    assert (started["idle_after"], started["idle_wait"], started["stall_wakes"],
            started["renotify_after"]) == (0.5, 9.0, 5, 7.0)  # fmt: skip
    assert stop_daemon(process)[0] == 0
    assert handoffd("start", "--stall-wakes", "4", str(project.root)).returncode == 0
    try:
        latest = wait_event(project, "started", where=lambda e: e["stall_wakes"] == 4)
        assert (latest["idle_after"], latest["idle_wait"]) == (2.0, 300.0)  # the defaults
    finally:
        handoffd("stop", str(project.root))
