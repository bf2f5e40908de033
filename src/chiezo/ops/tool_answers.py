"""What a model reads back from a tool: the result written compactly, without the fields only
programs use, and within the ``max_chars`` the call gave.

Measured without it (bench/mcp_sizes.py on the jawiki excerpt): ``search`` answered 5,457
characters whatever ``max_chars`` said, 13 % of it the SDK's ``indent=2``, every hit carrying
``key``, ``score`` and ``rank_score`` — and a model with a 2k–4k context reads every character
of every result on every later step. So a tool answer here is:

* compact JSON (no indentation, no ASCII escapes: a Japanese title costs its characters);
* without :data:`PROGRAM_FIELDS` at the two levels a model reads (the result, the items of its
  lists) — REST keeps them, for programs;
* within ``max_chars`` *as a whole*, the text a model reads: the lists lose items from their
  end (the best come first), then the longest texts are cut, and what was left out says how to
  read on — ``more: {"hits": "offset=7"}`` for a paged list, ``<name>_total`` and a larger
  ``max_chars`` otherwise. A list keeps one item before any text is cut: one hit with a short
  snippet tells a model more than five titles with none, and one hit with its name alone more
  than none — an agent with no hit has nothing to cite;
* with urls written as a browser shows them (ops/links.py ``readable``): ``…/wiki/日本語``, not
  ``…/wiki/%E6%97%A5%E6%9C%AC%E8%AA%9E``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chiezo.ops.links import readable

MIN_CHARS = 200  # the smallest answer that still holds one hit and how to read on
MAX_CHARS = 200_000  # about a 64k-token context's worth: more is no budget at all
# fields of a result (and of the items of its lists) that programs use and a model does not:
# the source's own key (doc_id names a document), scores and their ranks, the full-text plan's
# name and the retrieval that ran (the notes say what a model must know of either), the notes
# again as codes, the query and page size the model sent itself, the stored address behind
# the openable url, a document's build metadata
PROGRAM_FIELDS = frozenset(
    {"key", "score", "rank_score", "notices", "mode", "retrieval", "query", "limit",
     "total_is_lower_bound", "source_url", "extra"}
)  # fmt: skip
# fields that say something only when they hold something (a search's notes, most often none)
QUIET_WHEN_EMPTY = frozenset({"notes"})
# what names an item of a list: the last of it kept before the item goes (a hit's url, point,
# section or distance go first — the title still says what was found, and doc reads it)
NAMES_AN_ITEM = frozenset({"source", "doc_id", "title", "n", "id", "name"})
# ... and how far it is, kept with its name: a place around the person without its distance
# (cut for a 2,048-token context) could be neither ranked nor said to be a straight line away
KEPT_OF_AN_ITEM = NAMES_AN_ITEM | {"distance_km"}
# texts that name or locate something: cut, they would say something else
WHOLE_TEXTS = frozenset({"source", "title", "url", "doc_id", "key", "cite", "more"})
CUT = "…"
BRIEF_MORE = "a larger max_chars"
MIN_CUT = 40  # a shorter text (a name, a word like "relevance") cut says nothing or garbles
# room kept for the ``more``/``_total``/``truncated`` marks a cut adds, so one pass fits
MARK_ROOM = 80
TRUNCATED = len(',"truncated":true')  # what the first text cut adds


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def for_a_model(
    result: dict[str, Any], asked: Iterable[str] = (), pages: str | None = None
) -> dict[str, Any]:
    """``result`` without :data:`PROGRAM_FIELDS`, but for the fields the call ``asked`` for by
    name (``fields=["key"]``), and ``total_is_lower_bound`` when true (then ``total`` is a
    floor, which a model must know); without :data:`QUIET_WHEN_EMPTY` fields that hold
    nothing, unless that is the list the tool ``pages`` (recall's notes: none found says
    something); each ``url`` :func:`readable`."""
    dropped = PROGRAM_FIELDS - set(asked)

    def wanted(name: str, value: Any) -> bool:
        if name in QUIET_WHEN_EMPTY and not value and name != pages:
            return False
        return name not in dropped or (name == "total_is_lower_bound" and value is True)

    def lean(name: str, value: Any) -> Any:
        if name == "url" and isinstance(value, str):
            return readable(value)
        if not isinstance(value, list):
            return value
        return [
            {k: lean(k, v) for k, v in i.items() if wanted(k, v)} if isinstance(i, dict) else i
            for i in value
        ]

    return {k: lean(k, v) for k, v in result.items() if wanted(k, v)}


def fitted(
    result: dict[str, Any],
    max_chars: int,
    *,
    pages: str | None = None,
    offset: int | None = None,
) -> str:
    """``result`` as compact JSON of at most ``max_chars`` characters. ``pages``: the list the
    tool pages with ``offset`` (cut short, ``more`` names the next offset); other lists cut
    short say their ``<name>_total``."""
    out = dict(result)
    text = compact(out)
    paging = (pages, offset) if pages is not None and offset is not None else None
    # The other lists emptied and the paged one down to one item, texts down to a quarter of
    # the budget; then the ways to read on said briefly, texts cut to nothing, the paged list
    # emptied: a document keeps some of its body before its last tag (one tag or link says
    # nothing), a search its first hit before the sources it searched.
    primary = pages if pages in out else None
    text = _fit_lists(out, text, max_chars, paging, 1, primary)
    text = _fit_texts(out, text, max_chars, max_chars // 4)
    if len(text) > max_chars:
        text = _fit_texts(out, _brief_more(out), max_chars, 0)
        text = _named_only(out, text, max_chars, primary)
        text = _unmarked(out, text, max_chars, primary)
        text = _without_echoes(out, text, max_chars, primary)
        text = _fit_lists(out, text, max_chars, paging, 0, primary)
    return text if len(text) <= max_chars else _bare(out, max_chars)


def _named_only(out: dict, text: str, max_chars: int, primary: str | None) -> str:
    """The paged list's items down to what names them (:data:`NAMES_AN_ITEM`) when that is
    what fits: at 250 characters a Japanese hit's url alone (57 characters encoded) left no
    room for the hit, and a model with no hit has nothing to read on from or cite."""
    items = out.get(primary) if primary else None
    if len(text) <= max_chars or not isinstance(items, list):
        return text
    out[primary] = [
        {k: v for k, v in i.items() if k in KEPT_OF_AN_ITEM} if isinstance(i, dict) else i
        for i in items
    ]
    out["truncated"] = True
    return compact(out)


# what a result says back of its own request (how it was planned and ordered, the point it was
# made around): the caller knows it, so it goes before the last item does
ECHOES = ("plan", "order", "offset", "near")


def _without_echoes(out: dict, text: str, max_chars: int, primary: str | None) -> str:
    """Without what the result says back of its request when that is what keeps the paged
    list's item: at 245 characters (a 2,048-token context's share) a filter around the
    person's location kept its ``near`` statement (~130 characters) and no place at all."""
    if len(text) <= max_chars or primary is None:
        return text
    for name in ECHOES:
        out.pop(name, None)
    out["truncated"] = True
    return compact(out)


def _unmarked(out: dict, text: str, max_chars: int, primary: str | None) -> str:
    """Without the marks of the other lists' cuts (their ``_total``, their ``more``) when
    that is what keeps the paged list's item: ``truncated`` still says something is left out,
    and a hit is worth more than knowing a search's note was."""
    if len(text) <= max_chars or primary is None:
        return text
    more = out.get("more")
    if isinstance(more, dict):
        kept = {k: v for k, v in more.items() if k == primary}
        if kept:
            out["more"] = kept
        else:
            del out["more"]
    for name in [k for k in out if k.endswith("_total")]:
        if name.removesuffix("_total") not in out:
            del out[name]
    out["truncated"] = True
    return compact(out)


def _brief_more(out: dict) -> str:
    more = out.get("more")
    if isinstance(more, dict):
        out["more"] = {k: v if v.startswith("offset=") else BRIEF_MORE for k, v in more.items()}
    return compact(out)


def _fit_lists(
    out: dict,
    text: str,
    max_chars: int,
    paging: tuple[str, int] | None,
    keep: int,
    primary: str | None,
) -> str:
    spared: set[str] = set()  # lists shorter than the marks their cut would add
    while len(text) > max_chars:
        name = _longest(out, keep, primary, spared)
        if name is None:
            break
        keep_here = keep if name == primary else 0
        value = out[name]
        items = list(value.items()) if isinstance(value, dict) else value
        over = len(text) - max_chars + MARK_ROOM
        kept = len(items)
        while kept > keep_here and over > 0:
            kept -= 1
            over -= len(compact(items[kept])) + 1
        before = dict(out)
        _say_cut(out, name, len(items), kept, paging)
        if kept or name == primary:
            out[name] = dict(items[:kept]) if isinstance(value, dict) else items[:kept]
        else:  # its total and how to read it say what it was
            del out[name]
        if len(compact(out)) >= len(text):  # (["jawiki"] is shorter than its total and more)
            out.clear()
            out.update(before)
            spared.add(name)
        text = compact(out)
    return text


def _say_cut(out: dict, name: str, had: int, kept: int, paging: tuple[str, int] | None) -> None:
    said = out.get("more")
    more: dict[str, str] = dict(said) if isinstance(said, dict) else {}
    if paging is not None and paging[0] == name:  # the paged list: its total is the result's
        more[name] = f"offset={paging[1] + kept}"
    else:  # a list the service cut already says how to read on (doc's links: the links tool)
        out.setdefault(f"{name}_total", had)
        more.setdefault(name, BRIEF_MORE)
    out["more"] = more


def _fit_texts(out: dict, text: str, max_chars: int, floor: int) -> str:
    for _ in range(16):  # each pass cuts the longest text left by what is still over
        if len(text) <= max_chars:
            break
        place = _longest_text(out, floor)
        if place is None:
            break
        holder, name = place
        over = len(text) - max_chars + len(CUT) + (0 if out.get("truncated") else TRUNCATED)
        holder[name] = holder[name][: max(len(holder[name]) - over, floor)] + CUT
        out["truncated"] = True
        text = compact(out)
    return text


def _longest(out: dict, keep: int, primary: str | None, spared: set[str]) -> str | None:
    """The name of the result's longest list (or mapping of lists, as a doc's attributes)
    that can lose items: the ``primary`` one down to ``keep``, the others to none; never
    ``more``, which says what was cut, nor a mapping of values (a point), which cut would
    say something else."""
    found = [
        (len(compact(v)), k)
        for k, v in out.items()
        if _listing(v) and len(v) > (keep if k == primary else 0) and k not in spared
    ]
    return max(found)[1] if found else None


def _listing(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(v, list) for v in value.values())
    return isinstance(value, list)


def _longest_text(out: dict, floor: int) -> tuple[dict, str] | None:
    """(the dict holding it, its name) of the longest text in the result or its lists' items
    that is longer than ``floor`` and worth cutting (never a name or an address)."""
    best: tuple[int, dict, str] | None = None
    holders = [out] + [
        i for v in out.values() if isinstance(v, list) for i in v if isinstance(i, dict)
    ]
    for holder in holders:
        for name, value in holder.items():
            cuttable = (
                isinstance(value, str)
                and len(value) > max(floor + len(CUT), MIN_CUT)
                and name not in WHOLE_TEXTS
            )
            if cuttable and (best is None or len(value) > best[0]):
                best = (len(value), holder, name)
    return (best[1], best[2]) if best else None


def _bare(out: dict, max_chars: int) -> str:
    """What is left when even empty lists and cut texts do not fit: why, then what names the
    answer and the numbers that fit (the totals first: they say how much there is)."""
    bare: dict[str, Any] = {"more": BRIEF_MORE + ": this answer does not fit"}
    named = [(k, out[k]) for k in WHOLE_TEXTS if k in out and k != "more"]
    numbers = [(k, v) for k, v in out.items() if isinstance(v, int | float) and k != "more"]
    numbers.sort(key=lambda kv: not kv[0].endswith("total"))
    for name, value in named + numbers:
        if len(compact({**bare, name: value})) <= max_chars:
            bare[name] = value
    return compact(bare)
