"""Progress reporting for long work, decoupled from how it is shown.

Builders and sources call ``phase()``/``advance()``/``warn()``; the CLI passes a rich-backed
reporter (bars with rate and ETA), background jobs a ``JobProgress`` (ops/jobs.py), tests and
benchmarks ``NullProgress`` or a recorder.

Nothing goes silent: the builder and the embedder run their work inside
``ticking()``, a heartbeat that passes on ``advance(0)`` whenever nothing was reported for
``TICK_S`` seconds — during one long SQLite statement (the FTS merge, an integrity check) or one
batch of the embedding model — so a shown elapsed time, rate and ETA keep moving. Phases that
are several statements are split into counted steps instead, so their bars say how far they
are, not only that they are alive.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol, TypeVarTuple

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Task, TaskID

Ts = TypeVarTuple("Ts")

TICK_S = (
    1.0  # the longest a phase goes without an update (a shown phase must move every 2 s at most)
)
# Units of phases cut into unequal steps (statements, checks): their count says how far the
# phase is, but "steps per second" says nothing, so no rate is shown for them.
STEP_UNITS = frozenset({"steps", "checks"})
PLAIN_EVERY_S = 10.0  # not on a terminal (a log file): a line per phase, and one this often

log = logging.getLogger("chiezo.progress")


class Progress(Protocol):
    """``phase`` starts a phase of ``total`` units (None: unknown); ``advance(n)`` counts ``n``
    more — ``advance(0)`` is a heartbeat that moves nothing; ``retotal`` replaces an estimated
    total. A phase's count never passes a total given to ``phase`` (a display shows an
    estimate passed as the count). Calls may come from a heartbeat thread; ``Ticking``
    serialises them, so an implementation need not lock for that."""

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


class Ticking:
    """A Progress that passes every call on to ``inner`` and, after ``interval`` seconds
    without one, passes on ``advance(0)`` from a daemon thread. One lock orders the work's
    calls and the heartbeat's, so ``inner`` sees one call at a time."""

    def __init__(self, inner: Progress, interval: float | None = None) -> None:
        self.inner = inner
        self.interval = TICK_S if interval is None else interval
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="chiezo-progress-tick", daemon=True)
        self._thread.start()

    def __getattr__(self, name: str):  # warnings, phases…: what the wrapped reporter keeps
        return getattr(self.__dict__["inner"], name)

    def _call(self, method: Callable[[*Ts], None], *args: *Ts) -> None:
        with self._lock:
            self._last = time.monotonic()
            method(*args)

    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        self._call(self.inner.phase, name, total, unit)

    def advance(self, n: int = 1) -> None:
        self._call(self.inner.advance, n)

    def retotal(self, total: int) -> None:
        self._call(self.inner.retotal, total)

    def warn(self, message: str) -> None:
        self._call(self.inner.warn, message)

    def _beat(self) -> None:
        while not self._stopped.wait(max(self._last + self.interval - time.monotonic(), 0.0)):
            with self._lock:  # checked under the lock: close() may have closed inner meanwhile
                if self._stopped.is_set():
                    return
                if time.monotonic() - self._last < self.interval:
                    continue  # the work reported while we slept
                self._last = time.monotonic()
                try:
                    self.inner.advance(0)
                except BaseException:  # noqa: BLE001 - a display failing must not end the work
                    log.debug("progress heartbeat stopped", exc_info=True)
                    return

    def stop(self) -> None:
        """End the heartbeat; ``inner`` stays open."""
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def close(self) -> None:
        self.stop()
        with self._lock:
            self.inner.close()


@contextlib.contextmanager
def ticking(progress: Progress | None, interval: float | None = None) -> Iterator[Progress]:
    """``progress`` with a heartbeat for the length of the block: its own if it is a Ticking
    already, else a new one stopped at the end. ``progress`` is not closed: whoever made it
    closes it (a build is followed by its embedding on the same display)."""
    if progress is None or type(progress) is NullProgress:  # nothing shown, nothing to refresh
        yield progress or NullProgress()
        return
    if isinstance(progress, Ticking):
        yield progress
        return
    ticker = Ticking(progress, interval)
    try:
        yield ticker
    finally:
        ticker.stop()


def console_progress(console: Console | None = None, *, quiet: bool = False) -> Progress:
    """What a command shows while it works: bars on ``console`` with a heartbeat from the
    first phase to ``close()`` (sources' own phases before a build included); nothing when
    ``quiet`` (``--json``)."""
    return NullProgress() if quiet else Ticking(RichProgress(console))


class RichProgress:
    """One line per phase: a bar with count, rate and ETA when the amount of work is known,
    a spinner and the elapsed time when it is not. Rate and ETA are worked out each time the
    line is drawn (10 times a second), not when the count moves, so they keep moving between
    batches. Warnings print above the bars. ``close()`` stops the display; a phase after it
    starts it again.

    Not on a terminal (output to a log file, a service's journal), where a live display would
    print nothing until the end, the same line is printed when a phase ends and every
    ``PLAIN_EVERY_S`` seconds while it runs (the heartbeat's updates make that happen)."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        count, rate, eta = _columns()
        self.console = console or Console(stderr=True)
        self.warnings: list[str] = []
        self._bar = Progress(
            SpinnerColumn(finished_text="[green]✓[/]"),
            TextColumn("[bold]{task.description:<28}"),
            BarColumn(bar_width=30),
            count(),
            rate(),
            TimeElapsedColumn(),
            eta(),
            console=self.console,
        )
        self._lock = threading.RLock()
        self._live = self.console.is_terminal
        self._open = False
        self._task: TaskID | None = None  # the phase's bar, while one is shown
        self._total: int | None = None
        self._done = 0
        self._printed = time.monotonic()
        self._start()

    def _start(self) -> None:
        if self._live and not self._open:
            self._bar.start()
        self._open = True

    def _print_line(self) -> None:
        self._printed = time.monotonic()
        task = next(t for t in self._bar.tasks if t.id == self._task)
        self.console.print(self._bar.make_tasks_table([task]))

    def _finish_current(self) -> None:
        if self._task is not None:
            full = max(self._done, 1)  # a full bar, whatever was counted
            self._bar.update(self._task, total=full, completed=full)
            self._bar.stop_task(self._task)
            if not self._live:
                self._print_line()
            self._task = None

    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        with self._lock:
            self._finish_current()
            self._start()
            self._total, self._done = total, 0
            self._task = self._bar.add_task(name, total=total, unit=unit, done=0, of=total)
            self._printed = time.monotonic()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            if self._task is None:
                return
            self._done += n
            self._show()

    def retotal(self, total: int) -> None:
        """A better estimate of the phase's total (e.g. pages, from the bytes read so far)."""
        with self._lock:
            self._total = total
            if self._task is not None:
                self._show()

    def _show(self) -> None:
        # an estimate the count has passed is shown as the count: never "139/138"
        total = None if self._total is None else max(self._total, self._done)
        assert self._task is not None  # called within a phase only
        self._bar.update(self._task, completed=self._done, total=total, done=self._done, of=total)
        if not self._live and time.monotonic() - self._printed >= PLAIN_EVERY_S:
            self._print_line()

    def warn(self, message: str) -> None:
        with self._lock:
            self.warnings.append(message)
            self._bar.console.print(f"[yellow]warning:[/] {message}", highlight=False, markup=True)

    def close(self) -> None:
        with self._lock:
            self._finish_current()
            if self._open and self._live:
                self._bar.stop()
            self._open = False


def _columns():
    """The count, rate and ETA columns (rich is imported only when something is shown)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    def amount(n: float, unit: str) -> str:
        return format_bytes(n) if unit == "B" else f"{int(n):,}"

    def rate_of(task: Task) -> float | None:
        elapsed = task.elapsed
        done = task.fields.get("done", 0)
        return done / elapsed if elapsed and done else None

    class CountColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            done, total = task.fields.get("done", 0), task.fields.get("of")
            unit = task.fields.get("unit", "")
            if total is None:
                return Text(amount(done, unit) if done else "")
            return Text(f"{amount(done, unit)}/{amount(total, unit)}")

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            rate, unit = rate_of(task), task.fields.get("unit", "")
            if rate is None or unit in STEP_UNITS:
                return Text("")
            if unit == "B":
                return Text(f"{format_bytes(rate)}/s")
            return Text(f"{rate:,.{1 if rate < 10 else 0}f} {unit}/s")

    class EtaColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            rate, total = rate_of(task), task.fields.get("of")
            if rate is None or total is None or task.finished or task.stop_time is not None:
                return Text("")
            remaining = max(total - task.fields.get("done", 0), 0) / rate
            return Text(f"ETA {remaining:,.0f} s")

    return CountColumn, RateColumn, EtaColumn


def format_bytes(n: float) -> str:
    """``1536`` → ``1.5 KiB`` (bytes without decimals)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"
