"""Telling a reply that went wrong from an answer: a stream that loops, a reply that only
repeats the question, a reply with nothing in it.

Small models decoded greedily fall into loops — SmolLM2-135M at ``-c 2048`` wrote 「ハワイ州では、」
and "The library's official website does not provide a definitive answer…" dozens of times
until the deadline. :class:`LoopGuard` reads the stream as it comes and says when
it has started to repeat, so the request is stopped there and what came before the loop is
kept. Two signs, both cheap per piece:

* the text ends in the same block written three times over (a period of 4–240 characters;
  a short block needs more copies, so that "ーーー" or "| --- | --- |" are not loops);
* a sentence — or one nearly the same (character bigrams, Jaccard ≥ .85) — comes a third
  time: a loop the sampler varies a little is still a loop.

A reply that says the question back ("The answer is: パリの人口は？") or nothing at all is
*unusable* (:func:`unusable`): the library's own sentences stand in for it.
"""

from __future__ import annotations

import re
import unicodedata

MIN_PERIOD, MAX_PERIOD = 4, 240
COPIES = 3  # a block written three times in a row is a loop…
MIN_LOOP_CHARS = 48  # …once the copies together are this long (short blocks need more)
SENTENCE_COPIES = 3  # the third time a sentence comes, it is a loop
MIN_SENTENCE_CHARS = 12  # shorter ones ("Yes.", "[1]") may well repeat
NEAR = 0.85  # bigram Jaccard at which two sentences are one said again
_SENTENCE_END = re.compile(r"[。．！？!?\n]|\.(?=\s)")


class LoopGuard:
    """Fed a reply piece by piece; :meth:`feed` returns True once it loops, and
    :attr:`kept` is then the reply up to the loop (one copy of what repeats, cut at the end
    of a sentence where one ends inside it)."""

    def __init__(self) -> None:
        self.text = ""
        self.kept: str | None = None  # set when a loop was found
        self._sentences: list[tuple[str, set[str], int]] = []  # (normalised, bigrams, start)
        self._scanned = 0  # where the next sentence starts

    @property
    def looped(self) -> bool:
        return self.kept is not None

    def feed(self, piece: str) -> bool:
        if self.looped:
            return True
        self.text += piece
        found = _periodic_start(self.text) if piece else None
        if found is None:
            at = self._repeated_sentence()
            found = None if at is None else (at, 0)
        if found is not None:
            self.kept = _kept(self.text, *found)
        return self.looped

    def _repeated_sentence(self) -> int | None:
        """Where the second copy of a sentence said for the third time begins, else None."""
        for match in _SENTENCE_END.finditer(self.text, self._scanned):
            sentence = self.text[self._scanned : match.end()]
            begin = self._scanned
            self._scanned = match.end()
            plain = _normalised(sentence)
            if len(plain) < MIN_SENTENCE_CHARS:
                continue
            grams = _bigrams(plain)
            same = [s for s in self._sentences if s[0] == plain or _jaccard(s[1], grams) >= NEAR]
            self._sentences.append((plain, grams, begin))
            if len(same) + 1 >= SENTENCE_COPIES:
                return same[1][2] if len(same) > 1 else begin
        return None


# A reply that came whole (not streamed) is read as a stream would be, in pieces of this many
# characters: the guard looks for a repeat at the end of what it has read, which a reply cut by
# max_tokens in the middle of a copy never shows when read at once.
WHOLE_REPLY_PIECE = 16


def loop_cut(reply: str) -> str | None:
    """A whole ``reply`` up to where it began repeating itself (:attr:`LoopGuard.kept`), or
    None when it does not loop."""
    guard = LoopGuard()
    for at in range(0, len(reply), WHOLE_REPLY_PIECE):
        if guard.feed(reply[at : at + WHOLE_REPLY_PIECE]):
            return guard.kept or ""
    return None


def _periodic_start(text: str) -> tuple[int, int] | None:
    """(where the second copy of a block repeated at the end of ``text`` begins, the block's
    length), when the block comes at least ``COPIES`` times and the run is long enough; else
    None."""
    size = len(text)
    for period in range(MIN_PERIOD, min(MAX_PERIOD, size // COPIES) + 1):
        copies = max(COPIES, -(-MIN_LOOP_CHARS // period))
        if period * copies > size:
            break
        block = text[size - period :]
        if not block.strip() or any(
            text[size - (k + 1) * period : size - k * period] != block for k in range(1, copies)
        ):
            continue
        start = size - copies * period
        while start >= period and text[start - period : start] == block:
            start -= period  # the run began earlier
        return start + period, period  # one copy is kept
    return None


def _kept(text: str, end: int, period: int) -> str:
    """The reply up to ``end`` (one copy of what repeats), cut at a sentence's end: the
    copy's own sentence finished where the next copy, the same text, finishes it within
    ``period``; else after the last sentence that ends before ``end``; else all of it."""
    finish = _SENTENCE_END.search(text, end, end + period) if period else None
    if finish is not None:
        return text[: finish.end()].rstrip()
    head = text[:end]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= len(head) // 3:
        head = head[: ends[-1]]
    return head.rstrip()


def unusable(reply: str, question: str, instructions: str = "") -> str | None:
    """Why a finished reply is no answer at all, or None: ``empty`` (nothing but whitespace or
    reasoning tags), ``echo`` (it says the question back, with at most a few words around, or
    it is mostly the instructions it was given, copied)."""
    plain = _normalised(re.sub(r"\[\d+\]", "", reply))
    if not re.search(r"\w", plain):
        return "empty"
    asked = _normalised(question).rstrip("?？")
    if len(asked) >= 4 and asked in plain and len(plain) - len(asked) <= 24:
        return "echo"
    copied = len(plain) >= MIN_COPY_CHARS and instructions
    if copied and _copied_share(plain, _normalised(instructions)) >= ECHO_SHARE:
        return "echo"
    return None


ECHO_SHARE = 0.6  # of a reply's 8-character pieces found in its instructions: a copy of them
# a shorter reply may well be a phrase the instructions asked for: "(not from the library) 42"
MIN_COPY_CHARS = 40
_PIECE = 8


def _copied_share(text: str, source: str) -> float:
    pieces = [text[i : i + _PIECE] for i in range(0, max(len(text) - _PIECE + 1, 0), 2)]
    return sum(p in source for p in pieces) / len(pieces) if pieces else 0.0


def _normalised(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0
