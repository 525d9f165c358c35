"""`handoffd demo --pool 3 --kill-agent cleaner-2` (docs/protocol.md §17): three scripted
members share the cleaner's work, one is killed holding a task, its claim goes back to the
pool and another member finishes it; the summary counts per member and checks invariants."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from handoffd.demos import demo_pool

HANDOFFD = os.path.join(os.path.dirname(sys.executable), "handoffd")


@pytest.mark.slow
def test_the_pool_demo_reclaims_the_killed_members_task_and_its_invariants_hold():
    done = subprocess.run([HANDOFFD, "demo", "--pool", "3", "--kill-agent", "cleaner-2",
                           "--rounds", "12"], capture_output=True, text=True, timeout=240,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    counts = [int(n) for n in re.findall(r"^  cleaner-\d +(\d+) task\(s\)$", out, re.M)]
    assert len(counts) == 3 and sum(counts) == 12
    found = re.search(r"reclaimed +(\S+@cleaner) from cleaner-2 \(heartbeat expired\), "
                      r"finished by (cleaner-[13])$", out, re.M)  # fmt: skip
    assert found, out
    assert "invariants           OK: every handoff delivered and completed exactly once" in out


def test_kill_agent_names_a_member_only_with_a_pool():
    done = subprocess.run([HANDOFFD, "demo", "--kill-agent", "cleaner-2"], capture_output=True,
                          text=True, timeout=30, check=False)  # fmt: skip
    assert done.returncode == 2 and "choose from coder, cleaner" in done.stderr


def test_the_pool_demos_summary_is_broken_when_nothing_was_reclaimed():
    summary = demo_pool.PoolSummary(4, 4, {"cleaner-1": 2, "cleaner-2": 2}, [], [], 1.0,
                                    killed="cleaner-2")  # fmt: skip
    assert not summary.ok
    assert "nothing cleaner-2 held was reclaimed" in demo_pool.render(summary)
