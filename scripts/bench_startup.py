#!/usr/bin/env python3
"""Helper start-up against a bare interpreter: `ready_for_next` vs `python -c pass`.

Builds a throwaway git project with one task-mode role and an empty inbox, then times
both commands RUNS times each, interleaved (A, B, A, B, ...) so that a slow patch of
the machine hits both alike, and prints the two medians and their ratio.

    python scripts/bench_startup.py [--venv DIR] [--runs N]

The venv defaults to the one running this script; its bin/ must hold `ready_for_next`.
Absolute times swing from run to run on a shared machine: read the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = 1.5


def make_project(root: str) -> None:
    """A git repository with one commit, a roles.tsv naming it as a task-mode role, and
    that role's empty inbox."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
    }
    env["GIT_COMMITTER_EMAIL"] = "b@b"
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "bench"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    for box in ("new", "in_process", "completed"):
        os.makedirs(os.path.join(root, ".swarmforge", "handoffs", "inbox", box))
    with open(os.path.join(root, ".swarmforge", "roles.tsv"), "w") as file:
        file.write(f"coder\tcoder\t{root}\tcoder\tCoder\tagent\ttask\n")


def timed(command: list[str], cwd: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=os.path.dirname(os.path.dirname(sys.executable)))
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    bin_dir = os.path.join(os.path.abspath(options.venv), "bin")
    helper = [os.path.join(bin_dir, "ready_for_next")]
    bare = [os.path.join(bin_dir, "python"), "-c", "pass"]
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.realpath(tmp)
        make_project(root)
        env = {**os.environ, "SWARMFORGE_ROLE": "coder"}
        for command in (helper, bare):  # warm up: byte-compile, fill the page cache
            timed(command, root, env)
        helper_s, bare_s = [], []
        for _ in range(options.runs):
            helper_s.append(timed(helper, root, env))
            bare_s.append(timed(bare, root, env))
    helper_ms, bare_ms = statistics.median(helper_s) * 1000, statistics.median(bare_s) * 1000
    ratio = helper_ms / bare_ms
    print(f"runs:                  {options.runs} each, interleaved")
    print(f"ready_for_next median: {helper_ms:.1f} ms")
    print(f"python -c pass median: {bare_ms:.1f} ms")
    print(f"ratio:                 {ratio:.2f} (target <= {TARGET})")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: a source (editable) install compiles")
        print("      handoffd's modules afresh on every call, which the ratio includes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
