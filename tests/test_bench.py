"""`handoffd bench --quick` runs end to end and reports every figure (never checks a speed)."""

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
VERDICTS = ("drain", "latency_p50", "latency_p99", "helper_startup", "idle_cpu", "idle_rss")


def test_quick_bench_prints_the_table_and_a_json_line_with_every_metric(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "handoffd", "bench", "--quick", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    *table, last = result.stdout.rstrip("\n").split("\n")
    report = json.loads(last)

    text = "\n".join(table)
    for label in ("disk limit", "drain", "pickup p50", "pickup p99", "ready_for_next",
                  "python -c pass", "taking one file", "finishing it", "idle CPU", "idle RSS",
                  "history 500"):  # fmt: skip
        assert label in text
    assert "machine:" in text and report["python"] in text and "bytecode" in text
    assert text.count("PASS") + text.count("MISS") >= len(VERDICTS) + 3
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
    assert set(VERDICTS) <= set(report["verdicts"])
    assert all(isinstance(v, bool) for v in report["verdicts"].values())
    assert isinstance(report["all_pass"], bool)
    assert list(tmp_path.iterdir()) == []  # the throwaway projects are gone


def test_json_only_prints_just_the_json_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "handoffd", "bench", "--quick", "--json-only", "--history", "50",
         "--idle-seconds", "0.5", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().split("\n")
    assert len(lines) == 1
    assert set(json.loads(lines[0])["metrics"]["growth"]) == {"50"}
