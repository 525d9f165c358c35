"""`handoffd bench --web --quick` runs end to end and reports every figure (never a speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIGURES = ("status_json_ms", "page_ms", "fragment_ms", "page_vs_status", "page_bytes",
           "status_json_bytes")  # fmt: skip


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "handoffd", "bench", "--web", "--quick", "--dir",
               str(tmp_path), *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_the_web_scenario_prints_its_figures_as_json(tmp_path: Path) -> None:
    result = bench(tmp_path, "--json-only")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)["web"]
    assert all(figures[key] > 0 for key in FIGURES)
    assert figures["open_cards"] == 60
    assert list(tmp_path.iterdir()) == []  # its project is removed afterwards


def test_the_web_scenario_prints_a_table_with_the_target(tmp_path: Path) -> None:
    result = bench(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "page vs status --json" in result.stdout and "target < 3.0x" in result.stdout
