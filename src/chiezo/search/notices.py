"""What a search says about how it was made: short notes carried as codes with parameters.

A ``Notice`` *is* its English sentence (a ``str``, so every consumer of ``notes`` keeps working)
and also carries ``code`` and ``params``, so the web UI can say it in Japanese and a program can
act on it without parsing prose. A search over many sources merges notices of the same code into
one line naming the sources (``merge``), instead of one line per source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# code: (Japanese, English); {name} are parameters, lists are joined
MESSAGES: dict[str, tuple[str, str]] = {
    "many_matches": (
        "{n}件を超える文書が該当するため、よく読まれている{n}件から順位を付けました",
        "more than {n} documents match: the {n} most popular were ranked",
    ),
    "common_terms": (
        "ありふれた語（{terms}）は順位付けに使っていません",
        "very common terms ({terms}) are not weighed",
    ),
    "short_terms": (
        "2文字以下の語は、タイトルが「{term}」で始まる文書を先に、本文に含む文書を後に並べています",
        "terms under 3 characters: titles starting with {term!r} first, then documents containing it",
    ),
    "partial_match": (
        "すべての語を含む文書はないため、特徴的な語を多く含む文書を表示しています",
        "no document contains every term: documents sharing its most distinctive words are shown",
    ),
    "auto_by_name": (
        "検索語が文書名そのものなので、キーワードだけで検索しました（mode=auto）",
        "the query is a document's title: searched by words alone (mode=auto)",
    ),
    "semantic_timeout": (
        "意味検索が時間内に終わらなかったため、キーワード検索の結果のみです",
        "search by meaning took longer than its budget: keyword results only",
    ),
    "fusion": (
        "ハイブリッド: {fusion}で融合、キーワードの重み {weight}",
        "hybrid: {fusion} fusion, keyword weight {weight}",
    ),
    "by_distance": (
        "関連度の上位{n}件を距離の近い順に並べています",
        "the first {n} by relevance, ordered by distance",
    ),
    "near_place": (
        "「{asked}」の地点: {place}（{level}、{source}）",
        "near {asked}: the point of {place} ({level}, from {source})",
    ),
    "near_here": (
        "距離はあなたの現在地からの直線距離です（道のりではありません）",
        "distances are straight-line from your current location, not by road or on foot",
    ),
    "here_coarse": (
        "現在地の精度は±{accuracy_m}mで、半径{radius_km}kmに比べて粗いため、境界付近の結果は不確かです",
        "your location is known to ±{accuracy_m} m, coarse for a {radius_km} km radius: "
        "results near its edge are uncertain",
    ),
    "none_within": (
        "この図書館には、半径{radius_km}km以内に条件に合うものは登録されていません"
        "（存在しないという意味ではありません）",
        "none registered in this library within {radius_km} km (which does not mean none exist)",
    ),
    "left_out": (
        "{sources}は条件を満たせないため検索しませんでした: {reason}",
        "{sources}: not searched, {reason}",
    ),
    "not_in_default": (
        "{sources}は既定の検索対象外です（source= で名前を指定すると検索します）",
        "not searched by default: {sources} (name them with source= to search them)",
    ),
    "no_vectors": (
        "{sources}にはベクトルがないため、キーワードで検索しました",
        "{sources}: no vectors, searched by keyword",
    ),
    "source_timeout": (
        "{sources}は時間内に終わらず、結果に含まれていません",
        "{sources}: timed out; its results are missing",
    ),
    "source_unavailable": (
        "{sources}のサーバーが応答せず、結果に含まれていません（{reason}）",
        "{sources}: its server did not answer ({reason}); its results are missing",
    ),
    "facets_timeout": (
        "{sources}のファセットは時間内に数えきれませんでした",
        "{sources}: facets not counted in time",
    ),
    "no_word_index": (
        "{sources}は単語索引より前に作られています。再構築すると単語でも検索できます",
        "{sources} predate the word index: rebuild them to search by words as well",
    ),
    "no_such_tag": (
        "タグ「{tag}」を持つ文書はありません{similar}",
        "no document has the tag {tag!r}{similar}",
    ),
    "no_such_value": (
        "{name}={values} の文書はありません{similar}",
        "no document has {name}={values}{similar}",
    ),
    "no_value_in_range": (
        "{name}{op}{bound} の文書はありません（値の範囲: {low}〜{high}）",
        "no document has {name}{op}{bound} (its values run from {low} to {high})",
    ),
    "total_at_least": (
        "数えきれないほど該当します（少なくとも{total}件）",
        "more matches than were counted: total is at least {total}",
    ),
}
_SEPARATOR = ("、", ", ")
# the notes a search across sources shows without explain: about a source, not about a plan
ABOUT_SOURCES = frozenset(
    {
        "semantic_timeout",
        "source_timeout",
        "source_unavailable",
        "facets_timeout",
        "no_vectors",
        "no_word_index",
        "by_distance",
        "near_place",
        "near_here",
        "here_coarse",
        "none_within",
        "not_in_default",
        "left_out",
        "no_such_tag",  # a condition the user can correct, in the sources that have the kind
        "no_such_value",
        "no_value_in_range",
    }
)


class Notice(str):
    """A note: its English text, plus ``code`` and ``params``."""

    code: str
    params: dict[str, Any]

    def __new__(cls, code: str, **params: Any) -> Notice:
        text = _render(code, params, 1)
        made = super().__new__(cls, text)
        made.code, made.params = code, params
        return made

    def text(self, language: str = "en") -> str:
        return _render(self.code, self.params, 0 if language == "ja" else 1)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "params": self.params, "text": str(self)}

    # immutable: copies (dataclasses.asdict deep-copies) and pickles keep code and params
    def __deepcopy__(self, memo: dict[int, Any]) -> Notice:
        return self

    def __reduce__(self):
        return (_rebuild, (self.code, self.params))


def _rebuild(code: str, params: dict[str, Any]) -> Notice:
    return Notice(code, **params)


def _render(code: str, params: dict[str, Any], language: int) -> str:
    shown = {}
    for name, value in params.items():
        if isinstance(value, list | tuple):
            value = _SEPARATOR[language].join(str(v) for v in value)
        elif isinstance(value, int) and not isinstance(value, bool):
            value = f"{value:,}"
        shown[name] = value
    if code == "no_such_tag" or code == "no_such_value":
        similar = params.get("similar") or []
        lead = ("。似たもの: ", "; similar: ")[language]
        shown["similar"] = lead + _SEPARATOR[language].join(similar) if similar else ""
    template = MESSAGES[code][language]
    if "sources" in shown and "{sources}" not in template:  # merged across sources
        template += "（{sources}）" if language == 0 else " ({sources})"
    return template.format_map(_Missing(shown))


class _Missing(dict):
    """A parameter a notice was made without reads as empty, never as an error."""

    def __missing__(self, key: str) -> str:
        return ""


def merge(per_source: Mapping[str, Iterable[str]]) -> list[str]:
    """One line per code for a search over several sources: the notices of every source, those
    of the same code (and parameters) joined into one that names the sources; plain strings are
    kept, prefixed with their source."""
    merged: dict[tuple, tuple[Notice, list[str]]] = {}
    plain: list[str] = []
    for source, notes in per_source.items():
        for note in notes:
            if not isinstance(note, Notice):
                plain.append(f"{source}: {note}")
                continue
            same = {k: v for k, v in note.params.items() if k != "sources"}
            key = (note.code, repr(sorted(same.items())))
            merged.setdefault(key, (note, []))[1].append(source)
    out: list[str] = []
    for note, sources in merged.values():
        params = {**note.params, "sources": sorted({*note.params.get("sources", []), *sources})}
        out.append(Notice(note.code, **params))
    return out + plain
