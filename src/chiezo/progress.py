"""Progress reporting for long work, decoupled from how it is shown.

Builders and sources call ``phase()``/``advance()``/``warn()``; the CLI passes a rich-backed
reporter (bars with rate and ETA), tests and benchmarks pass ``NullProgress`` or collect warnings.
"""

from __future__ import annotations

import time
from typing import Protocol


class Progress(Protocol):
    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def retotal(self, total: int) -> None: ...
    def warn(self, message: str) -> None: ...
    def close(self) -> None: ...


class NullProgress:
    """Discards progress; keeps warnings so callers and tests can inspect them."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.phases: list[str] = []

    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        self.phases.append(name)

    def advance(self, n: int = 1) -> None:
        pass

    def retotal(self, total: int) -> None:
        pass

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def close(self) -> None:
        pass


class RichProgress:
    """One line per phase: a bar with count, rate and ETA when the amount of work is known,
    a spinner and the elapsed time when it is not. Warnings print above the bars."""

    def __init__(self, console=None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console or Console(stderr=True)
        self.warnings: list[str] = []
        self._bar = Progress(
            SpinnerColumn(finished_text="[green]✓[/]"),
            TextColumn("[bold]{task.description:<28}"),
            BarColumn(bar_width=30),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=self.console,
        )
        self._bar.start()
        self._task = None
        self._total: int | None = None
        self._unit = "docs"
        self._done = 0
        self._started = time.monotonic()

    def _finish_current(self) -> None:
        if self._task is not None:
            self._bar.update(
                self._task, total=max(self._done, 1), completed=max(self._done, 1), eta=""
            )
            self._bar.stop_task(self._task)
            self._task = None

    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        self._finish_current()
        self._unit, self._total, self._done = unit, total, 0
        self._started = time.monotonic()
        self._task = self._bar.add_task(name, total=total, count="", rate="", eta="")

    def advance(self, n: int = 1) -> None:
        if self._task is None:
            return
        self._done += n
        elapsed = max(time.monotonic() - self._started, 1e-6)
        rate = self._done / elapsed
        amount = format_bytes if self._unit == "B" else (lambda n: f"{n:,}")
        fields = {"rate": f"{amount(int(rate))}/s" if self._unit == "B" else
                  f"{rate:,.{1 if rate < 10 else 0}f} {self._unit}/s"}  # fmt: skip
        if self._total:
            fields["count"] = f"{amount(self._done)}/{amount(self._total)}"
            remaining = max(self._total - self._done, 0) / rate if rate else 0
            fields["eta"] = f"ETA {remaining:,.0f} s"
        else:
            fields["count"] = amount(self._done)
        self._bar.update(self._task, completed=self._done, **fields)

    def retotal(self, total: int) -> None:
        """A better estimate of the phase's total (e.g. pages, from the bytes read so far)."""
        self._total = max(total, self._done)
        if self._task is not None:
            self._bar.update(self._task, total=self._total)

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        self._bar.console.print(f"[yellow]warning:[/] {message}", highlight=False, markup=True)

    def close(self) -> None:
        self._finish_current()
        self._bar.stop()


def format_bytes(n: float) -> str:
    """``1536`` → ``1.5 KiB`` (bytes without decimals)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"
