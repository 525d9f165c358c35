"""`handoffd bench --board --quick` runs end to end and reports every figure (never a speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIGURES = ("floor_ms", "status_empty_history_ms", "status_ms",
           "status_with_history_dependency_ms", "status_vs_floor", "history_growth",
           "history_dependency_vs_floor")  # fmt: skip


def test_the_board_scenario_prints_its_table_and_a_json_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "handoffd", "bench", "--board", "--quick", "--dir", str(tmp_path),
         "--json", str(tmp_path / "figures.json")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    table = result.stdout.rstrip("\n").split("\n")
    figures = json.loads((tmp_path / "figures.json").read_text())["board"]
    (tmp_path / "figures.json").unlink()
    assert all(figures[key] > 0 for key in FIGURES)
    assert (figures["open_cards"], figures["history"]) == (60, 500)
    text = "\n".join(table)
    assert "status vs floor" in text and "history 0 -> N" in text
    assert list(tmp_path.iterdir()) == []  # its projects are removed afterwards
