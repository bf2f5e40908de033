"""``chiezo ask`` / ``chiezo chat`` in a terminal: the answer streamed as it is written, then
its references, then what the claim check doubts; and the exit code the result deserves.

Layout: a line on stderr says which excerpts the model is answering from (as soon as they
are chosen), the answer goes to stdout as it arrives, the numbered references follow it on
stdout, and every doubt (an uncited or unsupported sentence, a skipped page) is a warning on
stderr — so ``chiezo ask … > answer.txt`` keeps the answer and its sources only.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from chiezo.answer.plan import ReasoningFilter
from chiezo.core.errors import EXIT_FAILURE, EXIT_NO_MODEL, EXIT_NOT_FOUND, EXIT_UNCITED, EXIT_USAGE

# exit codes of errors that arrive inside a stream (after the first byte there is no
# exception to carry one): by HTTP status
_STATUS_EXIT = {503: EXIT_NO_MODEL, 404: EXIT_NOT_FOUND, 400: EXIT_USAGE}
# what is printed when the model's streamed reply was no answer and the library's stands in
STOOD_IN = {
    "empty": "the model's reply was empty; what the library says:",
    "echo": "the model only said the question back; what the library says:",
}


@dataclass
class Turn:
    """What one answered question leaves: its exit code and, for a chat's history, the
    answer and the titles it cited."""

    code: int
    answer: str = ""
    cited_titles: list[str] = field(default_factory=list)

    def history(self, question: str) -> list[dict[str, Any]]:
        if self.code != 0:
            return []
        return [
            {"role": "user", "content": question},
            {"role": "assistant", "content": self.answer, "cited_titles": self.cited_titles},
        ]


class Printer:
    """``data_dir``: the command's data directory, for the ``chiezo doc`` command a
    reference without a link is shown by (ops/links.py ``doc_command``)."""

    def __init__(
        self, out: Console, err: Console, *, strict: bool = False, data_dir: Path | None = None
    ):
        self.out, self.err, self.strict, self.data_dir = out, err, strict, data_dir
        self._visible = ReasoningFilter()
        self._streamed = False

    def play(self, events: Iterable[tuple[str, dict[str, Any]]]) -> Turn:
        """Print a stream of answer events; the turn it ends in."""
        for name, data in events:
            if name == "references":
                self._answering_from(data.get("references") or [])
            elif name == "step":
                self._step(data)
            elif name == "delta":
                self._delta(data.get("text", ""))
            elif name == "done":
                return self.finish(data)
            elif name == "error":
                return self.failed(data)
        return Turn(EXIT_FAILURE)

    def finish(self, result: dict[str, Any]) -> Turn:
        if self._streamed:
            self.out.print(escape(self._visible.flush()), end="")
            self.out.print()
            if result.get("stopped") in STOOD_IN:  # what streamed was no answer
                self.err.print(f"[dim]{escape(STOOD_IN[result['stopped']])}[/]")
                self.out.print(escape(result["answer"]))
        else:
            self.out.print(escape(result["answer"]))
        for ref in result["references"]:
            self.out.print(reference_line(ref, self.data_dir))
        if (
            not result.get("grounded")
            and not result.get("no_basis")
            and result.get("stopped") not in STOOD_IN
        ):
            # the model's answer is not borne out by its sources: the library's own words too
            print_sentences(self.out, result.get("answer_sentences") or [])
        self.warn(result)
        cited = [r["title"] for r in result["references"] if r["n"] in result.get("cited", [])]
        return Turn(self.code(result), result["answer"], cited)

    def warn(self, result: dict[str, Any]) -> None:
        """The run's warnings, then each sentence the claim check doubts, with its reasons."""
        for warning in result.get("warnings", []):
            self.err.print(f"[yellow]warning:[/] {escape(warning)}")
        for claim in result.get("claims", []):
            if claim["status"] in ("unsupported", "uncited"):
                self.err.print(
                    f"[yellow]warning: {claim['status']}:[/] “{escape(claim['text'])}” "
                    f"[dim]({escape('; '.join(claim['reasons']))})[/]"
                )

    def code(self, result: dict[str, Any]) -> int:
        if result.get("stopped") not in (None, "loop"):  # the model failed; what it left shown
            self.err.print(f"[bold red]error:[/] the answer is incomplete ({result['stopped']})")
            return EXIT_FAILURE
        if result.get("no_basis"):
            self.err.print(
                "[dim]hint: try simpler keywords (a name, a title), or run `chiezo doctor`[/]"
            )
            return EXIT_NOT_FOUND
        if result.get("needs"):  # the answer is a question back: the person must give more
            return EXIT_USAGE
        if self.strict and not result.get("grounded"):
            doubtful = len(result.get("unsupported", [])) + len(result.get("uncited", []))
            why = (
                f"{doubtful} sentence(s) uncited or unsupported"
                if doubtful
                else "the answer cites no source"
            )
            self.err.print(f"[bold red]error:[/] {why} (--strict)")
            return EXIT_UNCITED
        return 0

    def failed(self, error: dict[str, Any]) -> Turn:
        if self._streamed:
            self.out.print()
        self.err.print(f"[bold red]error:[/] {escape(str(error.get('error', '')))}")
        if error.get("hint"):
            self.err.print(f"[dim]{escape(error['hint'])}[/]")
        print_sentences(self.out, error.get("answer_sentences") or [])
        print_excerpts(self.out, error.get("excerpts") or [], self.data_dir)
        return Turn(_STATUS_EXIT.get(int(error.get("status", 500)), EXIT_FAILURE))

    def _answering_from(self, references: list[dict[str, Any]]) -> None:
        if references:
            listed = ", ".join(f"[{r['n']}] {r['title']}" for r in references)
            self.err.print(f"[dim]answering from {escape(listed)}[/]")

    def _step(self, step: dict[str, Any]) -> None:
        arguments = step.get("arguments")
        shown = (
            json.dumps(arguments, ensure_ascii=False) if isinstance(arguments, dict) else arguments
        )
        by = " (by chiezo: the model answered before looking up)" if step.get("by") else ""
        self.err.print(
            f"[dim]step {step['step']}: {escape(step['tool'])} "
            f"{escape(str(shown or ''))[:200]} — {step.get('ms', 0):.0f} ms{by}[/]"
        )

    def _delta(self, text: str) -> None:
        self._streamed = True
        late = self._visible.late_closes
        visible = self._visible.feed(text)
        if self._visible.late_closes > late:  # what was printed was the model thinking aloud
            self.out.print()
            self.err.print(
                "[dim]the text above was the model's reasoning (its server does not "
                "keep it apart); the answer follows[/]"
            )
        if visible:
            self.out.print(escape(visible), end="")
            self.out.file.flush()


def reference_line(ref: dict[str, Any], data_dir: Path | None = None) -> str:
    """``[1] title — url  (source)``, escaped: "[1]" is not rich markup here. Without a link
    (no public page, no server known) the command that shows the document stands in it."""
    url = f" — {where_to_open(ref, data_dir)}" if ref.get("url") or "doc_id" in ref else ""
    label = escape("[{}]".format(ref["n"]))
    return f"{label} {escape(ref['title'])}{escape(url)}  [dim]({escape(ref['source'])})[/]"


def print_sentences(out: Console, sentences: list[dict[str, Any]]) -> None:
    """The library's own sentences that answer the question (best first), each citing the
    excerpt it is from: the answer without a model."""
    if not sentences:
        return
    out.print("[bold]What the library says:[/]")
    for s in sentences:
        out.print(f"  {escape(s['text'])} {escape('[{}]'.format(s['ref']))}")


def where_to_open(ref: dict[str, Any], data_dir: Path | None = None) -> str:
    """A document's link (``url``: ops/links.py), else the command that shows it here."""
    return ref.get("url") or doc_command(ref["source"], ref["doc_id"], data_dir)


def doc_command(source: str, doc_id: int, data_dir: Path | None = None) -> str:
    """The command that shows a document in a terminal, for one with no link (no public
    page, no server known): ``chiezo doc -s SOURCE --id N``, with ``--data DIR`` when this
    shell would not find ``data_dir`` by itself (``CHIEZO_DATA``, else ``./data``)."""
    words = ["chiezo"]
    if data_dir is not None:
        default = Path(os.environ.get("CHIEZO_DATA") or "./data").resolve()
        if Path(data_dir).resolve() != default:
            words += ["--data", str(Path(data_dir).resolve())]
    words += ["doc", "-s", source, "--id", str(doc_id)]
    return shlex.join(words)


def print_excerpts(
    out: Console, excerpts: list[dict[str, Any]], data_dir: Path | None = None
) -> None:
    """What was found, when no model could turn it into an answer: the lookup is not wasted."""
    if not excerpts:
        return
    out.print("[bold]Found in the library:[/]")
    for e in excerpts:
        out.print(reference_line(e, data_dir))
        out.print(f"    {escape(e['text'])}")
