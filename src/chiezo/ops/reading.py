"""The reading operations: one document (``doc``), and the lists that lead to one — titles by
prefix, tags, features, a document's links."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chiezo.core.validation import check_id, check_length, checked_text
from chiezo.ops import browse
from chiezo.ops.context import Context
from chiezo.ops.lookups import LibraryLookups, read_document
from chiezo.ops.requests import (
    CountsRequest,
    DocRequest,
    FeaturesRequest,
    LinksRequest,
    TagsRequest,
    TitlesRequest,
    check_question,
)
from chiezo.search.lookup import find_doc


@checked_text
def doc(ctx: Context, request: DocRequest) -> dict[str, Any]:
    """One document. With ``question``, its ``body`` is the passages that best answer it
    (answer/passages.py: what ``ask`` reads of it), within ``max_chars`` (default: the
    answer budget), in the document's order, and ``answer_sentences`` the few sentences of
    them likeliest to answer it (answer/sentences.py), best first."""
    question, max_chars = request.question, request.max_chars
    check_lookup(request.title, request.key, request.doc_id)
    if question is not None:
        check_question(question)
    out, found, alternatives = read_document(
        ctx,
        request.source,
        title=request.title,
        doc_id=request.doc_id,
        key=request.key,
        fields=request.fields,
        max_chars=None if question else max_chars,
    )
    if question and "body" in out:
        budget = ctx.settings.answer_budget if max_chars is None else max_chars
        _answering_passages(ctx, out, request.source, found, question, budget)
        if max_chars is not None:
            browse.fit_lists(out, max_chars)
    if alternatives:
        out["alternatives"] = alternatives
    return out


def _answering_passages(
    ctx: Context, out: dict[str, Any], source: str, doc_id: int, question: str, budget: int
) -> None:
    from chiezo.answer.excerpt import Excerpt, excerpt_text
    from chiezo.answer.passages import Found, choose
    from chiezo.answer.sentences import answer_sentences

    # the source and id as found, not from ``out``: ``fields`` may have left them out
    hit = Found(source, doc_id, out.get("title", ""))
    chosen = choose(LibraryLookups(ctx), [hit], question, budget)
    out["body"] = excerpt_text(chosen[0].chosen) if chosen else ""
    if chosen:  # the sentences of those passages that answer it, best first (no model)
        document = chosen[0]
        excerpt = Excerpt(1, source, doc_id, document.title, None, out["body"],
                          aliases=document.aliases, passages=document.chosen)  # fmt: skip
        out["answer_sentences"] = [{"text": s.text} for s in answer_sentences(question, [excerpt])]
    out["passages_for"] = question  # the body is what answers it, not the document's start
    out["truncated"] = len(out["body"]) < out["body_chars"]


@checked_text
def titles(ctx: Context, request: TitlesRequest) -> dict[str, Any]:
    check_length(request.prefix, "prefix")
    src, deadline = ctx.read(request.source, "titles")
    with deadline:
        return browse.titles_by_prefix(src, request.prefix, request.limit)


@checked_text
def tags(ctx: Context, request: TagsRequest) -> dict[str, Any]:
    return _counted(ctx, request, "tags", browse.list_tags)


@checked_text
def features(ctx: Context, request: FeaturesRequest) -> dict[str, Any]:
    return _counted(ctx, request, "features", browse.list_features)


@checked_text
def links(ctx: Context, request: LinksRequest) -> dict[str, Any]:
    title, doc_id, key = request.title, request.doc_id, request.key
    check_lookup(title, key, doc_id)
    src, deadline = ctx.read(request.source, "links")
    with deadline:
        found, _ = find_doc(src, title=title, doc_id=doc_id, key=key)
        return browse.list_links(
            src, found, direction=request.direction, limit=request.limit, offset=request.offset
        )


Lister = Callable[..., dict[str, Any]]


def _counted(ctx: Context, request: CountsRequest, what: str, lister: Lister) -> dict[str, Any]:
    """A page of one source's names with their document counts (tags, features)."""
    check_length(request.prefix, "prefix")
    check_length(request.contains, "contains")
    src, deadline = ctx.read(request.source, what)
    with deadline:
        return lister(
            src,
            prefix=request.prefix,
            contains=request.contains,
            limit=request.limit,
            offset=request.offset,
        )


def check_lookup(title: str | None, key: str | None, doc_id: int | None) -> None:
    check_length(title, "title")
    check_length(key, "key")
    if doc_id is not None:
        check_id(doc_id, "document")
