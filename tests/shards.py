"""Long crash-point walks split into shards the suite's workers run side by side.

A walk (every crash instant of a recorded run, every kill point of a traced one) is one
piece of work that takes minutes; as one test it runs on one worker while the others
idle at the end of the suite.  Split into `SHARDS` tests, each takes its part of the
walk, and the workers share it out.  The parts must be parts of one walk: a run recorded
twice is not the same run (its ids, times and sometimes its call counts differ), so the
recording or the trace is made once per test session, by whichever worker comes first,
and the others read it back (`shared`).
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

SHARDS = 4  # per walk: enough for three workers to finish a walk together


def parametrize(shards: int = SHARDS) -> pytest.MarkDecorator:
    """Run the test once per shard, its `shard` argument the pair (index, count)."""
    return pytest.mark.parametrize(
        "shard", [(k, shards) for k in range(shards)], ids=[f"shard{k + 1}of{shards}"
                                                           for k in range(shards)]
    )  # fmt: skip


def share(items: list[T], shard: tuple[int, int]) -> list[tuple[int, T]]:
    """The items shard `shard` takes, with their indexes in `items`: every `count`-th from
    its own index on, so the shards together take each item exactly once."""
    index, count = shard
    return [(n, item) for n, item in enumerate(items) if n % count == index]


def shared(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> T:
    """`make(folder)`, made once per test session whatever the worker: the first to ask
    makes it in a folder beside every worker's own (under a lock the others wait on),
    keeps it pickled there, and the others read that back.  A `make` that raises (a skip
    included) keeps nothing, so the next to ask tries again, and fails or skips alike."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's own folder, above each worker's
    folder = root / f"shared-{name}"
    kept = root / f"shared-{name}.pickle"
    with open(root / f"shared-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if kept.exists():
            value: T = pickle.loads(kept.read_bytes())
            return value
        shutil.rmtree(folder, ignore_errors=True)  # what a `make` that raised left
        folder.mkdir()
        value = make(folder)
        temp = kept.with_suffix(".tmp")
        temp.write_bytes(pickle.dumps(value))
        temp.rename(kept)
        return value
