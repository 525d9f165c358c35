"""The swarm's numbers (docs/protocol.md §19): `handoffd metrics`, `/metrics` and `handoffd
stats` from the same files, read back with prometheus-client's parser and `promtool`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from handoffd.numbers import facts, stamps
from handoffd.snapshot import history
from tests.conftest import Project
from tests.numbers_support import HOUR, OPERATOR, families, lay, log, read, total, value, worked
from tests.web_support import KEY, serving

ALLOWED_LABELS = {"role", "pool", "sender", "harness", "via", "result", "state", "le"}
FAMILIES = {
    "handoffd_up": "gauge", "handoffd_cards": "gauge",
    "handoffd_oldest_waiting_seconds": "gauge", "handoffd_stalled": "gauge",
    "handoffd_busy": "gauge", "handoffd_delivered": "counter", "handoffd_refused": "counter",
    "handoffd_taken": "counter", "handoffd_completed": "counter",
    "handoffd_reopened": "counter", "handoffd_wakeups": "counter",
    "handoffd_reclaimed": "counter", "handoffd_tokens": "counter",
    "handoffd_pickup_seconds": "histogram", "handoffd_wait_seconds": "histogram",
    "handoffd_work_seconds": "histogram",
}  # fmt: skip
COUNTERS = ("handoffd_delivered_total", "handoffd_taken_total", "handoffd_completed_total",
            "handoffd_reopened_total", "handoffd_refused_total", "handoffd_wakeups_total",
            "handoffd_wait_seconds_count", "handoffd_work_seconds_count",
            "handoffd_pickup_seconds_count")  # fmt: skip


def get(url: str) -> tuple[int, str, str]:
    """A GET: its status, content type and text."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.status, answer.headers["Content-Type"], answer.read().decode()


def metrics(project: Project) -> str:
    done = project.run("handoffd", "metrics", "--root", str(project.root), role=None,
                       cwd=project.root)  # fmt: skip
    assert done.code == 0, done.err
    return done.out


def stats(project: Project, *args: str) -> dict[str, object]:
    done = project.run("handoffd", "stats", "--json", "--root", str(project.root), *args,
                       role=None, cwd=project.root)  # fmt: skip
    assert done.code == 0, done.err
    found: dict[str, object] = json.loads(done.out)
    return found


def counters(text: str) -> dict[str, float]:
    """Each counter's samples summed over their labels."""
    samples = read(text)
    return {name: total(samples, name) for name in COUNTERS}


def test_every_family_is_named_typed_and_labelled_as_the_contract_says(
    project: Project,
) -> None:
    worked(project, time.time())
    text = metrics(project)
    assert families(text) == FAMILIES
    for name in FAMILIES:
        stem = name if FAMILIES[name] != "counter" else name + "_total"
        assert f"# HELP {stem} " in text and f"# TYPE {stem} {FAMILIES[name]}\n" in text
    for _, labels in read(text):
        assert {key for key, _ in labels} <= ALLOWED_LABELS
        for _, given in labels:  # never a card, an id or a file name
            assert "@" not in given and ".handoff" not in given and "_from_" not in given
    buckets = {dict(ls)["le"] for n, ls in read(text) if n == "handoffd_wait_seconds_bucket"}
    assert buckets == {"1", "5", "15", "30", "60", "120", "300", "600", "1800", "3600", "7200",
                       "14400", "+Inf"}  # fmt: skip
    pickup = {dict(ls)["le"] for n, ls in read(text) if n == "handoffd_pickup_seconds_bucket"}
    assert len(pickup) == 14 and "0.0025" in pickup and "10" in pickup


def test_the_counts_are_the_known_work(project: Project) -> None:
    expected = worked(project, time.time())
    samples = read(metrics(project))
    assert total(samples, "handoffd_delivered_total") == expected["delivered"]
    assert value(samples, "handoffd_delivered_total", role="cleaner") == 5
    assert total(samples, "handoffd_taken_total") == expected["taken"]
    assert total(samples, "handoffd_completed_total") == expected["completed"]
    assert value(samples, "handoffd_refused_total", sender="coder") == expected["refused"]
    assert total(samples, "handoffd_wakeups_total") == expected["wakeups"]
    assert value(samples, "handoffd_wakeups_total", role="cleaner", via="typed",
                 result="forced") == 1  # fmt: skip
    assert value(samples, "handoffd_wakeups_total", role="cleaner", via="typed",
                 result="failed") == 1  # fmt: skip
    assert value(samples, "handoffd_cards", role="QA", state="waiting") == 1
    assert value(samples, "handoffd_cards", role="QA", state="in_process") == 1
    assert value(samples, "handoffd_cards", role="coder", state="blocked") == 1
    assert 115 <= value(samples, "handoffd_oldest_waiting_seconds", role="QA") < 200
    assert value(samples, "handoffd_work_seconds_count", role="cleaner") == 5
    assert value(samples, "handoffd_work_seconds_sum", role="cleaner") == pytest.approx(3000)
    assert value(samples, "handoffd_wait_seconds_bucket", role="cleaner", le="60") == 5
    assert value(samples, "handoffd_wait_seconds_bucket", role="cleaner", le="30") == 0
    assert value(samples, "handoffd_pickup_seconds_bucket", le="0.005") == 9
    assert value(samples, "handoffd_pickup_seconds_bucket", le="0.0025") == 0
    assert value(samples, "handoffd_up") == 0


def test_the_command_the_board_and_stats_agree_on_the_same_files(project: Project) -> None:
    worked(project, time.time())
    text = metrics(project)
    with serving(project.root, key=KEY) as url:  # open without the key, as reads are
        code, kind, served = get(url + "/metrics")
    assert code == 200
    assert kind == "text/plain; version=0.0.4; charset=utf-8"
    assert counters(served) == counters(text)
    moving = "handoffd_oldest_waiting_seconds"  # a gauge of the clock, not of the files
    assert {k: v for k, v in read(served).items() if k[0] != moving} == {
        k: v for k, v in read(text).items() if k[0] != moving
    }
    shown = stats(project, "--since", "520w")
    assert isinstance(shown["total"], dict)
    samples = read(text)
    for kind in ("delivered", "taken", "completed", "reopened"):
        assert shown["total"][kind] == total(samples, f"handoffd_{kind}_total")
    assert shown["total"]["refused"] == total(samples, "handoffd_refused_total")
    rows = {row["role"]: row for row in shown["roles"]}  # type: ignore[attr-defined]
    assert rows["cleaner"]["completed"] == 5 and rows["cleaner"]["work_p50_s"] == 600


def test_promtool_passes_on_the_output(project: Project) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package brings it)")
    worked(project, time.time())
    checked = subprocess.run([promtool, "check", "metrics"], input=metrics(project).encode(),
                             capture_output=True, timeout=30, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_stats_shows_each_role_the_operator_and_a_total_over_the_window(
    project: Project,
) -> None:
    now = time.time()
    worked(project, now)
    lay(
        project,
        "QA",
        "operator",
        "completed",
        now - 2 * HOUR,
        now - 2 * HOUR,
        now - 2 * HOUR + 5,
        folder=project.root / OPERATOR,
    )  # what the operator acknowledged
    shown = project.run("handoffd", "stats", "--root", str(project.root), role=None,
                        cwd=project.root)  # fmt: skip
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == "over the last 24h"
    assert lines[1].split()[:3] == ["ROLE", "DELIVERED", "TAKEN"]
    assert [line.split()[0] for line in lines[2:]] == ["coder", "cleaner", "QA", "operator",
                                                       "total"]  # fmt: skip
    assert "not reported" in lines[2]
    hour = stats(project, "--since", "90m")
    assert hour["total"]["completed"] == 2  # type: ignore[index]  # cleaner's at -1h, QA's
    assert stats(project, "--role", "operator")["roles"] == [
        {"role": "operator", "delivered": 1, "taken": 1, "completed": 1, "reopened": 0,
         "refused": 0, "wait_p50_s": 0.0, "wait_p90_s": 0.0, "work_p50_s": 5.0,
         "work_p90_s": 5.0, "tokens": None}]  # fmt: skip
    bad = project.run("handoffd", "stats", "--since", "yesterday", "--root", str(project.root),
                      role=None, cwd=project.root)  # fmt: skip
    assert bad.code == 2 and bad.err.startswith("INVALID_SPAN: 'yesterday'")
    unknown = project.run("handoffd", "stats", "--role", "nobody", "--root", str(project.root),
                          role=None, cwd=project.root)  # fmt: skip
    assert unknown.code != 0 and "nobody" in unknown.err


def test_counters_never_go_down_as_work_is_taken_done_reopened_and_released(
    project: Project,
) -> None:
    seen: list[dict[str, float]] = []

    def step() -> None:
        seen.append(counters(metrics(project)))
        if len(seen) > 1:
            for name, was in seen[-2].items():
                assert seen[-1][name] >= was, (name, seen[-2], seen[-1])

    for _ in range(3):
        queued = project.run("swarm_handoff", str(project.draft(project.note_draft("QA"))),
                             role="coder")  # fmt: skip
        assert queued.code == 0, queued.err
    assert project.run("handoffd", "run", "--once", str(project.root), role=None,
                       cwd=project.root).code == 0  # fmt: skip
    step()
    for _ in range(2):
        assert project.run("ready_for_next", role="QA").code == 0
        step()
        assert project.run("done_with_current", role="QA").out.startswith("COMPLETED: ")
        step()
    assert project.run("ready_for_next", role="QA").code == 0
    assert project.run("handoffd", "release", "--role", "QA", "--root", str(project.root),
                       role=None, cwd=project.root).code == 0  # fmt: skip
    step()
    done = sorted((project.box("QA", "inbox/completed")).iterdir())
    card = f"{done[0].name.split('_to_')[0].split('_', 1)[1]}@QA"
    for _ in range(2):  # reopened twice: each take and completion it undid stays counted
        again = project.run("handoffd", "reopen", card, "--root", str(project.root), role=None,
                            cwd=project.root)  # fmt: skip
        assert again.code == 0, again.err
        step()
        for _ in range(3):  # take and finish until that copy is done again
            project.run("ready_for_next", role="QA")
            step()
            project.run("done_with_current", role="QA")
            step()
    last = seen[-1]
    assert last["handoffd_reopened_total"] == 2
    assert last["handoffd_completed_total"] == 3 + 2  # three copies, two done twice more
    assert last["handoffd_delivered_total"] == 3


def test_a_daemon_restart_a_deleted_or_torn_index_change_no_number(project: Project) -> None:
    now = time.time()
    worked(project, now)
    before = counters(metrics(project))
    cache = project.handoffs("cleaner") / history.INDEX / stamps.CACHE
    assert cache.is_file()  # the first read kept the stamps
    assert project.run("handoffd", "run", "--once", str(project.root), role=None,
                       cwd=project.root).code == 0  # fmt: skip
    assert counters(metrics(project)) == before
    cache.unlink()
    assert counters(metrics(project)) == before
    with open(cache, "ab") as file:  # torn mid-line, a foreign line, bytes not UTF-8
        file.write(b"not\tone\tof\tours\n\xff\xfe\tx\n" + b"completed/half")
    assert counters(metrics(project)) == before
    lines = cache.read_bytes().split(b"\n")
    forged = lines[0].split(b"\t")  # a line of a file that is not there
    forged[0] = b"99_20260101T000000Z_999999_from_coder_to_cleaner.handoff"
    forged[9] = b"5000"  # reopened 5,000 times
    cache.write_bytes(b"\t".join(forged) + b"\n" + cache.read_bytes())
    assert counters(metrics(project)) == before


@pytest.mark.parametrize("what", ["fifo", "link", "folder"])
def test_a_hostile_index_is_never_followed_or_waited_on(
    project: Project, tmp_path: Path, what: str
) -> None:
    worked(project, time.time())
    before = counters(metrics(project))
    cache = project.handoffs("cleaner") / history.INDEX / stamps.CACHE
    cache.unlink()
    outside = tmp_path / "outside"
    outside.write_text("keep\n")
    if what == "fifo":
        os.mkfifo(cache)
    elif what == "link":
        cache.symlink_to(outside)
    else:
        cache.mkdir()
    assert counters(metrics(project)) == before
    assert outside.read_text() == "keep\n"


def test_a_torn_log_line_or_a_foreign_one_counts_nothing_and_fails_nothing(
    project: Project,
) -> None:
    worked(project, time.time())
    before = counters(metrics(project))
    path = project.root / ".swarmforge" / "daemon" / "handoffd.log"
    with open(path, "ab") as file:
        file.write(b'{"timestamp": "2026-01-01T00:00:00Z", "event": "failed", "sender": "co')
        file.write(b"\n\xff\xfe not json\n[1, 2]\n" + b"{" * 100_000 + b"\n")
        file.write(b'{"event": "failed", "sender": "$(rm -rf)", "timestamp": "x"}\n')
        file.write(b'{"event": "wake", "role": {"a": 1}, "submitted": true}\n')
    assert counters(metrics(project)) == before
    log(project, {"event": "failed", "file": "z.handoff", "sender": "QA", "reason": "bad"})
    assert counters(metrics(project))["handoffd_refused_total"] == before[
        "handoffd_refused_total"] + 1  # fmt: skip
    with open(path, "ab") as file:  # a line still being written counts once it is whole
        file.write(b'{"timestamp": "2026-01-01T00:00:00Z", "event": "failed", "sender": "QA"}')
    assert counters(metrics(project))["handoffd_refused_total"] == before[
        "handoffd_refused_total"] + 1  # fmt: skip
    with open(path, "ab") as file:
        file.write(b"\n")
    assert counters(metrics(project))["handoffd_refused_total"] == before[
        "handoffd_refused_total"] + 2  # fmt: skip


def test_a_file_vanishing_mid_scan_is_left_out_without_an_error(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    worked(project, now)
    stamps_cache = project.handoffs("cleaner") / history.INDEX / stamps.CACHE
    if stamps_cache.exists():
        stamps_cache.unlink()
    gone = lay(project, "coder", "cleaner", "completed", now - 60, now - 50, now - 40)
    real = stamps.hf.read_headers

    def vanishing(path: str) -> dict[str, str]:
        if path == str(gone):
            os.unlink(path)  # taken out of history between the listing and the read
        return real(path)

    monkeypatch.setattr(stamps.hf, "read_headers", vanishing)
    found = facts.gather(str(project.root))
    assert sum(1 for c in found.copies() if c.role == "cleaner") == 5
    (project.handoffs("cleaner") / "inbox" / "completed" / "x.handoff").symlink_to("/dev/zero")
    found = facts.gather(str(project.root))
    assert sum(1 for c in found.copies() if c.role == "cleaner") == 5


def test_the_operators_mailbox_counts_as_role_operator_where_it_exists(
    project: Project,
) -> None:
    now = time.time()
    assert 'role="operator"' not in metrics(project)
    lay(project, "QA", "operator", "new", now - 30, folder=project.root / OPERATOR)
    samples = read(metrics(project))
    assert value(samples, "handoffd_cards", role="operator", state="waiting") == 1
    assert value(samples, "handoffd_delivered_total", role="operator") == 1
    assert 25 <= value(samples, "handoffd_oldest_waiting_seconds", role="operator") < 100


def test_the_numbers_page_shows_the_table_and_a_chart_per_role(project: Project) -> None:
    worked(project, time.time())
    with serving(project.root) as url:
        code, _, html = get(url + "/numbers")
    assert code == 200
    assert "<script" not in html.split("</header>", 1)[1]  # the charts need no script
    assert html.count('data-charts="') == 3
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == 9
    assert '<tr data-role="cleaner">' in html and '<td data-count="completed">5</td>' in html
    assert html.count('data-kind="completed"') == 3
    cleaner = html.split('data-charts="cleaner"', 1)[1].split('data-charts="QA"', 1)[0]
    bars = cleaner.split('data-kind="wait"', 1)[0].count('data-hour="')
    assert bars == 24  # every hour drawn, five with one completion each
    assert cleaner.split('data-kind="wait"', 1)[0].count('data-value="1"') == 5


def test_tokens_from_the_usage_records_are_in_metrics_and_stats_a_pools_together(
    tmp_path: Path,
) -> None:
    """§19's token families from `H/usage.jsonl` (the board's one tally): per role, harness
    and kind in `/metrics`, and in `stats` a pool's members' tokens together."""
    from handoffd.core import usage
    from handoffd.core.tokens import Spend
    from testbed.project import make_pool_project

    project = make_pool_project(tmp_path / "p")
    now = time.time()
    for member, counts in (("cleaner-1", (100, 20, 300, 4)), ("cleaner-2", (50, 10, 0, 0))):
        project.handoffs(member).mkdir(parents=True, exist_ok=True)  # as a member's first turn
        usage.append(str(project.handoffs(member)), Spend(now - 60, None, "claude", counts), now)
    samples = read(metrics(project))
    assert value(samples, "handoffd_tokens_total", role="cleaner-1", harness="claude",
                 kind="cache_read") == 300  # fmt: skip
    assert value(samples, "handoffd_tokens_total", role="cleaner-2", harness="claude",
                 kind="input") == 50  # fmt: skip
    shown = stats(project)
    rows = {row["role"]: row for row in shown["roles"]}  # type: ignore[attr-defined]
    assert rows["cleaner-1"]["tokens"]["output"] == 20
    assert rows["cleaner"]["tokens"]["input"] == 150  # the pool: its members together
    assert shown["total"]["tokens"]["input"] == 150  # type: ignore[index]  # each member once
