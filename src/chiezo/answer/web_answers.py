"""rag's answer from the web, when the library has no basis and the person turned it on
(``--web``, ``CHIEZO_ANSWER_WEB``): the configured web search's results become the numbered
sources, each its URL and source ``web``, and the answer says its basis is the web.

A web result is a weaker kind of reference than a document of the library: a title and a
snippet of a page nobody here read whole. So the model is told what it reads, the answer ends
saying where it comes from, a reference says ``kind: web``, and such an answer is never
counted as grounded in the library (``Answer.grounded``; ``--strict`` refuses it) — its claims
are checked against the snippets all the same (``web_supported``).
"""

from __future__ import annotations

from chiezo.answer.excerpt import Excerpt
from chiezo.answer.lookups import Lookups
from chiezo.answer.websearch import WEB
from chiezo.core.errors import ChiezoError
from chiezo.core.textnorm import language_of

LIBRARY = "library"
RESULTS = 5  # web results read: a page of an engine's best, as many as the library's excerpts

WEB_PROMPT = """Answer the question using ONLY the numbered web search results below (titles
and snippets of web pages, not the library).
- Cite every fact with its result number in square brackets, like [1] or [2].
- If the results do not contain the answer, say that they do not say.
- Answer briefly, in the language of the question."""

# What a web-based answer ends with: said in the answer itself, so that no reader of the text
# alone (a CLI pipe, a chat transcript) takes it for the library's.
SAID = {
    "ja": "（ライブラリには根拠がなく、この回答はウェブ検索の結果に基づきます。）",
    "en": "(The library had no basis: this answer rests on web search results.)",
}


def excerpts(lookups: Lookups, question: str) -> tuple[list[Excerpt], list[str]]:
    """The web's results for ``question`` as numbered excerpts, and what to warn: the basis
    said, or why the web gave none (its failure is a warning: the fixed reply stands)."""
    try:
        found = lookups.web(question, RESULTS)
    except ChiezoError as exc:
        return [], [f"the web search failed: {exc.message}"]
    out = [
        Excerpt(n, WEB, 0, r.title, r.url, r.snippet or r.title, cite=r.url)
        for n, r in enumerate(found, 1)
    ]
    if not out:
        return [], ["the web search found nothing either"]
    return out, [
        f"the library had no basis: the answer rests on {len(out)} web search results "
        "(source web), not on the library"
    ]


def footer(question: str) -> str:
    return SAID[language_of(question)]
