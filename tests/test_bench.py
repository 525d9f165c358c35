"""The benchmark (benchmarks/ beside the package, run by `handoffd bench` from a checkout)
works end to end: each scenario at --quick sizes prints its table and its figures and
gives no verdict (tiny sizes never check a speed); a judged run exits 1 exactly when a
figure misses; and the targets are the ones the tables state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.board import Board
from benchmarks.digest import Digest
from benchmarks.scenario import Report, Target
from benchmarks.web import Web
from tests.conftest import BIN

METRICS = (
    "disk_limit_files_per_s",
    "drain_copies",
    "drain_copies_per_s",
    "drain_vs_limit",
    "latency_samples",
    "latency_p50_ms",
    "latency_p99_ms",
    "latency_max_ms",
    "latency_p50_in_limit_periods",
    "plain_p50_ms",
    "plain_p99_ms",
    "plain_max_ms",
    "helper_median_ms",
    "python_median_ms",
    "helper_vs_python",
    "take_median_ms",
    "finish_median_ms",
    "take_vs_python",
    "finish_vs_python",
    "take_python_median_ms",
    "idle_cpu_pct",
    "idle_rss_mb",
    "idle_threads",
)
SECTIONS = {"board": ("floor_ms", "command_ms", "command_vs_floor"),
            "swarm": ("daemon_pct", "tmux_calls_pct", "server_pct", "total_pct")}  # fmt: skip
GROWTH = (
    "disk_limit_files_per_s",
    "drain_copies_per_s",
    "drain_vs_limit",
    "drain_raw_vs_empty",
    "drain_vs_empty",
    "latency_p50_ms",
    "p50_vs_empty",
    "latency_p99_ms",
    "p99_vs_empty",
)
VERDICTS = ("drain", "latency_p50", "latency_p99", "plain_p50", "plain_p99", "helper_startup",
            "helper_take", "idle_cpu", "idle_rss", "status_command_vs_floor", "swarm_2_cpu",
            "swarm_3_cpu")  # fmt: skip
STARTUP = ("helper_median_ms", "python_median_ms", "helper_vs_python", "take_median_ms",
           "finish_median_ms", "take_vs_python", "finish_vs_python",
           "take_python_median_ms")  # fmt: skip
BOARD = ("floor_ms", "status_empty_history_ms", "status_ms",
         "status_with_history_dependency_ms", "status_vs_floor", "history_growth",
         "history_dependency_vs_floor", "status_command_ms", "status_command_vs_floor")  # fmt: skip
WEB = ("status_json_ms", "page_ms", "fragment_ms", "page_vs_status", "page_bytes",
       "status_json_bytes", "open_served_ms", "archive_0_ms", "archive_n_ms", "archive_vs_page",
       "archive_growth")  # fmt: skip


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "handoffd", "bench", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


# --- the full run and its sections ------------------------------------------------------


def test_quick_bench_prints_the_table_and_writes_every_metric_to_the_json_file(tmp_path):
    json_file = tmp_path / "report.json"
    work = tmp_path / "work"
    work.mkdir()
    result = bench("--quick", "--dir", str(work), "--json", str(json_file))
    assert result.returncode == 0, result.stderr
    *table, last = result.stdout.rstrip("\n").split("\n")
    assert last == f"JSON: {json_file}"  # the JSON goes to the file, not the screen
    report = json.loads(json_file.read_text())

    text = "\n".join(table)
    for label in ("disk limit", "drain", "pickup p50", "pickup p99", "plain write + rename",
                  "ready_for_next",
                  "python -c pass", "taking one file", "finishing it", "idle CPU", "idle RSS",
                  "history 500", "7 handoffd status, 60 open cards", "status / floor",
                  "8 idle swarm of 2 panes", "idle swarm of 4 panes"):  # fmt: skip
        assert label in text
    assert "machine:" in text and report["python"] in text and "bytecode" in text
    for key in ("date", "uname", "cpus", "python", "bytecode", "filesystem", "load_end", "sizes"):
        assert report[key]
    metrics = report["metrics"]
    for key in METRICS:
        assert isinstance(metrics[key], (int, float)), key
    for key in SECTIONS["board"]:
        assert metrics["board"][key] > 0, key
    assert set(metrics["swarm"]) == {"2", "4"}
    for key in SECTIONS["swarm"]:
        assert metrics["swarm"]["4"][key] >= 0, key
    assert metrics["drain_copies"] == 100 and metrics["latency_samples"] == 20
    assert len(metrics["drain_pass_s"]) == len(metrics["drain_wall_s"]) == 2
    assert len(metrics["disk_limit_runs"]) == 4
    assert set(metrics["growth"]) == {"500"}
    for key in GROWTH:
        assert isinstance(metrics["growth"]["500"][key], float), key
    assert list(work.iterdir()) == []  # the throwaway projects are gone


def test_quick_bench_gives_no_verdict_and_explains_each_term_where_it_is_printed(tmp_path):
    json_file = tmp_path / "report.json"
    result = bench("--quick", "--history", "50", "--idle-seconds", "0.5", "--dir",
                   str(tmp_path), "--json", str(json_file))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "PASS" not in result.stdout and "MISS" not in result.stdout
    assert (
        "overall: no verdict (--quick runs tiny sizes: it checks that the benchmark runs, "
        "not how fast anything is)\n"
    ) in result.stdout
    assert "(stat ticks)" in result.stdout and "in disk-limit periods" in result.stdout
    assert "\nstat ticks: the daemon's CPU time (utime + stime in /proc/<pid>/stat)" in (
        result.stdout
    )
    assert "\ndisk-limit periods: pickup p50 divided by one limit period" in result.stdout
    report = json.loads(json_file.read_text())
    assert report["quick"] is True
    assert "verdicts" not in report and "all_pass" not in report
    assert set(report["metrics"]["growth"]) == {"50"}  # --history replaces the quick size


def test_a_full_run_exits_non_zero_exactly_when_a_figure_misses(tmp_path):
    """Small sizes without --quick are judged like a full run."""
    json_file = tmp_path / "report.json"
    result = bench("--handoffs", "10", "--latency-samples", "5", "--idle-seconds", "0.5",
                   "--startup-runs", "2", "--limit-files", "10", "--history", "50",
                   "--board-cards", "20", "--board-history", "50", "--swarm-size", "2",
                   "--swarm-size", "3", "--dir", str(tmp_path),
                   "--json", str(json_file))  # fmt: skip
    report = json.loads(json_file.read_text())
    assert set(VERDICTS) <= set(report["verdicts"])
    assert report["all_pass"] == all(report["verdicts"].values())
    overall = "PASS" if report["all_pass"] else "MISS"
    assert f"\noverall: {overall}\n" in result.stdout
    assert result.returncode == (0 if report["all_pass"] else 1), result.stderr


def test_pickup_alone_measures_both_writers_and_judges_only_them(tmp_path):
    """Section 3 without the rest (drains, start-up, idle, growth), for a quick look at
    pickup; its verdicts are the full run's pickup verdicts."""
    json_file = tmp_path / "report.json"
    result = bench("--pickup", "--latency-samples", "5", "--dir", str(tmp_path),
                   "--json", str(json_file), timeout=120)  # fmt: skip
    report = json.loads(json_file.read_text())
    assert set(report["verdicts"]) == {"latency_p50", "latency_p99", "plain_p50", "plain_p99"}
    assert report["metrics"]["latency_samples"] == 5
    for key in ("latency_p50_ms", "plain_p50_ms", "plain_p99_ms", "plain_max_ms"):
        assert isinstance(report["metrics"][key], float), key
    assert "3 pickup p50, swarm_handoff" in result.stdout
    assert "pickup p50, plain write + rename" in result.stdout
    assert "disk limit" not in result.stdout and "idle" not in result.stdout
    assert result.returncode == (0 if report["all_pass"] else 1), result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_startup_alone_times_the_helpers_against_python_and_judges_only_that(tmp_path):
    """Section 4 alone, in a project of its own with no daemon: the helper against python."""
    json_file = tmp_path / "report.json"
    result = bench("--startup", "--startup-runs", "2", "--dir", str(tmp_path),
                   "--json", str(json_file), timeout=120)  # fmt: skip
    report = json.loads(json_file.read_text())
    assert set(report["verdicts"]) == {"helper_startup", "helper_take"}
    assert set(report["metrics"]) == set(STARTUP) and report["sizes"] == {"startup_runs": 2}
    assert "4 ready_for_next start-up, median" in result.stdout and "<= 1.5x" in result.stdout
    assert "take / python (work waiting)" in result.stdout
    assert "bytecode of the helpers:" in result.stdout and "pickup" not in result.stdout
    assert result.returncode == (0 if report["all_pass"] else 1), result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_json_only_prints_just_the_json_line_the_json_file_holds(tmp_path):
    json_file = tmp_path.parent / f"{tmp_path.name}-report.json"
    result = bench("--startup", "--quick", "--json-only", "--json", str(json_file),
                   "--dir", str(tmp_path), timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().split("\n")
    assert len(lines) == 1
    assert json.loads(lines[0]) == json.loads(json_file.read_text())
    assert json.loads(lines[0])["quick"] is True


def test_hosts_measures_cross_host_pickup_beside_local_pickup_and_the_drain(tmp_path):
    """Costs ~6 s: a real nats-server and two daemons per host, at --quick sizes."""
    result = bench("--hosts", "--quick", "--json-only", "--dir", str(tmp_path), timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    figures = report["hosts"]
    assert figures["cross_host_pickup_ms"]["n"] == 5 and figures["local_pickup_ms"]["n"] == 5
    assert figures["cross_host_pickup_ms"]["p50"] > 0 and figures["local_pickup_ms"]["p50"] > 0
    assert figures["drain_handoffs"] == 20 and figures["drain_per_s"] > 0
    assert figures["disk_files_per_s"] > 0 and figures["drain_vs_limit"] > 0
    assert figures["pickup_vs_local"] > 0 and report["quick"] is True
    assert report["sizes"] == {"latency_samples": 5, "handoffs": 20, "limit_files": 30}
    assert list(tmp_path.iterdir()) == []  # the server's store and both hosts are gone


def test_one_scenario_at_a_time_and_the_refusal_says_which_flags(tmp_path):
    result = bench("--board", "--web", "--dir", str(tmp_path), timeout=30)
    assert result.returncode == 2 and result.stdout == ""
    flags = (
        "--board, --digest, --web, --metrics, --pickup, --startup, --hosts, --panes, "
        "--harness, --pool"
    )
    assert f"give at most one of {flags}" in result.stderr
    assert list(tmp_path.iterdir()) == []  # refused before anything was built


# --- the board, the web page, digests ---------------------------------------------------


def test_the_board_scenario_prints_its_table_and_its_figures(tmp_path: Path) -> None:
    result = bench("--board", "--quick", "--dir", str(tmp_path), "--json",
                   str(tmp_path / "figures.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "figures.json").read_text())["board"]
    (tmp_path / "figures.json").unlink()
    assert all(figures[key] > 0 for key in BOARD)
    assert (figures["open_cards"], figures["history"]) == (60, 500)
    assert "status vs floor" in result.stdout and "history 0 -> N" in result.stdout
    assert "target <= 2.0x" in result.stdout and "target <= 1.2x" in result.stdout
    assert "command vs floor" in result.stdout and "target <= 3.0x" in result.stdout
    assert "PASS" not in result.stdout and "MISS" not in result.stdout  # quick: no verdict
    assert list(tmp_path.iterdir()) == []  # its projects are removed afterwards


def test_the_metrics_scenario_prints_its_table_with_the_target_and_its_figures(
    tmp_path: Path,
) -> None:
    result = bench("--metrics", "--quick", "--dir", str(tmp_path), "--json",
                   str(tmp_path / "figures.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "figures.json").read_text())["metrics"]
    for key in ("status_json_ms", "metrics_ms", "metrics_command_ms", "numbers_page_ms",
                "first_read_ms", "metrics_vs_status", "metrics_bytes"):  # fmt: skip
        assert figures[key] > 0, key
    assert (figures["open_cards"], figures["history"]) == (60, 500)
    assert "/metrics vs status --json" in result.stdout and "target <= 2.0x" in result.stdout
    assert "PASS" not in result.stdout and "MISS" not in result.stdout  # quick: no verdict
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]


def test_the_web_scenario_prints_its_table_with_the_target_and_its_figures(tmp_path: Path):
    result = bench("--web", "--quick", "--dir", str(tmp_path), "--json",
                   str(tmp_path / "figures.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "figures.json").read_text())["web"]
    assert all(figures[key] > 0 for key in WEB)
    assert (figures["open_cards"], figures["history"]) == (60, 500)
    assert "page vs status --json" in result.stdout and "target < 3.0x" in result.stdout
    assert "archive vs open page" in result.stdout and "target <= 2.0x" in result.stdout
    assert "archive 0 -> 500" in result.stdout and "target <= 1.5x" in result.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]


def test_the_digest_scenario_runs_and_reports_both_history_sizes(tmp_path):
    json_file = tmp_path / "figures.json"
    done = bench("--digest", "--quick", "--dir", str(tmp_path), "--json", str(json_file))
    assert done.returncode == 0, done.stderr
    assert "growth 500 vs 0:" in done.stdout and "60 lines" in done.stdout
    assert "(target <= 1.20x, <= 1 s)\n" in done.stdout
    figures = json.loads(json_file.read_text())["digest"]
    assert [f["history"] for f in figures] == [0, 500]
    assert all(len(f["warm_s"]) == 3 for f in figures)
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]  # the projects are gone


@pytest.mark.slow  # about 12 s: tmux sessions, two daemons, each left a few seconds to type
def test_the_panes_scenario_measures_pickup_with_busy_panes_against_quiet_ones(tmp_path):
    json_file = tmp_path / "figures.json"
    done = bench("--panes", "--quick", "--dir", str(tmp_path), "--json", str(json_file))
    assert done.returncode == 0, done.stderr
    figures = json.loads(json_file.read_text())["panes"]
    assert figures["panes"] == 3 and figures["busy_p50_ms"] > 0 and figures["quiet_p50_ms"] > 0
    assert (figures["quiet_typed"], figures["busy_typed"]) == (3, 0)  # none into a busy pane
    assert "busy panes: pickup p50 against quiet" in done.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]


@pytest.mark.slow  # about 15 s: two swarms' tmux servers and daemons, each window 2 s
def test_the_swarm_scenario_measures_each_swarm_idle_with_mail_waiting(tmp_path):
    json_file = tmp_path / "figures.json"
    done = bench("--swarm", "--quick", "--dir", str(tmp_path), "--json", str(json_file))
    assert done.returncode == 0, done.stderr
    figures = json.loads(json_file.read_text())["swarm"]
    assert set(figures) == {"2", "4"}
    for one in figures.values():
        assert one["total_pct"] >= 0 and len(one["windows_pct"]) == 1
        assert one["total_pct"] == pytest.approx(
            one["daemon_pct"] + one["tmux_calls_pct"] + one["server_pct"])  # fmt: skip
    assert "idle swarm of 4 panes, mail waiting: CPU" in done.stdout
    assert "daemon / its tmux calls / tmux server" in done.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]


# --- the targets ------------------------------------------------------------------------


def test_a_target_is_met_on_its_bound_unless_strict_and_states_itself_as_the_table_does():
    assert Target("t", 2.0, "<=", 2.0, "x", ".1f").met
    assert not Target("t", 3.0, "<", 3.0, "x", ".1f").met
    assert Target("t", 0.5, ">=", 0.5, "x").met and not Target("t", 0.49, ">=", 0.5, "x").met
    assert Target("t", 1, ">=", 1 / 1.5, "x", ".2f").text == ">= 0.67x"
    assert Target("t", 1, "<=", 60.0, " MB").text == "<= 60 MB"
    assert Target("t", 1, "<=", 7.0, shown="flat").text == "flat"


def test_the_board_web_and_digest_targets_are_the_ones_their_tables_state():
    board = {t.name: t for t in Board().targets({"status_vs_floor": 2.0, "history_growth": 1.21,
                                                 "status_command_vs_floor": 3.01})}  # fmt: skip
    assert board["status_vs_floor"].met and not board["history_growth"].met
    assert not board["status_command_vs_floor"].met
    assert board["status_command_vs_floor"].text == "<= 3.0x"
    web, archive, growth = Web().targets({"page_vs_status": 2.99, "archive_vs_page": 2.01,
                                          "archive_growth": 1.5})  # fmt: skip
    assert web.met and web.text == "< 3.0x"
    assert not archive.met and archive.text == "<= 2.0x" and growth.met
    digest = Digest().targets([{"warm_s": [0.5, 0.5, 0.5]}, {"warm_s": [0.54, 1.1, 0.55]}])
    assert [(t.name, t.met, t.text) for t in digest] == [
        ("growth", True, "<= 1.20x"), ("warm", True, "<= 1 s")]  # fmt: skip
    slow = Digest().targets([{"warm_s": [0.9]}, {"warm_s": [1.05]}])
    assert [t.met for t in slow] == [True, False]


def test_the_swarm_targets_are_half_a_percent_for_2_panes_and_one_for_32():
    from benchmarks.swarm import targets

    found = {t.name: t for t in targets({"2": {"total_pct": 0.5}, "32": {"total_pct": 1.01}})}
    assert found["swarm_2_cpu"].met and found["swarm_2_cpu"].text == "<= 0.5 %"
    assert not found["swarm_32_cpu"].met and found["swarm_32_cpu"].text == "<= 1.0 %"


def test_a_judged_report_carries_its_verdicts_and_a_quick_one_says_it_gave_none():
    targets = {"a": Target("a", 1.0, "<=", 2.0), "b": Target("b", 3.0, "<=", 2.0)}
    judged = Report("x", {"date": "d"}, {"n": 1}, {"v": 1}, targets, {"a": True, "b": False})
    assert judged.as_json() == {"date": "d", "sizes": {"n": 1}, "x": {"v": 1},
                                "verdicts": {"a": True, "b": False}, "all_pass": False}  # fmt: skip
    assert (judged.verdict("a"), judged.verdict("b")) == ("PASS", "MISS")
    quick = Report("x", {}, {}, {}, targets, None)
    assert quick.as_json() == {"sizes": {}, "x": {}, "quick": True}
    assert quick.verdict("a") == "" and not quick.all_pass


# --- where the benchmark lives ----------------------------------------------------------


def test_the_benchmark_and_the_tests_share_a_factory_that_pulls_in_neither():
    """testbed builds the projects of both: importing it loads no pytest and no benchmark,
    and the benchmark's command loads no pytest and none of the tests."""
    probe = ("import sys, {}; print(sorted({{m.split('.')[0] for m in sys.modules}} & "
             "{{'pytest', 'benchmarks', 'tests', '_pytest'}}))")  # fmt: skip
    for module, allowed in (("testbed", "[]"), ("benchmarks.command", "['benchmarks']")):
        done = subprocess.run([f"{BIN}/python", "-c", probe.format(module)],
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        assert (done.stdout.strip(), done.stderr) == (allowed, ""), module


def test_the_harness_scenario_says_which_harness_is_missing_before_building_anything(
    tmp_path: Path,
) -> None:
    """`--harness` drives real Claude Code and Codex (tests/test_real_*.py run the same
    swarm): where `.ci/harnesses` did not install them it says so, and what to run."""
    env = {**os.environ, "HANDOFFD_HARNESSES": str(tmp_path / "none")}
    result = subprocess.run(
        [sys.executable, "-m", "handoffd", "bench", "--harness", "--quick", "--dir",
         str(tmp_path)], capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 1
    assert "@anthropic-ai/claude-code@2.1.332 is not installed" in result.stderr
    assert "(run .ci/harnesses)" in result.stderr


def test_the_pool_scenario_drains_races_and_compares_the_board(tmp_path):
    """A pool of members draining tasks, their claim conflicts, the board with and without
    the pool (docs/protocol.md §17), at --quick sizes."""
    json_file = tmp_path / "figures.json"
    done = bench("--pool", "--quick", "--dir", str(tmp_path), "--json", str(json_file),
                 timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(json_file.read_text())["pool"]
    assert sum(figures["per_member"]) == figures["tasks"]
    assert sum(figures["race_per_member"]) == figures["race_tasks"]
    assert figures["race_claims"] >= figures["race_tasks"]
    assert figures["status_pool_ms"] > 0 and figures["status_plain_ms"] > 0
    assert "claim conflicts" in done.stdout and "status --json" in done.stdout
