"""`handoffd bench --digest` runs end to end (tiny sizes: it checks the scenario works,
not the speed, which `--digest` without `--quick` measures)."""

from __future__ import annotations

import json
import subprocess

from tests.digest_support import HANDOFFD


def test_the_digest_scenario_runs_and_reports_both_history_sizes(tmp_path):
    done = subprocess.run(
        [HANDOFFD, "bench", "--digest", "--quick", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text, line = done.stdout.rsplit("\n", 2)[0], done.stdout.splitlines()[-1]
    assert "growth 500 vs 0:" in text and "60 lines" in text
    figures = json.loads(line)["digest"]
    assert [f["history"] for f in figures] == [0, 500]
    assert all(len(f["warm_s"]) == 3 for f in figures)
    assert list(tmp_path.iterdir()) == []  # the temp projects are removed


def test_the_digest_scenario_honours_json_and_json_only_like_the_board(tmp_path):
    figures = tmp_path.parent / f"{tmp_path.name}-figures.json"
    done = subprocess.run(
        [HANDOFFD, "bench", "--digest", "--quick", "--dir", str(tmp_path), "--json-only",
         "--json", str(figures)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1  # the JSON line only, no table
    assert json.loads(done.stdout) == json.loads(figures.read_text())
    assert [f["history"] for f in json.loads(done.stdout)["digest"]] == [0, 500]
