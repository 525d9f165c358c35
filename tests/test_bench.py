"""`handoffd bench` runs end to end and reports every figure; --quick gives no verdict (it
never checks a speed), a judged run exits 1 on a miss."""

from __future__ import annotations

import json
import subprocess
import sys

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
    "idle_cpu_pct",
    "idle_rss_mb",
    "idle_threads",
)
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
            "idle_cpu", "idle_rss")  # fmt: skip


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "handoffd", "bench", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


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
                  "history 500"):  # fmt: skip
        assert label in text
    assert "machine:" in text and report["python"] in text and "bytecode" in text
    for key in ("date", "uname", "cpus", "python", "bytecode", "filesystem", "load_end", "sizes"):
        assert report[key]
    metrics = report["metrics"]
    for key in METRICS:
        assert isinstance(metrics[key], (int, float)), key
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


def test_a_full_run_exits_non_zero_exactly_when_a_figure_misses(tmp_path):
    """Small sizes without --quick are judged like a full run."""
    json_file = tmp_path / "report.json"
    result = bench("--handoffs", "10", "--latency-samples", "5", "--idle-seconds", "0.5",
                   "--startup-runs", "2", "--limit-files", "10", "--history", "50",
                   "--dir", str(tmp_path), "--json", str(json_file))  # fmt: skip
    report = json.loads(json_file.read_text())
    assert set(VERDICTS) <= set(report["verdicts"])
    assert report["all_pass"] == all(report["verdicts"].values())
    overall = "PASS" if report["all_pass"] else "MISS"
    assert f"\noverall: {overall}\n" in result.stdout
    assert result.returncode == (0 if report["all_pass"] else 1), result.stderr


def test_json_only_prints_just_the_json_line(tmp_path):
    result = bench("--quick", "--json-only", "--history", "50", "--idle-seconds", "0.5",
                   "--dir", str(tmp_path))  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().split("\n")
    assert len(lines) == 1
    assert set(json.loads(lines[0])["metrics"]["growth"]) == {"50"}


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


def test_bench_hosts_measures_cross_host_pickup_beside_local_pickup_and_the_drain() -> None:
    """`bench --hosts --quick`: two hosts over a local nats-server, every figure present."""
    import json as jsonlib
    import os
    import subprocess
    import sys

    command = [os.path.join(os.path.dirname(sys.executable), "handoffd"), "bench", "--hosts",
               "--quick", "--json-only"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    figures = jsonlib.loads(done.stdout)["hosts"]
    assert figures["cross_host_pickup_ms"]["n"] == 5 and figures["local_pickup_ms"]["n"] == 5
    assert figures["cross_host_pickup_ms"]["p50"] > 0 and figures["drain_handoffs"] == 20
    assert figures["drain_per_s"] > 0 and figures["disk_files_per_s"] > 0
