"""A real Prometheus server scrapes `handoffd web`'s `/metrics` (docs/protocol.md §19):
Debian's `prometheus` (2.42), on loopback with its own storage in the test's folder, its
target up without a scrape error, and the values it stored those of the known work, also
after more work lands."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project, wait_for
from tests.numbers_support import lay, worked
from tests.swarm_support import command_env
from tests.test_docs import OPERATIONS

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow,  # a real server, its start and a few scrapes: ~10 s
    pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus package is not installed"),
]
CONFIG = """\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: handoffd
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["{target}"]
"""


# docs/operations.md's three queries, "Watching the swarm"
DASHBOARD = (
    'sum by (role) (handoffd_cards{state=~"waiting|blocked"})',
    "histogram_quantile(0.9, sum by (role, le) (rate(handoffd_wait_seconds_bucket[1h])))",
    "handoffd_stalled == 1 or handoffd_oldest_waiting_seconds > 1800",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stopped(process: subprocess.Popen[Any]) -> None:
    """End a process this test started, by its own handle: TERM, then KILL."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture
def board(project: Project) -> Iterator[str]:
    """`handoffd web` serving the project: its address, host:port."""
    command = [sys.executable, "-m", "handoffd", "web", str(project.root), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=command_env())  # fmt: skip
    try:
        assert process.stdout is not None
        said = process.stdout.readline()  # `handoffd web: <root> on http://127.0.0.1:N (…)`
        assert " on http://" in said, said
        yield said.split(" on http://", 1)[1].split()[0].rstrip("/")
    finally:
        stopped(process)


@pytest.fixture
def prometheus(tmp_path: Path, board: str) -> Iterator[str]:
    """A Prometheus server scraping the board every second: its API's base URL."""
    assert PROMETHEUS is not None
    config = tmp_path / "prometheus.yml"
    config.write_text(CONFIG.format(target=board))
    address = f"127.0.0.1:{free_port()}"
    command = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
               f"--web.listen-address={address}", "--log.level=warn"]  # fmt: skip
    base = f"http://{address}"
    with open(tmp_path / "prometheus.log", "wb") as said:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=said)
        try:
            wait_for(lambda: _ready(base), timeout=30, every=0.25)
            yield base
        finally:
            stopped(process)


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def api(base: str, path: str, **query: str) -> Any:
    url = f"{base}/api/v1/{path}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        found = json.loads(answer.read())
    assert found["status"] == "success", found
    return found["data"]


def scalar(base: str, promql: str) -> float | None:
    """The one value an instant query gives now, None while it gives none."""
    result = api(base, "query", query=promql)["result"]
    return float(result[0]["value"][1]) if len(result) == 1 else None


def target(base: str) -> dict[str, Any]:
    """The one scrape target, as the server shows it ({} until it has loaded it)."""
    found = api(base, "targets")["activeTargets"]
    assert len(found) <= 1, found
    return dict(found[0]) if found else {}


def test_the_queries_shown_are_the_ones_tried() -> None:
    assert all(query in OPERATIONS.read_text() for query in DASHBOARD)


def test_a_real_prometheus_scrapes_the_board_and_stores_the_known_work(
    project: Project, prometheus: str
) -> None:
    now = time.time()
    expected = worked(project, now)
    wait_for(lambda: target(prometheus).get("health") == "up", timeout=30, every=0.25)
    shown = target(prometheus)
    assert shown["lastError"] == "", shown
    assert shown["labels"]["job"] == "handoffd"

    def settled(promql: str, value: float) -> bool:
        return scalar(prometheus, promql) == value

    wait_for(
        lambda: settled("sum(handoffd_completed_total)", expected["completed"]),
        timeout=30,
        every=0.25,
    )
    assert scalar(prometheus, "sum(handoffd_delivered_total)") == expected["delivered"]
    assert scalar(prometheus, "sum(handoffd_taken_total)") == expected["taken"]
    assert scalar(prometheus, 'handoffd_refused_total{sender="coder"}') == expected["refused"]
    assert scalar(prometheus, "sum(handoffd_wakeups_total)") == expected["wakeups"]
    assert scalar(prometheus, 'handoffd_cards{role="QA",state="waiting"}') == 1
    assert scalar(prometheus, 'handoffd_work_seconds_count{role="cleaner"}') == 5
    assert scalar(prometheus, 'handoffd_work_seconds_sum{role="cleaner"}') == 3000
    p50 = 'histogram_quantile(0.5, sum by (le) (handoffd_work_seconds_bucket{role="cleaner"}))'
    assert 300 < (scalar(prometheus, p50) or 0) <= 600
    assert scalar(prometheus, "handoffd_up") == 0
    for _ in range(3):  # more work lands: the next scrapes see it
        lay(project, "coder", "cleaner", "completed", now - 30, now - 20, now - 10)
    wait_for(lambda: settled('handoffd_completed_total{role="cleaner"}', 8), timeout=30, every=0.25)
    assert scalar(prometheus, "sum(handoffd_delivered_total)") == expected["delivered"] + 3
    samples = 'scrape_samples_scraped{job="handoffd"}'
    assert (scalar(prometheus, samples) or 0) > 100
    assert target(prometheus)["lastError"] == ""
    resets = "sum(resets(handoffd_completed_total[1m]))"  # never went down while scraped
    assert scalar(prometheus, resets) == 0
