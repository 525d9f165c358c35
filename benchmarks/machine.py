"""Where a run ran: the machine, its load, the interpreter, the filesystem of the temp dir
and whether the helpers start from cached bytecode.  A shared machine's figures swing with
its load: every report says what the load was."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from typing import Any


def describe(directory: str) -> dict[str, Any]:
    """The machine and the start of the run, for a report's header and its JSON."""
    uname = os.uname()
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "uname": f"{uname.sysname} {uname.release} {uname.machine}",
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "bytecode": _bytecode(),
        "temp_dir": directory,
        "filesystem": _filesystem(directory),
        "load_start": load(),
    }


def load() -> str:
    """The 1, 5 and 15 minute load averages: other work on the machine skews every figure."""
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            names = (ln.split(":", 1)[1].strip() for ln in file if ln.startswith("model name"))
            return next(names, "")
    except OSError:
        return ""


def _bytecode() -> str:
    """Whether the helpers start from cached bytecode: without it each call compiles them."""
    import importlib.util

    from handoffd.adapters import console as helpers

    cached = os.path.exists(importlib.util.cache_from_source(helpers.__file__))
    note = " (PYTHONDONTWRITEBYTECODE is set)" if sys.flags.dont_write_bytecode else ""
    found = "cached" if cached else "not cached"
    return f"{found}{note}; compiled before the start-up runs, as an install does"


def _filesystem(directory: str) -> str:
    """`fstype (device on mountpoint)` of the mount holding `directory`."""
    best = ("", "?", "?")
    path = os.path.realpath(directory)
    try:
        with open("/proc/mounts", encoding="utf-8") as file:
            for line in file:
                device, point, fstype = line.split()[:3]
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[0]):
                    best = (point, fstype, device)
    except OSError:
        pass
    return f"{best[1]} ({best[2]} on {best[0]})"
