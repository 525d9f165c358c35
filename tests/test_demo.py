"""`handoffd demo`: scripted agents in a real tmux server, N round trips, an audited summary.

The end-to-end runs keep the round count small; the summary's logic is also tested in
process, on a project at rest whose queue a test breaks on purpose.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from handoffd import cli
from handoffd.core import config, lifecycle, project
from handoffd.core.config import Box
from handoffd.demos import demo, demo_agent
from tests.conftest import git, run_command, wait_for
from tests.swarm_support import (
    BARE_GIT_ENV,
    handoffd,
    processes_touching,
    server_answers,
    sessions,
    take_down,
)

SWARM_UP = re.compile(r"swarm up in (\S+): sessions .* on tmux socket (\S+)")
DEMO_TIMEOUT = 120


def demo_command(*args: str) -> subprocess.CompletedProcess[str]:
    return handoffd("demo", *args, timeout=DEMO_TIMEOUT)


def where(output: str) -> tuple[str, str]:
    """The project root and tmux socket the demo announced."""
    found = SWARM_UP.search(output)
    assert found, output
    return found.group(1), found.group(2)


def assert_nothing_left(root: str, socket: str) -> None:
    assert not os.path.exists(os.path.dirname(root)), "the demo's directory is left behind"
    assert not server_answers(socket), "the demo's tmux server still runs"
    assert not os.path.lexists(socket), "the demo's socket file is left behind"
    wait_for(lambda: not processes_touching(root, socket), what="the demo's processes to end")


# --- the command, end to end --------------------------------------------------------------


def test_the_demo_runs_its_round_trips_and_ends_with_invariants_ok() -> None:
    result = demo_command("--rounds", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    for n in (1, 2, 3):
        assert f"round trip {n}/3 complete: coder → cleaner → coder" in result.stdout
    assert re.search(r"round trips +3/3\n", result.stdout)
    assert re.search(r"handoffs delivered +6\n", result.stdout)
    assert re.search(r"pickup latency +p50 [\d.]+ ms", result.stdout)
    assert re.search(r"invariants +OK", result.stdout)


def test_the_demo_across_two_hosts_prints_the_same_summary_and_takes_everything_down() -> None:
    """Two project roots as hosts a and b over a nats-server the demo starts and stops."""
    # re-notify after 1.5 s: well after a wake-up typed once the pane is idle for 0.5 s (the
    # one-host demo's), before one typed after 2 s (the daemon's default), on a loaded machine
    result = demo_command("--hosts", "2", "--rounds", "3", "--renotify-after", "1.5")
    assert result.returncode == 0, result.stdout + result.stderr
    hosts = re.findall(r"host (a|b) up in (\S+): sessions (\S+) on (\S+)", result.stdout)
    assert [(name, session) for name, _, session, _ in hosts] == [
        ("a", "swarmforge-coder"), ("b", "swarmforge-cleaner"),
    ]  # fmt: skip
    assert re.search(r"round trips +3/3\n", result.stdout)
    assert re.search(r"handoffs delivered +6\n", result.stdout)
    # a copy received from the other host wakes its role at once, as a local delivery does: no
    # re-notify.  A wake-up may be spared: when the cleaner's reply lands before the coder's
    # done_with_current, that command hands it over, and the wake-up is no longer needed.
    wakes = re.search(r"wake-ups sent +(\d) \(0 re-notify, 0 failed\)\n", result.stdout)
    assert wakes and 3 <= int(wakes.group(1)) <= 6, result.stdout
    # every copy crossed: its latency runs to its arrival there, not to the sender's stamp
    assert re.search(r"pickup latency +p50 [\d.]+ ms .*\(created_at → in new/ on the other "
                     r"host\)\n", result.stdout)  # fmt: skip
    assert re.search(r"invariants +OK", result.stdout)
    server = re.search(r"nats-server (\S+) \(data in (\S+), sync_interval always\)", result.stdout)
    assert server, result.stdout
    assert not os.path.exists(os.path.dirname(server.group(2)))
    for _, root, _, socket in hosts:
        assert not server_answers(socket), "a host's tmux server still runs"
        wait_for(lambda root=root, socket=socket: not processes_touching(root, socket),
                 what="the demo's processes to end")  # fmt: skip


def test_the_demo_removes_its_directory_its_tmux_server_and_its_processes() -> None:
    result = demo_command("--rounds", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_nothing_left(*where(result.stdout))


def test_with_missed_wake_ups_renotify_carries_the_demo_to_the_end() -> None:
    result = demo_command("--rounds", "3", "--miss-rate", "0.5", "--renotify-after", "0.3")
    assert result.returncode == 0, result.stdout + result.stderr
    renotifies = re.search(r"\((\d+) re-notify, (\d+) failed\)", result.stdout)
    assert renotifies, result.stdout
    assert int(renotifies.group(1)) > 0
    assert re.search(r"round trips +3/3\n", result.stdout)
    assert re.search(r"invariants +OK", result.stdout)
    assert_nothing_left(*where(result.stdout))


@pytest.mark.slow  # about 15 s: busy stretches of 2 s, then a session ended and watched
def test_busy_agents_get_no_wake_up_while_they_print_and_a_killed_one_shows_red() -> None:
    result = demo_command("--rounds", "4", "--busy-rate", "0.5", "--kill-agent", "cleaner")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"into a busy pane +0 \(0 forced after --idle-wait\)", result.stdout)
    assert re.search(
        r"killed cleaner's agent \(pid \d+, in session swarmforge-cleaner\)", result.stdout
    )
    killed = re.search(r"killed agent +cleaner at [\d.]+ s: its card turned red ([\d.]+) s "
                       r"later — cleaner's session swarmforge-cleaner is gone",
                       result.stdout)  # fmt: skip
    assert killed and float(killed.group(1)) < 5.0, result.stdout
    assert re.search(r"invariants +OK", result.stdout)
    assert_nothing_left(*where(result.stdout))


@pytest.fixture
def kept() -> Iterator[tuple[str, str, str]]:
    """`handoffd demo --keep`: its output, root and socket; taken down and removed after."""
    result = demo_command("--rounds", "2", "--keep")
    root, socket = where(result.stdout)
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        yield result.stdout, root, socket
    finally:
        take_down(root)
        shutil.rmtree(os.path.dirname(root), ignore_errors=True)


def test_keep_leaves_the_swarm_running_and_says_how_to_attach_and_take_it_down(
    kept: tuple[str, str, str],
) -> None:
    output, root, socket = kept
    assert f"tmux -S {socket} attach -t =swarmforge-coder" in output
    assert f"handoffd down {root}" in output
    assert sessions(socket) == ["swarmforge-cleaner", "swarmforge-coder"]
    assert lifecycle.holder(root) is not None
    down = handoffd("down", root)
    assert down.returncode == 0, down.stderr
    assert not server_answers(socket)
    wait_for(lambda: not processes_touching(root, socket), what="the kept swarm to end")


def test_the_scripted_agents_merge_the_work_they_are_handed(kept: tuple[str, str, str]) -> None:
    _, root, _ = kept
    cleaner = os.path.join(root, ".worktrees", "cleaner")
    for tree in (root, cleaner):
        assert git(tree, "status", "--porcelain") == "", f"a merge was left half done in {tree}"
    # The coder's last reply came from the cleaner, who had merged the coder's rounds.
    assert git(root, "merge-base", "--is-ancestor", "cleaner", "HEAD") == ""
    assert (Path(cleaner) / "feature.txt").read_text() == "round-1\nround-2\n"
    assert (Path(root) / "clean.txt").read_text().count("cleaned-") == 2


# --- a failing invariant ------------------------------------------------------------------


def duplicate_a_completed_copy(root: str) -> None:
    """Break exactly-once: a second copy of a handoff the cleaner already completed."""
    completed = config.load_roles(root)["cleaner"].path(Box.COMPLETED)
    for directory, _, names in os.walk(completed):
        for name in sorted(names):
            copy = Path(directory, name)
            shutil.copy(copy, copy.with_name(copy.stem + ".again.handoff"))
            return
    raise AssertionError("the cleaner completed nothing")


def test_a_broken_invariant_makes_the_demo_command_exit_non_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settle = demo.settle

    def settle_then_break(root: str, deadline: float) -> None:
        settle(root, deadline)
        duplicate_a_completed_copy(root)

    monkeypatch.setattr(demo, "settle", settle_then_break)
    result = CliRunner().invoke(cli.main, ["demo", "--rounds", "1"])
    assert result.exit_code == 1, result.output
    assert re.search(r"invariants +BROKEN", result.output)
    assert "reached cleaner 2 times, expected 1" in result.output
    assert_nothing_left(*where(result.output))


# --- the summary, in process --------------------------------------------------------------


@pytest.fixture
def at_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A sample project after one handoff coder → cleaner, delivered, taken and completed."""
    for key, value in BARE_GIT_ENV.items():
        monkeypatch.setenv(key, value)
    root = str(tmp_path.resolve() / "p")
    project.init(root, project.parse(project.sample_text(), "sample"))
    draft = tmp_path / "draft"
    draft.write_text("type: note\nto: cleaner\npriority: 50\nmessage: hello\n")
    assert run_command("swarm_handoff", str(draft), cwd=root, role="coder").code == 0
    assert handoffd("run", "--once", root).returncode == 0
    cleaner = os.path.join(root, ".worktrees", "cleaner")
    assert "BATCH:" in run_command("ready_for_next", cwd=cleaner, role="cleaner").out
    assert "COMPLETED_BATCH:" in run_command("done_with_current", cwd=cleaner, role="cleaner").out
    return root


def test_a_queue_at_rest_summarises_as_ok(at_rest: str) -> None:
    summary = demo._summarise(at_rest, rounds=1, returned=1, seconds=1.0)
    assert summary.ok, summary.problems
    assert summary.delivered == 1
    assert len(summary.latencies_ms) == 1
    assert re.search(r"invariants +OK", demo.render(summary))


def test_a_duplicated_copy_breaks_the_summary(at_rest: str) -> None:
    duplicate_a_completed_copy(at_rest)
    summary = demo._summarise(at_rest, rounds=1, returned=1, seconds=1.0)
    assert not summary.ok
    text = demo.render(summary)
    assert re.search(r"invariants +BROKEN", text)
    assert "reached cleaner 2 times, expected 1" in text


def test_a_handoff_in_failed_breaks_the_summary(at_rest: str) -> None:
    failed = Path(config.load_roles(at_rest)["coder"].path(Box.FAILED))
    (failed / "50_20260101T000000Z_000009_from_coder_to_nobody.handoff").write_text(
        "id: 20260101T000000Z_000009_from_coder\nfrom: coder\nto: nobody\n"
        "priority: 50\ntype: note\n\nbody\n"
    )
    summary = demo._summarise(at_rest, rounds=1, returned=1, seconds=1.0)
    assert "1 handoff(s) in failed/" in summary.problems
    assert not summary.ok


def summary(**changes: object) -> demo.Summary:
    fields: dict[str, object] = dict(
        rounds=2, returned=2, delivered=4, wakeups=5, renotifies=1, wake_failures=0,
        latencies_ms=[1.0, 2.0, 3.0, 40.0], problems=[], seconds=2.5,
    )  # fmt: skip
    fields.update(changes)
    return demo.Summary(**fields)  # type: ignore[arg-type]


def test_the_summary_shows_counts_latency_percentiles_and_ok() -> None:
    text = demo.render(summary())
    assert re.search(r"round trips +2/2\n", text)
    assert re.search(r"wake-ups sent +5 \(1 re-notify, 0 failed\)", text)
    assert re.search(r"p50 2\.5 ms .* max 40\.0 ms", text)
    assert re.search(r"invariants +OK", text)


def test_the_summary_counts_busy_wake_ups_unsubmitted_ones_and_stalls() -> None:
    text = demo.render(summary(busy_wakes=0, forced=0, unsubmitted=1, stalls=2, held=[1.5, 2.25]))
    assert re.search(r"into a busy pane +0 \(0 forced after --idle-wait\); 2 held until the "
                     r"pane was idle, longest 2\.2 s", text)  # fmt: skip
    assert re.search(r"unsubmitted +1\n", text) and re.search(r"stalls turned red +2\n", text)


def test_a_wake_up_typed_into_a_busy_pane_unforced_breaks_the_summary() -> None:
    typed = summary(busy_wakes=2, forced=1)
    assert not typed.ok
    assert "1 wake-up(s) typed into a busy pane without being forced" in demo.render(typed)


def test_a_killed_agent_whose_card_never_turned_red_breaks_the_summary() -> None:
    quiet = summary(returned=1, killed="cleaner", killed_at=3.0)
    assert not quiet.ok
    assert "cleaner's card never showed red after its agent died" in demo.render(quiet)
    shown = summary(returned=1, killed="cleaner", killed_at=3.0, red_after=0.4,
                    red_detail="cleaner's session s is gone")  # fmt: skip
    assert shown.ok and "its card turned red 0.4 s later — cleaner's session s is gone" in (
        demo.render(shown)
    )


def test_round_trips_that_never_came_back_break_the_summary_without_other_problems() -> None:
    short = summary(returned=1)
    assert not short.ok
    assert "only 1 of 2 round trips came back" in demo.render(short)


def test_every_problem_is_listed_in_the_summary() -> None:
    text = demo.render(summary(problems=["first problem", "second problem"]))
    assert "    - first problem\n    - second problem" in text


@pytest.mark.parametrize("latencies", [[], [5.0]])
def test_the_summary_renders_with_too_few_latencies_for_percentiles(
    latencies: list[float],
) -> None:
    text = demo.render(summary(latencies_ms=latencies, returned=0))
    assert "pickup latency" not in text
    assert re.search(r"invariants +BROKEN", text)


# --- the scripted agent -------------------------------------------------------------------


def test_the_agent_reads_each_payload_of_a_task_a_batch_and_a_done_output() -> None:
    task = "TASK: /t\nFROM: coder\nTYPE: note\nPRIORITY: 50\nPAYLOAD:\none\n\ntwo\n"
    batch = (
        "BATCH: /b\nCOUNT: 2\nPRIORITY: 50\n"
        "\nBATCH_ITEM: 1\nTASK: /b/1\nFROM: coder\nTYPE: note\nPRIORITY: 50\nPAYLOAD:\nfirst\n"
        "\nBATCH_ITEM: 2\nTASK: /b/2\nFROM: coder\nTYPE: note\nPRIORITY: 50\nPAYLOAD:\nsecond\n"
    )
    done = "COMPLETED: /c/1\n" + task
    assert demo_agent.payloads(task) == ["one\n\ntwo\n"]
    assert demo_agent.payloads(batch) == ["first\n", "second\n"]
    assert demo_agent.payloads(done) == ["one\n\ntwo\n"]
    assert demo_agent.payloads("NO_TASK\n") == []


def test_the_demo_configuration_gives_the_coder_the_rounds_and_each_agent_its_peer() -> None:
    windows = project.parse(demo.configuration(4, 0.25, 7), "demo")
    by_role = {w.role: w for w in windows}
    assert {r: (w.agent, w.mode) for r, w in by_role.items()} == {
        "coder": ("demo", "task"),
        "cleaner": ("demo", "batch"),
    }
    assert by_role["coder"].args == (
        "--peer", "cleaner", "--rounds", "4", "--miss-rate", "0.25", "--seed", "7",
    )  # fmt: skip
    assert by_role["cleaner"].args == ("--peer", "coder", "--miss-rate", "0.25", "--seed", "7")
