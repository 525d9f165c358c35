"""The one shape of a benchmark scenario, and the run that drives each of them.

A scenario builds its throwaway projects, measures them, turns what it measured into
figures, declares the targets those figures are judged by, and renders its table.  The
run gives it a temp dir (removed afterwards unless kept), notes the machine, and judges
the figures; a `--quick` run gives no verdict, since tiny sizes say whether the scenario
works, not how fast anything is.
"""

from __future__ import annotations

import dataclasses
import operator
import shutil
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from benchmarks import machine

SizesT = TypeVar("SizesT")
BuiltT = TypeVar("BuiltT")
MeasuredT = TypeVar("MeasuredT")

COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">=": operator.ge,
}


class BenchError(Exception):
    """The daemon or a command did not do what the benchmark waited for."""


@dataclass(frozen=True)
class Target:
    """One verdict: a figure's `value` against `bound` (`value <op> bound`).  `text` is
    how the table states the target: `op`, then `bound` in `spec`, then `unit`, unless
    `shown` says it otherwise ("flat")."""

    name: str
    value: float
    op: str
    bound: float
    unit: str = ""
    spec: str = "g"
    shown: str = ""

    @property
    def met(self) -> bool:
        return COMPARE[self.op](self.value, self.bound)

    @property
    def text(self) -> str:
        return self.shown or f"{self.op} {self.bound:{self.spec}}{self.unit}"


@dataclass
class Report:
    """One finished run: where and with what it ran, the figures, the targets, and the
    verdicts (None for a quick run, which gives none)."""

    name: str  # the scenario's key in the JSON: its figures are found under it
    machine: dict[str, Any]
    sizes: dict[str, Any]
    figures: Any  # what the JSON holds under `name`
    targets: dict[str, Target]
    verdicts: dict[str, bool] | None

    @property
    def all_pass(self) -> bool:
        return self.verdicts is not None and all(self.verdicts.values())

    def verdict(self, target: str) -> str:
        """PASS or MISS for a judged run, "" for a quick one."""
        if self.verdicts is None:
            return ""
        return "PASS" if self.verdicts[target] else "MISS"

    def as_json(self) -> dict[str, Any]:
        judged = (
            {"quick": True}
            if self.verdicts is None
            else {"verdicts": self.verdicts, "all_pass": self.all_pass}
        )
        return {**self.machine, "sizes": self.sizes, self.name: self.figures, **judged}


class Scenario(ABC, Generic[SizesT, BuiltT, MeasuredT]):
    """Build → measure → figures, judged by `targets`, shown by `render`.  `full` and
    `quick` are its sizes (a dataclass); `tunable` names the fields the command line may
    set (`--handoffs`…); `key` names its figures in the JSON."""

    name: ClassVar[str]
    key: ClassVar[str]
    full: SizesT
    quick: SizesT
    tunable: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def build(self, base: str, sizes: SizesT) -> BuiltT:
        """Lay out the scenario's projects under `base` (not timed)."""

    @abstractmethod
    def measure(self, built: BuiltT, sizes: SizesT) -> MeasuredT:
        """Time what the scenario measures, in the projects built."""

    @abstractmethod
    def figures(self, measured: MeasuredT, sizes: SizesT) -> Any:
        """What was measured at `sizes`, as the JSON holds it."""

    @abstractmethod
    def targets(self, figures: Any) -> list[Target]:
        """The targets the figures are judged by."""

    @abstractmethod
    def render(self, report: Report) -> str:
        """The readable table."""

    def sizes(self, quick: bool, given: dict[str, Any]) -> SizesT:
        """The sizes of a run: full or quick, then what the command line set."""
        chosen = {key: value for key, value in given.items() if key in self.tunable}
        return dataclasses.replace(self.quick if quick else self.full, **chosen)  # type: ignore[type-var]


def run(
    scenario: Scenario[Any, Any, Any],
    sizes: Any,
    quick: bool,
    directory: str | None = None,
    keep: bool = False,
) -> Report:
    """Run `scenario` at `sizes` in a temp dir under `directory` (removed unless `keep`)."""
    base = tempfile.mkdtemp(prefix=f"handoffd-bench-{scenario.name}-", dir=directory)
    try:
        info = machine.describe(base)
        built = scenario.build(base, sizes)
        figures = scenario.figures(scenario.measure(built, sizes), sizes)
        info["load_end"] = machine.load()
    finally:
        if keep:
            progress(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    targets = {target.name: target for target in scenario.targets(figures)}
    verdicts = None if quick else {name: target.met for name, target in targets.items()}
    return Report(scenario.key, info, dataclasses.asdict(sizes), figures, targets, verdicts)


def progress(text: str) -> None:
    """A line on stderr, so a long run shows where it is without touching stdout."""
    print(f"bench: {text}", file=sys.stderr, flush=True)
