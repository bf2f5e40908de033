"""Source kinds for the job tests: a background job runs in a process of its own
(ops/job_process.py), where a test's monkeypatch does not reach, so the behaviour a test needs of a
build — held until the test lets it go, stuck for good, failing with a bug — is a kind of its
own, registered in the test and sent to the job's process like any plugin kind.

The input is a text file, one document per line; the build waits while ``FILE.hold`` exists."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from chiezo.core.models import Chunk, Doc
from chiezo.ingest.documents import DocumentsKind
from chiezo.store.build import GenerationBuilder
from chiezo.store.kinds import SourceKind, option_field, recorded_options

WAIT_S = 120.0  # a guard: nothing in a test waits this long


@dataclass
class HeldOptions:
    stuck: bool = option_field(False, help="While held, report no progress (a hung build).")
    broken: bool = option_field(False, help="Fail with a bug instead of building.")


class HeldKind(SourceKind):
    """One document per line; held while ``FILE.hold`` exists — reporting progress as it
    waits (so a cancel stops it), or, ``stuck``, silent (as a build blocked in a join is)."""

    name = "held"
    summary = "Build source NAME from a text file, one document per line (job tests)."
    Options = HeldOptions
    argument = "FILE"

    def build(self, settings, inputs, name, options, build, progress):
        path = inputs[0]
        if options.broken:
            raise RuntimeError("the disk caught fire")
        progress.phase("waiting", None, "steps")
        hold, deadline = path.with_name(path.name + ".hold"), time.monotonic() + WAIT_S
        while hold.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
            if not options.stuck:
                progress.advance(1)
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        docs = [
            Doc(key=str(i), title=line, body=line, chunks=[Chunk(line)])
            for i, line in enumerate(lines, 1)
        ]
        identity = {"path": str(path.resolve()), "options": recorded_options(options)}
        builder = GenerationBuilder(
            settings, name, self.name, input_identity=identity, options=build, progress=progress
        )
        with builder:  # as a kind's build writes its documents
            builder.start_reading(None)
            for doc in docs:
                builder.add(doc)
            return builder.finish()


class HeldDocs(DocumentsKind):
    """The docs kind itself, its build held while the file ``hold`` exists: registered in a
    test under the same name, it replaces the built-in kind there and in the job's process
    (a job that runs for as long as the test needs, then builds for real)."""

    def __init__(self, hold: Path) -> None:
        self.hold = hold

    def build(self, *args, **kwargs):
        deadline = time.monotonic() + WAIT_S
        while self.hold.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return super().build(*args, **kwargs)


class Release:
    """``set()`` lets a held build go on (``threading.Event``'s word for it)."""

    def __init__(self, hold: Path) -> None:
        self.hold = hold

    def set(self) -> None:
        self.hold.unlink(missing_ok=True)
