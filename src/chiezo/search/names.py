"""Names in questions: a phrase of a question that is a document's title stands for it.

"Ray Charles" puts the article Ray Charles first (the title-exact rule, fts.py), but "Who was
Ray Charles?" is no title: bm25 then prefers the short documents whose *titles* hold both words
("Ray Charles discography", the albums) over the long article about him, which came 9th
(docs/design.md §38). Here a question is read for the phrases in it that equal a title or an
alias of the source, and the documents the question is *about* by name are returned for the
keyword side to lead with, as it leads with a title equal to the whole query.

* **Phrases** are runs of the question's tokens — words of spaced scripts, Sudachi's longest
  units of Japanese (so 京都 is never found inside 東京都, nor 哲学 inside 哲学者) — up to
  ``MAX_SPAN`` of them, all looked up in one query of the ``titles`` index. The longest wins: a
  run inside a longer one that names a document is no name of its own ("Ray Charles" in "Ray
  Charles Live"), and a longer title that only *contains* the phrase ("Ray Charles
  discography") is never named by it. A phrase that is no title but the start of exactly one
  title "phrase (qualifier)" names that one ("Who directed Ray?" → "Ray (film)").
* **Not names**: runs of stop words, particles or light words only ("What", "The", 「何」),
  one character; a title of several documents (the paragraphs of one article); a Japanese
  run written against a noun (伊能忠敬 in 伊能忠敬記念館). In a question written with capitals,
  a Latin run must begin and end with a capitalised word, and the opening word alone is none:
  its capital is the sentence's ("Tell me about …" where "Tell" is a title).
* **About it**: a name leads only when it holds at least ``LEAD_SHARE`` of the question's
  content words — "Who was Ray Charles?" 2 of 2, "When did Ray Charles die?" 2 of 3 — and not
  where it describes what is asked for: "Which Ray Charles album was recorded at Newport in
  1958?" 2 of 7, 「ウィーンを首都とする中央ヨーロッパの国は？」.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from chiezo.core import db
from chiezo.core.textnorm import normalise_title
from chiezo.core.words import STOP_WORDS, light_words

MAX_SPAN = 10  # tokens in a phrase: the longest titles of the test ZIMs have 9 words
MAX_TOKENS = 64  # tokens of a question read for names (a question, not a passage)
# A name leads when its words are at least this share of the question's content words (see
# the module's docstring; 0.25–1.0 measured in docs/design.md §38, item 6).
LEAD_SHARE = 0.5
_JAPANESE = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]+"
)
_SPACED_TOKEN = re.compile(r"\S+")
# Punctuation around a word that is not part of it: quotes, brackets, sentence marks
_EDGE = "\"'“”‘’«»()[]{}<>¿¡?.,;:!、。，．？！「」『』（）【】・…"
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$")


@dataclass(frozen=True)
class Token:
    start: int  # offsets in the NFKC form of the question
    end: int
    text: str
    japanese: bool
    weak: bool  # a stop word, particle, auxiliary or light word: never a name alone
    # what a question is about is said by its nouns: in Japanese a verb or adjective (教える,
    # the つく of について, ある) frames the question, so only nouns count toward a name's share;
    # every word of a spaced script does (no parts of speech at hand; stop words are weak)
    content: bool = True


@dataclass(frozen=True)
class Name:
    """A phrase of the question and the one document whose title or alias it is."""

    phrase: str
    first: int  # token positions, inclusive
    last: int
    doc_id: int


def leading_documents(conn: db.Connection, text: str) -> list[int]:
    """The documents ``text`` asks about by name: those named by a phrase (question_names)
    that holds at least ``LEAD_SHARE`` of the question's content tokens."""
    nfkc = unicodedata.normalize("NFKC", text)
    tokens = _tokens(nfkc)[:MAX_TOKENS]
    names = _names(conn, nfkc, tokens)
    if not names:
        return []
    inside = {i for n in names for i in range(n.first, n.last + 1)}
    # a name's words count whatever they are (the title 「飲む」 is a verb)
    content = [i for i, t in enumerate(tokens) if not t.weak and (t.content or i in inside)]
    return [
        name.doc_id
        for name in names
        if sum(1 for i in content if name.first <= i <= name.last) >= LEAD_SHARE * len(content)
    ]


def question_names(conn: db.Connection, text: str) -> list[Name]:
    """The names in ``text``, in the order they occur: the longest phrases that are titles or
    aliases of one document of the source ``conn`` holds, none inside another."""
    nfkc = unicodedata.normalize("NFKC", text)
    return _names(conn, nfkc, _tokens(nfkc)[:MAX_TOKENS])


def _names(conn: db.Connection, nfkc: str, tokens: list[Token]) -> list[Name]:
    spans = _candidate_spans(nfkc, tokens)
    if not spans:
        return []
    forms = {form for found in spans.values() for form in found}
    titled = _titled(conn, forms)
    qualified = _qualified(conn, forms - set(titled))
    names: list[Name] = []
    taken: set[int] = set()
    # longest first: a name inside a longer one is that one's part, not a name of its own
    for (first, last), found in sorted(spans.items(), key=lambda s: (s[0][0] - s[0][1], s[0][0])):
        if taken & set(range(first, last + 1)):
            continue
        doc_id = _named_by(found, titled, qualified)
        if doc_id is not None:
            names.append(Name(found[0], first, last, doc_id))
            taken.update(range(first, last + 1))
    return sorted(names, key=lambda n: n.first)


def _tokens(nfkc: str) -> list[Token]:
    """Words of spaced scripts, trimmed of the punctuation around them, and Sudachi's
    morphemes of Japanese runs, with their offsets in ``nfkc``."""
    out: list[Token] = []
    position = 0
    for run in _JAPANESE.finditer(nfkc):
        out += _spaced_tokens(nfkc, position, run.start())
        out += _japanese_tokens(nfkc, run.start(), run.end())
        position = run.end()
    out += _spaced_tokens(nfkc, position, len(nfkc))
    return out


def _spaced_tokens(text: str, begin: int, end: int) -> list[Token]:
    out = []
    for match in _SPACED_TOKEN.finditer(text, begin, end):
        word = match.group(0)
        lead = len(word) - len(word.lstrip(_EDGE))
        trail = len(word.rstrip(_EDGE))
        if trail <= lead:
            continue  # punctuation alone ("+", "&", "-"): kept inside a phrase, never its end
        start, stop = match.start() + lead, match.start() + trail
        core = text[start:stop]
        folded = core.casefold()
        weak = folded in STOP_WORDS or not any(c.isalnum() for c in core)
        out.append(Token(start, stop, core, False, weak))
    return out


def _japanese_tokens(text: str, begin: int, end: int) -> list[Token]:
    """Sudachi's longest units (split mode C): a name is a whole word, so 哲学 is no name in
    「エチカを書いた哲学者は？」 (mode A splits 哲学/者 and named the article 哲学 there) and
    東京 none in 東京都庁."""
    from sudachipy import SplitMode

    from chiezo.core.words import _sudachi  # one tokenizer per thread, shared with the index

    tokenizer, dropped = _sudachi()
    run = text[begin:end]
    light = light_words(run)  # 何, 一番, ある: no evidence of what is asked
    out = []
    for morpheme in tokenizer.tokenize(run, SplitMode.C):
        surface = morpheme.surface()
        if not surface.strip():
            continue
        weak = dropped(morpheme) or morpheme.normalized_form().casefold() in light
        start = begin + morpheme.begin()
        noun = morpheme.part_of_speech()[0] == "名詞"
        out.append(Token(start, start + len(surface), surface, True, weak, noun))
    return out


def _candidate_spans(nfkc: str, tokens: list[Token]) -> dict[tuple[int, int], list[str]]:
    """(first, last) token positions → the forms of that phrase to look up (normalised as
    titles are), for every phrase that could be a name."""
    cased = _has_case(tokens)
    spans: dict[tuple[int, int], list[str]] = {}
    for first, head in enumerate(tokens):
        if head.japanese and head.weak:
            continue  # no title starts with a particle or an auxiliary
        if cased and not head.japanese and not _capital(head):
            continue
        strong = False  # whether the run holds a word that is not weak
        for last in range(first, min(first + MAX_SPAN, len(tokens))):
            strong = strong or not tokens[last].weak
            if (
                strong
                and _could_end(tokens, first, last, cased)
                and not _compound(tokens, first, last)
            ):
                spans[(first, last)] = _forms(nfkc, tokens[first : last + 1])
    return spans


def _could_end(tokens: list[Token], first: int, last: int, cased: bool) -> bool:
    """Whether the run from ``first`` (not weak alone: "What", "The", 「は」, 「何」 are titles
    too, but never what a question names) may end at ``last``."""
    if first == last and len(tokens[first].text) < 2:
        return False
    if not cased:
        return True
    if first == last == 0 and not tokens[0].japanese:
        return False  # "Tell me about …": the first word's capital is the sentence's
    return tokens[last].japanese or _capital(tokens[last])


def _compound(tokens: list[Token], first: int, last: int) -> bool:
    """Whether the run is part of a Japanese compound noun: a noun written against it on
    either side. 伊能忠敬 in 「伊能忠敬記念館があるのは何県ですか」 names the museum's
    namesake, not what is asked (JaQuAD train articles: the article led, the answer went from
    1st to 2nd); ヨーロッパ in 「中央ヨーロッパの国は？」 likewise."""
    before = tokens[first - 1] if first > 0 else None
    after = tokens[last + 1] if last + 1 < len(tokens) else None
    return bool(
        (before and _noun(before) and before.end == tokens[first].start)
        or (after and _noun(after) and after.start == tokens[last].end)
    )


def _noun(token: Token) -> bool:
    return token.japanese and token.content and not token.weak


def _capital(token: Token) -> bool:
    head = token.text[0]
    return head.isupper() or head.isdigit() or not head.isalpha()


def _has_case(tokens: list[Token]) -> bool:
    """Whether capitals in the question tell names from words: its spaced-script words hold
    both capitals and small letters ("Who was Ray Charles?", "Tell me what a discography
    is"), unlike "who was ray charles" or "WHO WAS RAY CHARLES", where any word may be one."""
    letters = [c for t in tokens if not t.japanese for c in t.text if c.isalpha()]
    return any(c.isupper() for c in letters) and any(c.islower() for c in letters)


def _forms(nfkc: str, run: list[Token]) -> list[str]:
    phrase = nfkc[run[0].start : run[-1].end]
    forms = [normalise_title(phrase)]
    if not run[-1].japanese:
        plain = _POSSESSIVE.sub("", phrase)  # "Ray Charles's" → "Ray Charles"
        if plain != phrase and plain.strip():
            forms.append(normalise_title(plain))
        # a title that ends in punctuation of its own: "Yes Indeed!", "What'd I Say?"
        tail = nfkc[run[-1].end : run[-1].end + 1]
        if tail in "!?":
            forms.append(normalise_title(phrase + tail))
    return list(dict.fromkeys(f for f in forms if f))


def _titled(conn: db.Connection, forms: set[str]) -> dict[str, list[int]]:
    """Each of ``forms`` that is a title or alias → its documents: one query of the
    ``titles`` index for a whole question (a form has as many rows as documents it names)."""
    found: dict[str, list[int]] = {}
    ordered = sorted(forms)
    for start in range(0, len(ordered), 500):
        part = ordered[start : start + 500]
        marks = ",".join("?" * len(part))
        for norm, doc_id in conn.execute(
            f"SELECT norm, doc_id FROM titles WHERE norm IN ({marks}) ORDER BY norm, doc_id", part
        ):
            found.setdefault(norm, []).append(doc_id)
    return found


def _named_by(
    forms: list[str], titled: dict[str, list[int]], qualified: dict[str, list[int]]
) -> int | None:
    """The one document a phrase (in any of its ``forms``) is the title of, else the one it
    is the qualified title of; None where it names none or several."""
    for form in forms:
        if form in titled:
            ids = titled[form]
            return ids[0] if len(ids) == 1 else None
    for form in forms:
        if len(qualified.get(form, ())) == 1:
            return qualified[form][0]
    return None


def _qualified(conn: db.Connection, forms: set[str]) -> dict[str, list[int]]:
    """Each of ``forms`` → the documents titled "form (qualifier)": one query, a range of the
    ``titles`` index per form. A form names such a document only where it is the one
    (_named_by): not "Crying Time" → "Crying Time (album)" beside the song, nor two songs."""
    out: dict[str, list[int]] = {}
    ordered = sorted(forms)
    for start in range(0, len(ordered), 500):
        part = ordered[start : start + 500]
        values = ",".join(["(?)"] * len(part))
        rows = conn.execute(
            f"WITH asked(form) AS (VALUES {values}) "
            "SELECT DISTINCT asked.form, titles.doc_id FROM asked JOIN titles "
            "ON titles.norm >= asked.form || ' (' AND titles.norm < asked.form || ' (' || ? "
            "WHERE substr(titles.norm, -1) = ')'",
            (*part, "\U0010ffff"),
        )
        for form, doc_id in rows:
            out.setdefault(form, []).append(doc_id)
    return out
