"""A whole jawiki on this machine: build cost, size, query latency and vectors at a jawiki-sized
dump made from the real excerpt, projected to 1.4M articles (issue #33 item 1).

    python bench/jawiki_scale.py                   # 20,000 articles (1/70 of jawiki), ~1 h here
    python bench/jawiki_scale.py --pages 1400000   # the full size, for a bigger machine
    python bench/jawiki_scale.py --pages 2000      # a quick check of the whole path

1. **The dump** — a MediaWiki export (bz2, 100 pages per stream like the real multistream
   dump) resampled from the real ``jawiki-20230501-excerpt``: every article takes a real
   article's wikitext, cut or extended at paragraph boundaries (top-level text of the parse
   tree, so templates, tables and references stay whole) to a length drawn from the real
   article lengths; a new unique title (a real title — an article's or a link target's — plus
   a real disambiguator); its ``[[links]]`` re-pointed at synthetic titles drawn by a Zipf
   popularity (display text kept, so the prose is the real prose); categories as many as the
   real page had, drawn from the real categories' frequency with a Zipf tail of variants.
   Redirects, other namespaces and disambiguation pages keep the excerpt's shares. Seeded,
   streamed (workers make and compress 100 pages at a time; nothing holds the dump).
2. **The build** — ``Context.ingest("wikipedia", dump)`` with default settings, in a child
   process (its peak RSS is its own), into a fresh ``bench/work/jawiki_scale/data``; per phase
   (the builder's progress phases) wall seconds and CPU seconds of the main process and of its
   workers, read from /proc at each phase change.
3. **Sizes** — bytes per table and index (SQLite's ``dbstat``), against the uncompressed XML.
4. **Queries** — ``Context.search`` (keyword) p50/p99 per class, classes drawn from the built
   data: exact title, common word, rare word, two words (AND), a Japanese question made from a
   title, an English word, a common word filtered by a popular or a rare category.
5. **Vectors (synthetic)** — as many as ``chiezo embed`` with default settings makes for this
   build (one per chunk above 200,000 chunks, else sentence units), each a real use-m vector of
   a real excerpt chunk plus Gaussian noise, renormalised, fed through the real embed path
   (``Context.embed`` with a runner — the seam the Ray cluster uses — so the cache,
   ``chunk_vectors``, the usearch index and the calibration are the project's own); then
   hybrid and semantic latency.

Baseline in the same run: the real excerpt built the same way (its CPU per character and
bytes per character against the synthetic dump's). Writes bench/results/jawiki_scale.json.
Timings are of a shared 2-core machine: the CPU other processes used meanwhile is reported.
"""

from __future__ import annotations

import argparse
import bz2
import contextlib
import hashlib
import json
import math
import multiprocessing
import os
import random
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from rich.console import Console
from rich.table import Table

from chiezo.ops import building, searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import SHARED  # noqa: E402

EXCERPT = SHARED / "data/wikipedia/jawiki-20230501-excerpt.xml.bz2"
WORK = HERE / "work" / "jawiki_scale"
FULL_PAGES = 1_400_000
DEFAULT_PAGES = 20_000
TARGET_BYTES = 42e9  # jawiki.db of the design notes (1.5M articles): the size to stay within
STREAM_PAGES = 100  # pages per bz2 stream, as in the real multistream dump
LENGTH_JITTER = 0.25  # sigma of the log-normal factor on a drawn length: not only 183 lengths
CATEGORY_UNIVERSE = 0.25  # distinct categories per article (assumed; the excerpt has 4/article)
VECTOR_NOISE = 0.6  # norm of the noise added to a real vector: cosine to it ≈ 0.86
QUERIES = 200
GENERATOR_VERSION = 2
console = Console(width=150)

# -- the real excerpt -------------------------------------------------------------------------

_CATEGORY = re.compile(
    r"\[\[\s*(?:category|カテゴリ)\s*:\s*([^\[\]|]*?)\s*(?:\|[^\[\]]*)?\]\]", re.I
)
_LINK = re.compile(r"\[\[([^\[\]|\n]*)(\|[^\[\]]*)?\]\]")
_PAREN = re.compile(r" \(([^()]+)\)$")
_GOOD_PAREN = re.compile(r"[^\s\d・()]{1,12}")
_PREFIX = re.compile(r"\s*([^:]{1,40}?)\s*:")
_INTERWIKI = re.compile(r"[a-z][a-z-]{0,11}")
_NS_ALIASES = {"category", "file", "image", "画像", "カテゴリ", "wp", "project", "user",
               "special", "media", "template", "help", "portal", "w", "wikt", "commons"}  # fmt: skip
_MAGIC = re.compile(r"\s*(__[A-Z]+__\s*)*")


@dataclass
class RealArticle:
    title: str
    text: str
    meta: str  # the revision's elements before <text> (id, timestamp, contributor …)
    bounds: list[int]  # paragraph boundaries in the text before the tail (first 0)
    lead_end: int  # index into bounds where the sections begin
    tail: str  # templates and categories after the last paragraph
    categories: list[str]
    disambiguation: bool

    def segments(self, start: int = 0) -> list[str]:
        b = self.bounds
        return [self.text[b[i] : b[i + 1]] for i in range(start, len(b) - 1)]


@dataclass
class Excerpt:
    siteinfo: str
    articles: list[RealArticle]
    redirects: list[str]  # ns0 redirect texts' keywords (#REDIRECT, #転送)
    others: list[tuple[int, str, str]]  # (ns, text, meta) of other namespaces' pages
    other_redirects: list[tuple[int, str]]  # (ns, meta)
    namespaces: dict[int, str]
    titles: list[str]  # real titles for synthetic ones: articles' and link targets'
    parens: list[str]  # real disambiguators, most frequent first
    categories: list[str]  # real category names, most frequent first
    kinds: dict[str, int] = field(default_factory=dict)


def is_article_link(target: str, namespaces: set[str]) -> bool:
    """A ``[[target]]`` into the article namespace (not a file, category, interwiki, section)."""
    t = target.strip()
    if not t or t.startswith((":", "#")):
        return False
    m = _PREFIX.match(t)
    if m:
        prefix = m.group(1).strip()
        if prefix.casefold() in namespaces or _INTERWIKI.fullmatch(prefix):
            return False
    return True


def read_excerpt(seed: int) -> Excerpt:
    """The excerpt's pages through the project's dump reader, each article cut into paragraphs
    at boundaries that leave every template, table, tag and link whole."""
    import mwparserfromhell

    from chiezo.ingest.wikidump import WikiDump
    from chiezo.ingest.wikitext import mediawiki_title

    with bz2.open(EXCERPT, "rt", encoding="utf-8") as fh:
        raw = fh.read()
    siteinfo = raw[: raw.index("</siteinfo>") + len("</siteinfo>")] + "\n"
    metas = re.findall(r"<revision>\n(.*?)      <text", raw, re.S)
    dump = WikiDump(EXCERPT)
    pages = list(dump.pages())
    dump.close()
    assert len(metas) == len(pages), "revision blocks and pages do not line up"
    namespaces = {v.casefold() for v in dump.siteinfo.namespaces.values() if v} | _NS_ALIASES
    articles, redirects, others, other_redirects = [], [], [], []
    targets: dict[str, int] = {}
    for page, meta in zip(pages, metas, strict=True):
        if page.redirect is not None:
            if page.ns == 0:
                redirects.append(page.text.split("[[", 1)[0].strip())
            else:
                other_redirects.append((page.ns, meta))
            continue
        if page.ns != 0:
            others.append((page.ns, page.text, meta))
            continue
        articles.append(_real_article(page, meta, mwparserfromhell))
        for target, _ in _LINK.findall(page.text):
            if is_article_link(target, namespaces):
                name = mediawiki_title(target.split("#", 1)[0])
                targets[name] = targets.get(name, 0) + 1
    paren_counts: dict[str, int] = {}
    for name in [*targets, *(a.title for a in articles)]:
        m = _PAREN.search(name)
        if m and _GOOD_PAREN.fullmatch(m.group(1)):
            paren_counts[m.group(1)] = paren_counts.get(m.group(1), 0) + 1
    plain = {
        t
        for t in [*targets, *(a.title for a in articles)]
        if t and len(t) <= 40 and not re.search(r"[()（）:#/|]", t)
    }
    titles = sorted(plain)
    random.Random(seed).shuffle(titles)
    category_counts: dict[str, int] = {}
    for a in articles:
        for c in a.categories:
            category_counts[c] = category_counts.get(c, 0) + 1
    return Excerpt(
        siteinfo=siteinfo,
        articles=articles,
        redirects=redirects,
        others=others,
        other_redirects=other_redirects,
        namespaces=dict(dump.siteinfo.namespaces),
        titles=titles,
        parens=sorted(paren_counts, key=lambda p: (-paren_counts[p], p)),
        categories=sorted(category_counts, key=lambda c: (-category_counts[c], c)),
        kinds={
            "article": len(articles),
            "redirect": len(redirects),
            "other": len(others),
            "other_redirect": len(other_redirects),
        },
    )


def _real_article(page, meta: str, mw) -> RealArticle:
    from mwparserfromhell.nodes import Comment, Heading, Template, Text, Wikilink

    code = mw.parse(page.text)
    nodes = list(code.nodes)
    starts, pos = [], 0
    for node in nodes:
        starts.append(pos)
        pos += len(str(node))
    # the tail: templates, category links, comments and magic words after the last paragraph
    tail_at = len(nodes)
    while tail_at > 0:
        node = nodes[tail_at - 1]
        is_tail = isinstance(node, Template | Comment) or (
            isinstance(node, Text) and _MAGIC.fullmatch(str(node))
        )
        if isinstance(node, Wikilink):
            is_tail = bool(_CATEGORY.fullmatch(str(node)))
        if not is_tail:
            break
        tail_at -= 1
    tail_start = starts[tail_at] if tail_at < len(nodes) else len(page.text)
    bounds, lead_end = {0}, None
    for node, start in zip(nodes[:tail_at], starts, strict=False):
        if isinstance(node, Heading):
            bounds.add(start)
            lead_end = start if lead_end is None else lead_end
        elif isinstance(node, Text):
            for m in re.finditer(r"\n\n+", str(node)):
                if start + m.end() < tail_start:
                    bounds.add(start + m.end())
    ordered = sorted(b for b in bounds if b < tail_start) + [tail_start]
    if ordered[0] == ordered[-1]:  # no paragraph at all
        ordered = [0, tail_start] if tail_start else [0, len(page.text)]
    first_section = bisect_right(ordered, lead_end) - 1 if lead_end is not None else len(ordered)
    from chiezo.ingest.wikitext import DISAMBIGUATION

    disambiguation = "__DISAMBIG__" in page.text or any(
        str(t.name).strip().casefold() in DISAMBIGUATION for t in code.filter_templates()
    )
    return RealArticle(
        title=page.title,
        text=page.text,
        meta=meta,
        bounds=ordered,
        lead_end=min(max(first_section, 1), len(ordered) - 1),
        tail=_CATEGORY.sub("", page.text[tail_start:]).rstrip() + "\n",
        categories=[c for c in _CATEGORY.findall(page.text) if c],
        disambiguation=disambiguation,
    )


def page_stats(text: str, namespaces: set[str]) -> tuple[int, int]:
    """(article links, category links) of a page's wikitext."""
    links = sum(1 for t, _ in _LINK.findall(text) if is_article_link(t, namespaces))
    return links, len(_CATEGORY.findall(text))


# -- the synthetic dump ---------------------------------------------------------------------------


def _coprime_step(n: int, start: int) -> int:
    step = start % n or 1
    while math.gcd(step, n) != 1:
        step += 1
    return step


class Plan:
    """Which page each index is and what it is called: a pure function of (excerpt, articles,
    seed), so workers make any range of pages without knowing the others."""

    def __init__(self, excerpt: Excerpt, articles: int, seed: int):
        self.x = excerpt
        self.articles = articles
        self.seed = seed
        kinds = excerpt.kinds
        self.total = max(articles, round(articles * sum(kinds.values()) / kinds["article"]))
        self.categories = max(len(excerpt.categories), round(articles * CATEGORY_UNIVERSE))
        self.title_step = _coprime_step(self.total, 2_654_435_761)
        self.rank_step = _coprime_step(self.total, 40_503 * 65_537)
        self.rank_offset = seed * 7919 % self.total
        self.ns_names = {v.casefold() for v in excerpt.namespaces.values() if v} | _NS_ALIASES
        non_article = [
            ("redirect", kinds["redirect"]),
            ("other", kinds["other"]),
            ("other_redirect", kinds["other_redirect"]),
        ]
        weights = sum(w for _, w in non_article)
        self.non_article = [(k, w / weights) for k, w in non_article]
        self.lengths = sorted(len(a.text) for a in excerpt.articles if not a.disambiguation)
        self.donors = [
            a for a in excerpt.articles if not a.disambiguation and a.lead_end < len(a.bounds) - 1
        ]

    def kind(self, i: int) -> str:
        """Exactly ``articles`` articles among ``total`` pages, spread evenly; the rest by share."""
        n, t = self.articles, self.total
        if (i + 1) * n // t > i * n // t:
            return "article"
        u = random.Random(f"kind:{self.seed}:{i}").random()
        for kind, share in self.non_article:
            if u < share:
                return kind
            u -= share
        return self.non_article[-1][0]

    def title(self, i: int) -> str:
        """Unique: a real title, then the same with a real disambiguator, then with two."""
        j = i * self.title_step % self.total
        titles, parens = self.x.titles, self.x.parens
        base, k = titles[j % len(titles)], j // len(titles)
        if k == 0:
            return base
        m, r = divmod(k - 1, len(parens))
        if m == 0:
            return f"{base} ({parens[r]})"
        if m <= len(parens):
            return f"{base} ({parens[r]}・{parens[m - 1]})"
        return f"{base} ({parens[r]} {m})"

    def popular(self, rng: random.Random) -> int:
        """A page index by Zipf popularity (s = 1): rank r drawn log-uniformly, then spread."""
        r = int(math.exp(rng.random() * math.log(self.total + 1))) - 1
        return (r * self.rank_step + self.rank_offset) % self.total

    def category(self, rng: random.Random) -> str:
        r = int(math.exp(rng.random() * math.log(self.categories + 1))) - 1
        names, parens = self.x.categories, self.x.parens
        base, k = names[r % len(names)], r // len(names)
        return base if k == 0 else f"{base} ({parens[(k - 1) % len(parens)]})"

    def page(self, i: int) -> tuple[int, str, str, str | None, str, tuple]:
        """(ns, title, text, redirect target, revision meta, stats) of page ``i``."""
        rng = random.Random(f"page:{self.seed}:{i}")
        kind = self.kind(i)
        if kind == "article":
            return self._article(i, rng)
        if kind == "redirect":
            target = self.popular(rng)
            for _ in range(8):
                if self.kind(target) == "article":
                    break
                target = self.popular(rng)
            name = self.title(target)
            keyword = rng.choice(self.x.redirects)
            meta = rng.choice(self.x.articles).meta
            return 0, self.title(i), f"{keyword} [[{name}]]", name, meta, (1, 0, 0, 0, 0)
        if kind == "other":
            ns, text, meta = rng.choice(self.x.others)
            title = f"{self.x.namespaces[ns]}:{self.title(i)}"
            return ns, title, text, None, meta, (2, 0, 0, 0, 0)
        ns, meta = rng.choice(self.x.other_redirects)
        prefix = self.x.namespaces[ns]
        name = f"{prefix}:{self.title(self.popular(rng))}"
        return ns, f"{prefix}:{self.title(i)}", f"#REDIRECT [[{name}]]", name, meta, (3, 0, 0, 0, 0)

    def _article(self, i: int, rng: random.Random):
        base = rng.choice(self.x.articles)
        links = 0

        def repoint(m: re.Match) -> str:
            nonlocal links
            target, label = m.group(1), m.group(2)
            if not is_article_link(target, self.ns_names):
                return m.group(0)
            links += 1
            shown = label[1:] if label and len(label) > 1 else target
            return f"[[{self.title(self.popular(rng))}|{shown}]]"

        def fix(segment: str) -> str:
            """Real categories out, links re-pointed (so lengths count the longer links)."""
            return _LINK.sub(repoint, _CATEGORY.sub("", segment))

        if base.disambiguation:  # kept whole: a list of links, not prose to resize
            parts = [fix(s) for s in base.segments()] + [base.tail]
        else:
            target = rng.choice(self.lengths) * math.exp(rng.gauss(0, LENGTH_JITTER))
            parts = self._resized(base, target, rng, fix)
        text = "".join(parts)
        names = list(dict.fromkeys(self.category(rng) for _ in base.categories))
        if names:
            text = text.rstrip() + "\n" + "".join(f"\n[[Category:{c}]]" for c in names)
        stats = (0, len(text), links, len(names), int(base.disambiguation))
        return 0, self.title(i), text, None, base.meta, stats

    def _resized(self, base: RealArticle, target: float, rng: random.Random, fix) -> list[str]:
        """The base's paragraphs (each through ``fix``) up to the boundary nearest ``target``
        characters; when the base is shorter, sections of other real articles after it."""
        budget = target - len(base.tail)
        parts: list[str] = []
        total = 0

        def take(segments: list[str]) -> bool:
            """Append while it brings the length nearer the budget; True once it is reached."""
            nonlocal total
            for raw in segments:
                seg = fix(raw)
                if total + len(seg) > budget:
                    if not parts or total + len(seg) - budget < budget - total:
                        parts.append(seg)
                        total += len(seg)
                    return True
                parts.append(seg)
                total += len(seg)
            return False

        if not take(base.segments()):
            for _ in range(64):
                donor = rng.choice(self.donors)
                if take(donor.segments(donor.lead_end)):
                    break
        return parts + [base.tail]


def page_xml(page_id: int, ns: int, title: str, text: str, redirect: str | None, meta: str) -> str:
    rev = 100_000_000 + page_id
    meta = re.sub(r"<id>\d+</id>", f"<id>{rev}</id>", meta, count=1)
    meta = re.sub(r"<parentid>\d+</parentid>", f"<parentid>{rev - 1}</parentid>", meta, count=1)
    sha = int(hashlib.sha1(text.encode()).hexdigest(), 16)
    digits = ""
    while sha:
        sha, d = divmod(sha, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    head = f"    <redirect title={quoteattr(redirect)} />\n" if redirect else ""
    return (
        f"  <page>\n    <title>{escape(title)}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n"
        f'{head}    <revision>\n{meta}      <text bytes="{len(text.encode())}" '
        f'xml:space="preserve">{escape(text, {chr(34): "&quot;"})}</text>\n'
        f"      <sha1>{digits.rjust(31, '0')}</sha1>\n    </revision>\n  </page>\n"
    )


_PLAN: Plan | None = None


def _init_worker(plan: Plan) -> None:
    global _PLAN
    _PLAN = plan


def _make_stream(span: tuple[int, int]) -> tuple[bytes, int, bytes]:
    """Pages [a, b) as one bz2 stream: (compressed, uncompressed bytes, stats as int32s)."""
    assert _PLAN is not None
    out, stats = [], array("i")
    for i in range(*span):
        ns, title, text, redirect, meta, st = _PLAN.page(i)
        out.append(page_xml(i + 1, ns, title, text, redirect, meta))
        stats.extend((*st, len(title)))
    data = "".join(out).encode()
    return bz2.compress(data, 9), len(data), stats.tobytes()


def generate(plan: Plan, path: Path, workers: int) -> dict:
    """Write the dump, streaming; returns its stats (per-page numbers summarised)."""
    started = time.monotonic()
    tmp = path.with_name(path.name + ".part")
    spans = [(a, min(a + STREAM_PAGES, plan.total)) for a in range(0, plan.total, STREAM_PAGES)]
    stats = array("i")
    raw = 0
    shown = started
    with (
        open(tmp, "wb") as out,
        multiprocessing.get_context("spawn").Pool(workers, _init_worker, (plan,)) as pool,
    ):
        header = plan.x.siteinfo.encode()
        out.write(bz2.compress(header, 9))
        raw += len(header)
        for done, (data, size, st) in enumerate(pool.imap(_make_stream, spans, chunksize=4), 1):
            out.write(data)
            raw += size
            stats.frombytes(st)
            now = time.monotonic()
            if now - shown >= 10 or done == len(spans):
                shown = now
                pages = spans[done - 1][1]
                rate = pages / (now - started)
                console.print(
                    f"  generating: {pages:,}/{plan.total:,} pages, {raw / 2**30:.2f} GiB XML "
                    f"→ {out.tell() / 2**20:,.0f} MiB bz2, {rate:,.0f} pages/s, "
                    f"ETA {(plan.total - pages) / rate / 60:.1f} min",
                    highlight=False,
                )
        footer = b"</mediawiki>\n"
        out.write(bz2.compress(footer, 9))
        raw += len(footer)
    tmp.rename(path)
    rows = [stats[k : k + 6] for k in range(0, len(stats), 6)]
    return {
        "pages": plan.total,
        "xml_bytes": raw,
        "bz2_bytes": path.stat().st_size,
        "seconds": round(time.monotonic() - started, 1),
        "distribution": distribution(
            [r[1] for r in rows if r[0] == 0],
            [r[2] for r in rows if r[0] == 0],
            [r[3] for r in rows if r[0] == 0],
            sum(1 for r in rows if r[0] == 1),
            sum(1 for r in rows if r[0] == 0 and r[4]),
            [r[5] for r in rows if r[0] == 0],
            len(rows),
        ),
    }


def quantiles(values, qs=(0.1, 0.25, 0.5, 0.75, 0.9, 0.99)) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    return {f"p{round(q * 100)}": ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in qs}


def distribution(lengths, links, cats, redirects, disambiguation, title_lengths, pages) -> dict:
    articles = len(lengths)
    return {
        "articles": articles,
        "pages": pages,
        "wikitext_chars": sum(lengths),
        "length": {**quantiles(lengths), "mean": round(sum(lengths) / max(articles, 1))},
        "links_per_article": {**quantiles(links), "mean": round(sum(links) / max(articles, 1), 1)},
        "categories_per_article": {
            **quantiles(cats),
            "mean": round(sum(cats) / max(articles, 1), 2),
        },
        "title_chars_mean": round(sum(title_lengths) / max(articles, 1), 1),
        "redirect_share_ns0": round(redirects / max(redirects + articles, 1), 4),
        "disambiguation_share": round(disambiguation / max(articles, 1), 4),
    }


def real_distribution(x: Excerpt) -> dict:
    names = {v.casefold() for v in x.namespaces.values() if v} | _NS_ALIASES
    stats = [page_stats(a.text, names) for a in x.articles]
    return distribution(
        [len(a.text) for a in x.articles],
        [s[0] for s in stats],
        [s[1] for s in stats],
        len(x.redirects),
        sum(a.disambiguation for a in x.articles),
        [len(a.title) for a in x.articles],
        sum(x.kinds.values()),
    )


# -- measuring a child process tree -------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float, int]]:
    """pid → (parent, CPU seconds incl. reaped children, RSS bytes) of every process."""
    out = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu = sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
        out[int(entry)] = (int(fields[1]), cpu, int(fields[21]) * page)
    return out


def tree(pid: int) -> tuple[float, float, int, int]:
    """(CPU seconds of this process ``pid``, of its descendants — live ones from /proc, reaped
    ones from os.times() —, their summed RSS, the largest RSS)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for p, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(p)
    t = os.times()
    main, below = t.user + t.system, t.children_user + t.children_system
    rss = largest = table.get(pid, (0, 0.0, 0))[2]
    stack = list(children.get(pid, []))
    while stack:
        p = stack.pop()
        _, cpu, r = table[p]
        below += cpu
        rss += r
        largest = max(largest, r)
        stack.extend(children.get(p, []))
    return main, below, rss, largest


class Recorder:
    """A Progress that passes everything on and notes, at each phase change, the time and the
    CPU of this process and its workers; a thread samples the tree's memory and the bytes of
    the files under ``watch`` (the source's folder: generation, staging file, sort spills)."""

    def __init__(self, inner, watch: Path | None = None) -> None:
        self.inner = inner
        self.watch = watch
        self.marks: list[tuple[str, float, float, float]] = []
        self.peak: dict[str, tuple[int, int]] = {}  # phase → (summed RSS, largest process)
        self.disk: dict[str, int] = {}  # phase → most bytes under ``watch``
        self._current = "start"
        self._stop = threading.Event()
        self.mark("start")
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def __getattr__(self, name):
        return getattr(self.__dict__["inner"], name)

    def mark(self, name: str) -> None:
        main, below, _, _ = tree(os.getpid())
        self.marks.append((name, time.monotonic(), main, below))
        self._current = name

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            _, _, rss, largest = tree(os.getpid())
            old = self.peak.get(self._current, (0, 0))
            self.peak[self._current] = (max(old[0], rss), max(old[1], largest))
            if self.watch is not None:
                size = sum(
                    (Path(d) / f).stat().st_size
                    for d, _, files in os.walk(self.watch)
                    for f in files
                    if (Path(d) / f).exists()
                )
                self.disk[self._current] = max(self.disk.get(self._current, 0), size)

    def phase(self, name: str, total=None, unit: str = "docs") -> None:
        self.mark(name)
        self.inner.phase(name, total, unit)

    def advance(self, n: int = 1) -> None:
        self.inner.advance(n)

    def retotal(self, total: int) -> None:
        self.inner.retotal(total)

    def warn(self, message: str) -> None:
        self.inner.warn(message)

    def close(self) -> None:
        self.inner.close()

    def phases(self) -> list[dict]:
        """Per phase: wall, CPU of the main process, CPU of the workers, peak memory. A name
        seen twice (a phase the builder re-enters) is summed."""
        self.mark("end")
        self._stop.set()
        out: dict[str, dict] = {}
        for (name, t0, m0, b0), (_, t1, m1, b1) in zip(self.marks, self.marks[1:], strict=False):
            if name == "start" and t1 - t0 < 0.5:
                continue
            row = out.setdefault(name, {"phase": name, "wall_s": 0.0, "main_cpu_s": 0.0,
                                        "workers_cpu_s": 0.0})  # fmt: skip
            row["wall_s"] += t1 - t0
            row["main_cpu_s"] += m1 - m0
            row["workers_cpu_s"] += b1 - b0
            rss, largest = self.peak.get(name, (0, 0))
            row["peak_tree_rss_mib"] = round(rss / 2**20)
            row["peak_process_rss_mib"] = round(largest / 2**20)
            if self.watch is not None:
                row["peak_disk_mib"] = round(self.disk.get(name, 0) / 2**20)
        for row in out.values():
            for k in ("wall_s", "main_cpu_s", "workers_cpu_s"):
                row[k] = round(row[k], 2)
        return list(out.values())


def system_busy_s() -> float:
    """CPU seconds all processes of the machine have used since boot (from /proc/stat)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / _TICK


def available_mib() -> int:
    from chiezo.store.build import available_memory

    return (available_memory() or 0) // 2**20


def run_child(args: list[str], what: str) -> dict:
    """Run this script as a child for one measured step; its JSON, plus the CPU the rest of the
    machine used meanwhile."""
    out = WORK / f"{what}.json"
    out.unlink(missing_ok=True)
    console.print(
        f"[bold]{what}[/]: {available_mib():,} MiB memory available, load {os.getloadavg()[0]:.1f}",
        highlight=False,
    )
    busy, started = system_busy_s(), time.monotonic()
    subprocess.run(
        [sys.executable, __file__, "--child", what, "--out", str(out), *args], check=True
    )
    wall = time.monotonic() - started
    result = json.loads(out.read_text())
    ours = sum(p["main_cpu_s"] + p["workers_cpu_s"] for p in result["phases"])
    result["others_cpu_s"] = round(max(system_busy_s() - busy - ours, 0.0), 1)
    result["child_wall_s"] = round(wall, 1)
    return result


# -- child: the build -------------------------------------------------------------------------


def child_build(args) -> None:
    from chiezo.core.config import Settings
    from chiezo.core.progress import RichProgress
    from chiezo.ops.context import Context

    recorder = Recorder(RichProgress(Console(width=150)), Path(args.data) / "corpus" / args.name)
    service = Context(Settings(data_dir=Path(args.data)))
    started = time.monotonic()
    report = building.ingest(service, "wikipedia", Path(args.dump), args.name, progress=recorder)
    seconds = time.monotonic() - started
    recorder.close()
    phases = recorder.phases()
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    Path(args.out).write_text(
        json.dumps(
            {
                "seconds": round(seconds, 1),
                "report": report.to_dict(),
                "phases": phases,
                "cpu_s": round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 1),
                "peak_rss_mib": round(max(me.ru_maxrss, kids.ru_maxrss) / 1024),
                "main_peak_rss_mib": round(me.ru_maxrss / 1024),
                "peak_tree_rss_mib": max(
                    (p.get("peak_tree_rss_mib", 0) for p in phases), default=0
                ),
            },
            ensure_ascii=False,
        )
    )


# -- child: synthetic vectors through the real embed path ---------------------------------------


def synthetic_runner(pool, noise: float, seed: int):
    """A runner for ``Context.embed``: for each unit, a real vector (picked by the unit's text
    hash) plus Gaussian noise of norm ≈ ``noise``, renormalised. Nothing is embedded."""
    import numpy as np

    sigma = noise / math.sqrt(pool.shape[1])

    def runner(embedder):
        def vectorize(batches):
            for work in batches:
                if not work.hashes:
                    yield work, None
                    continue
                picks = np.array([int(h[:12], 16) % len(pool) for h in work.hashes])
                rng = np.random.default_rng([int(work.hashes[0][:12], 16), seed])
                noisy = pool[picks] + rng.normal(0, sigma, (len(picks), pool.shape[1]))
                noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
                yield work, noisy.astype(np.float32)

        vectorize.where = "synthetic: real use-m vectors plus noise (bench/jawiki_scale.py)"
        return vectorize

    return runner


def child_embed(args) -> None:
    import numpy as np

    from chiezo.core.config import Settings
    from chiezo.core.progress import RichProgress
    from chiezo.ops.context import Context
    from chiezo.store import chunk_text
    from chiezo.store.embed import passage_text
    from chiezo.store.embedders import get_embedder

    service = Context(Settings(data_dir=Path(args.data)))
    real = service.library.get(args.pool_source).conn
    bodies = chunk_text.Bodies(real)  # passages kept as spans of their body: resolved
    rows = [
        (title, heading, bodies.text(doc_id, text, spans))
        for doc_id, title, heading, text, spans in real.execute(
            f"SELECT c.doc_id, d.title, c.heading_path, c.text, "
            f"{chunk_text.spans_column(real, 'c')} FROM chunks c "
            "JOIN docs d ON d.doc_id = c.doc_id ORDER BY c.chunk_id"
        )
    ]
    rows = random.Random(args.seed).sample(rows, min(args.vector_pool, len(rows)))
    model = get_embedder("use-m")
    model.embed(["warm-up"], "passage")
    started = time.monotonic()
    pool = np.asarray(model.embed([passage_text(*r) for r in rows], "passage"), dtype=np.float32)
    real_rate = len(rows) / (time.monotonic() - started)
    console.print(f"  {len(rows):,} real excerpt chunks embedded with use-m: {real_rate:.1f}/s")
    recorder = Recorder(RichProgress(Console(width=150)), Path(args.data))
    started = time.monotonic()
    done = building.embed(
        service,
        args.name,
        "use-m",
        progress=recorder,
        runner=synthetic_runner(pool, VECTOR_NOISE, args.seed),
    )
    seconds = time.monotonic() - started
    recorder.close()
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    Path(args.out).write_text(
        json.dumps(
            {
                "seconds": round(seconds, 1),
                "report": done.to_dict(),
                "phases": recorder.phases(),
                "pool_vectors": len(rows),
                "real_use_m_passages_per_s": round(real_rate, 1),
                "peak_rss_mib": round(max(me.ru_maxrss, kids.ru_maxrss) / 1024),
            }
        )
    )


# -- sizes ----------------------------------------------------------------------------------------


def sizes(path: Path) -> dict[str, int]:
    """Bytes per table and index of a generation (SQLite's dbstat), largest first."""
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    finally:
        conn.close()
    return dict(sorted(rows, key=lambda r: -r[1]))


def current(data: Path, name: str) -> Path:
    from chiezo.store import generations

    path = generations.current_path(data / "corpus" / name)
    assert path is not None, f"{name} has no generation"
    return path


# -- queries --------------------------------------------------------------------------------------

_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]{2,}")
QUESTIONS = (
    "{}はいつ生まれましたか",
    "{}はどこにありますか",
    "{}とは何ですか",
    "{}の人口はどれくらいですか",
    "{}を作ったのは誰ですか",
    "{}はいつ始まりましたか",
)


def query_classes(conn, docs: int, n: int, rng: random.Random) -> dict[str, list[dict]]:
    """At least ``n`` queries per class, drawn from the built data by rule."""
    from chiezo.core.words import index_text

    def random_docs(k: int, columns: str = "title"):
        ids = [rng.randint(1, docs) for _ in range(k)]
        got = []
        for start in range(0, k, 500):
            part = ids[start : start + 500]
            got += conn.execute(
                f"SELECT {columns} FROM docs WHERE doc_id IN ({','.join('?' * len(part))})", part
            ).fetchall()
        return got

    def pick(values: list, k: int) -> list:
        if not values:
            return []
        return rng.sample(values, k) if len(values) >= k else [rng.choice(values) for _ in range(k)]

    common, rare, mid = [], [], {}
    for word, df in conn.execute("SELECT word, df FROM word_df"):
        if not _JAPANESE.fullmatch(word):
            continue
        if docs * 0.05 <= df <= docs * 0.2:
            common.append(word)
        elif 2 <= df <= 5 and len(rare) < 200_000:
            rare.append(word)
        if docs * 0.005 <= df <= docs * 0.2:
            mid[word] = df
    titles = [r[0] for r in random_docs(n * 2)]
    pairs = []
    for (opening,) in random_docs(n * 10, "opening"):
        words = [w for w in dict.fromkeys(index_text(opening).split()) if w in mid]
        if len(words) >= 2:
            pairs.append(" ".join(rng.sample(words, 2)))
        if len(pairs) >= n:
            break
    english: dict[str, None] = {}
    for (body,) in random_docs(n * 5, "substr(body, 1, 4000)"):
        english.update(dict.fromkeys(re.findall(r"\b[A-Za-z]{4,12}\b", body)))
    english_words = []
    for word in english:
        stem = index_text(word)
        row = conn.execute("SELECT df FROM word_df WHERE word = ?", (stem,)).fetchone()
        if stem and " " not in stem and row and row[0] >= 2:
            english_words.append(word)
    popular_tags = [r[0] for r in conn.execute(
        "SELECT tag FROM tag_counts WHERE n >= ? ORDER BY n DESC LIMIT 200", (max(docs // 100, 2),)
    )]  # fmt: skip
    rare_tags = [r[0] for r in conn.execute("SELECT tag FROM tag_counts WHERE n BETWEEN 2 AND 10")]
    bases = [_PAREN.sub("", t) for t in titles]
    common_n = pick(common, n)
    return {
        "exact title": [{"query": t} for t in titles[:n]],
        "common word (5-20%)": [{"query": w} for w in common_n],
        "rare word (2-5 docs)": [{"query": w} for w in pick(rare, n)],
        "two words (AND)": [{"query": p} for p in pairs[:n]],
        "question (ja)": [{"query": rng.choice(QUESTIONS).format(b)} for b in bases[:n]],
        "English word": [{"query": w} for w in pick(english_words, n)],
        "common word + popular tag": [
            {"query": w, "tag": [t]} for w, t in zip(common_n, pick(popular_tags, n), strict=True)
        ] if popular_tags and common_n else [],
        "common word + rare tag": [
            {"query": w, "tag": [t]} for w, t in zip(common_n, pick(rare_tags, n), strict=True)
        ] if rare_tags and common_n else [],
    }  # fmt: skip


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else -1.0


def time_queries(service, name: str, classes: dict[str, list[dict]], mode: str) -> dict:
    from chiezo.core.errors import ChiezoError
    from chiezo.ops.requests import SearchRequest

    out = {}
    for cls, queries in classes.items():
        if not queries:
            continue
        requests = [SearchRequest.of(source=name, limit=10, mode=mode, **q) for q in queries]
        for request in requests:  # warm-up pass
            with contextlib.suppress(ChiezoError):
                searching.search(service, request)
        samples, totals, errors, empty = [], [], {}, 0
        for request in requests:
            started = time.perf_counter()
            try:
                result = searching.search(service, request)
            except ChiezoError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            finally:
                samples.append((time.perf_counter() - started) * 1000)
            totals.append(result.total)
            empty += not result.hits
        out[cls] = {
            "queries": len(requests),
            "p50_ms": pct(samples, 0.5),
            "p95_ms": pct(samples, 0.95),
            "p99_ms": pct(samples, 0.99),
            "max_ms": pct(samples, 1.0),
            "median_total": sorted(totals)[len(totals) // 2] if totals else 0,
            "no_hits": empty,
            "errors": errors,
            "example": queries[0],
        }
        console.print(f"  {mode:8} {cls:28} {out[cls]}", highlight=False)
    return out


def vector_search_alone(data: Path, name: str, questions: list[str]) -> dict:
    """The usearch search alone (k = 200, what hybrid over-fetches), for held-out questions."""
    from chiezo.store import vectors as vec
    from chiezo.store.embedders import get_embedder

    path = current(data, name)
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    conn.close()
    info = vec.vector_info(meta)
    index = vec.VectorIndex(path, info)
    index.warm()
    queries = get_embedder("use-m").embed(questions, "query")
    samples = []
    for q in queries:
        started = time.perf_counter()
        index.search(q, 200)
        samples.append((time.perf_counter() - started) * 1000)
    return {"queries": len(samples), "p50_ms": pct(samples, 0.5), "p95_ms": pct(samples, 0.95),
            "p99_ms": pct(samples, 0.99), "vectors": len(index)}  # fmt: skip


# -- the run ------------------------------------------------------------------------------------


def machine_speed(excerpt: Excerpt) -> dict:
    """mwparserfromhell parse + strip_code over the excerpt's articles, CPU time: the same
    measure design.md §15 gives, so absolute hours can be compared across machines."""
    import mwparserfromhell

    chars = sum(len(a.text) for a in excerpt.articles)
    started = time.process_time()
    for a in excerpt.articles:
        mwparserfromhell.parse(a.text).strip_code()
    cpu = time.process_time() - started
    return {
        "parse_strip_chars_per_cpu_s": round(chars / cpu),
        "cores": os.cpu_count(),
        "load_avg": [round(v, 2) for v in os.getloadavg()],
    }


def build_summary(result: dict, chars: int) -> dict:
    phases = result["phases"]
    for p in phases:
        cpu = p["main_cpu_s"] + p["workers_cpu_s"]
        p["cpu_s"] = round(cpu, 1)
        p["cpu_s_per_m_chars"] = round(cpu / (chars / 1e6), 3)
    return result


PARALLEL = {  # phase → what runs in parallel in it (read from the code)
    "reading": "parser processes, cores + 1 (at most 8: wikirender.default_workers); "
    "the main process decompresses, parses XML and stages alone",
    "splitting words": "Sudachi processes, one per core (at most 8: wordindex.splitter_processes); "
    "they start with 'writing documents' and run beside the FTS phases",
}


def cpu_bound_hours(phases: list[dict], scale: float, cores: int) -> float:
    """Hours at ``scale`` × this build on ``cores`` idle cores, CPU-bound (I/O waits left out):
    each serial phase takes its main process's CPU time; reading spreads its parser processes
    (cores + 1, at most 8, as wikirender.default_workers) beside the main process, which reads
    alone; the word splitters (one per core, at most 8, as wordindex.splitter_processes) run
    beside the serial phases from 'writing documents' to 'splitting words', and the builder
    waits at 'splitting words' for what is left."""
    parsers, splitters = min(cores + 1, 8), min(cores, 8)
    total = overlapped = words = 0.0
    splitting = False
    for p in phases:
        main, workers = p["main_cpu_s"] * scale, p["workers_cpu_s"] * scale
        name = p["phase"]
        if name == "reading":
            total += max(main, workers / parsers, (main + workers) / cores)
            continue
        splitting = splitting or name == "writing documents"
        if name == "splitting words":
            # below 20,000 documents the builder splits in its own process (main CPU); at
            # 1.4M it is the splitter processes' work either way
            words += workers if workers >= main else workers + main
            own = main if workers >= main else 0.0
            region = max(overlapped, words / splitters, (overlapped + words) / cores)
            total += region - overlapped + own
            splitting = False
            continue
        if splitting:
            words += workers
            overlapped += main
        total += main
    return total / 3600


def projection(build: dict, gen_bytes: int, scale: float) -> dict:
    """Build hours at 1.4M articles three ways: this run's wall time × scale (this shared
    machine, as it was), and CPU-bound on 2 and on 16 idle cores (``cpu_bound_hours``)."""
    phases = build["phases"]
    return {
        "hours_as_measured": round(sum(p["wall_s"] for p in phases) * scale / 3600, 2),
        "hours_2_cores": round(cpu_bound_hours(phases, scale, 2), 2),
        "hours_16_cores": round(cpu_bound_hours(phases, scale, 16), 2),
        "generation_gb": round(gen_bytes * scale / 1e9, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=DEFAULT_PAGES, help="articles (ns 0)")
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="generation")
    parser.add_argument("--queries", type=int, default=QUERIES, help="per class")
    parser.add_argument("--vector-pool", type=int, default=1000, help="real chunks embedded")
    parser.add_argument("--skip-vectors", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="keep a dump and build already made")
    parser.add_argument("--show", metavar="JSON", help="only print the tables of a results file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--pool-source", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "build" or args.child == "baseline":
        child_build(args)
        return
    if args.child == "embed":
        child_embed(args)
        return
    if args.show:
        report = json.loads(Path(args.show).read_text())
        show_distributions(report["real"], report["dump"]["distribution"])
        show(report, report["full_pages"] / report["pages"])
        return
    run(args)


def run(args) -> None:
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    WORK.mkdir(parents=True, exist_ok=True)
    data = WORK / "data"
    dump = WORK / f"jawiki-20230501-synthetic-{args.pages}-pages-articles-multistream.xml.bz2"
    sidecar = dump.with_suffix(".json")
    report: dict = {"pages": args.pages, "seed": args.seed, "full_pages": FULL_PAGES}
    scale = FULL_PAGES / args.pages
    console.rule(f"jawiki at scale: {args.pages:,} articles (1/{scale:.0f} of {FULL_PAGES:,})")
    console.print(
        f"{os.cpu_count()} cores, {available_mib():,} MiB memory available, "
        f"{shutil.disk_usage(WORK).free / 2**30:,.0f} GiB disk free, load "
        f"{', '.join(f'{v:.1f}' for v in os.getloadavg())}",
        highlight=False,
    )
    started = time.monotonic()
    excerpt = read_excerpt(args.seed)
    real = real_distribution(excerpt)
    console.print(
        f"excerpt read in {time.monotonic() - started:.1f} s: {excerpt.kinds}, "
        f"{len(excerpt.titles):,} real titles, {len(excerpt.parens):,} disambiguators, "
        f"{len(excerpt.categories):,} categories",
        highlight=False,
    )
    report["real"] = real
    report["machine"] = machine_speed(excerpt)
    console.print(f"this machine: {report['machine']}", highlight=False)
    plan = Plan(excerpt, args.pages, args.seed)
    want = {"pages": args.pages, "seed": args.seed, "version": GENERATOR_VERSION}
    if args.reuse and dump.exists() and sidecar.exists():
        made = json.loads(sidecar.read_text())
        assert made["params"] == want, f"{dump.name} was made with {made['params']}"
        console.print(f"reusing {dump.name}")
    else:
        shutil.rmtree(data, ignore_errors=True)
        for old in WORK.glob("jawiki-*-synthetic-*"):
            old.unlink()
        console.rule(f"generating {plan.total:,} pages")
        made = {"params": want, **generate(plan, dump, args.workers)}
        sidecar.write_text(json.dumps(made, ensure_ascii=False, indent=2))
    report["dump"] = made
    synthetic = made["distribution"]
    show_distributions(real, synthetic)
    wikitext = synthetic["wikitext_chars"]

    service = Context(Settings(data_dir=data))
    names = service.library.names()
    if not (args.reuse and "excerpt" in names):
        console.rule("baseline: the real excerpt, built the same way")
        report["baseline"] = run_child(
            ["--data", str(data), "--dump", str(EXCERPT), "--name", "excerpt"], "baseline"
        )
        (WORK / "baseline-kept.json").write_text(json.dumps(report["baseline"]))
    else:
        report["baseline"] = json.loads((WORK / "baseline-kept.json").read_text())
    build_summary(report["baseline"], real["wikitext_chars"])
    if not (args.reuse and "jawiki" in names):
        console.rule(f"building {args.pages:,} articles (Context.ingest, default settings)")
        report["build"] = run_child(
            ["--data", str(data), "--dump", str(dump), "--name", "jawiki"], "build"
        )
        (WORK / "build-kept.json").write_text(json.dumps(report["build"]))
    else:
        report["build"] = json.loads((WORK / "build-kept.json").read_text())
    build_summary(report["build"], wikitext)

    console.rule("sizes (dbstat)")
    gen = current(data, "jawiki")
    t0 = time.monotonic()
    report["sizes"] = sizes(gen)
    report["baseline_sizes"] = sizes(current(data, "excerpt"))
    console.print(
        f"  dbstat over {gen.stat().st_size / 2**30:.2f} GiB: {time.monotonic() - t0:.0f} s"
    )
    conn = service.library.get("jawiki").conn
    docs = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    body_chars = conn.execute("SELECT sum(length(body)) FROM docs").fetchone()[0]
    report["counts"] = {
        "docs": docs,
        "chunks": chunks,
        "body_chars": body_chars,
        "links": conn.execute("SELECT count(*) FROM doc_links").fetchone()[0],
        "tags": conn.execute("SELECT count(*) FROM doc_tags").fetchone()[0],
        "distinct_tags": conn.execute("SELECT count(*) FROM tag_counts").fetchone()[0],
        "titles": conn.execute("SELECT count(*) FROM titles").fetchone()[0],
        "words": conn.execute("SELECT count(*) FROM word_df").fetchone()[0],
        "grams": conn.execute("SELECT count(*) FROM gram_df").fetchone()[0],
        "generation_bytes": gen.stat().st_size,
    }
    console.print(report["counts"], highlight=False)
    base_conn = service.library.get("excerpt").conn
    report["baseline_counts"] = {
        "docs": base_conn.execute("SELECT count(*) FROM docs").fetchone()[0],
        "chunks": base_conn.execute("SELECT count(*) FROM chunks").fetchone()[0],
        "body_chars": base_conn.execute("SELECT sum(length(body)) FROM docs").fetchone()[0],
    }

    console.rule(f"keyword queries ({args.queries} per class, after a warm-up pass)")
    classes = query_classes(conn, docs, args.queries, random.Random(args.seed))
    report["keyword"] = time_queries(service, "jawiki", classes, "keyword")

    if not args.skip_vectors:
        console.rule("vectors (SYNTHETIC: real use-m vectors of excerpt chunks plus noise)")
        report["embed"] = run_child(
            ["--data", str(data), "--name", "jawiki", "--pool-source", "excerpt",
             "--seed", str(args.seed), "--vector-pool", str(args.vector_pool)],
            "embed",
        )  # fmt: skip
        embedded = current(data, "jawiki")
        all_sizes = sizes(embedded)
        usearch = embedded.with_name(embedded.name + ".usearch").stat().st_size
        count = report["embed"]["report"]["vectors"]
        table_bytes = all_sizes.get("chunk_vectors", 0) + all_sizes.get("chunk_vectors_by_chunk", 0)
        cache = sum(p.stat().st_size for p in (data / "vectors").glob("*.f16.db"))
        report["vectors"] = {
            "synthetic": True,
            "count": count,
            "unit_chars": report["embed"]["report"]["unit_chars"],
            "table_bytes": table_bytes,
            "index_bytes": usearch,
            "cache_bytes": cache,
            "bytes_per_vector_table": round(table_bytes / max(count, 1), 1),
            "bytes_per_vector_index": round(usearch / max(count, 1), 1),
            "generation_bytes_with_vectors": embedded.stat().st_size,
        }
        console.print(report["vectors"], highlight=False)
        service = Context(Settings(data_dir=data))  # the embedded generation, a fresh handle
        semantic = {k: classes[k] for k in ("exact title", "common word (5-20%)", "question (ja)")}
        report["hybrid"] = time_queries(service, "jawiki", semantic, "hybrid")
        report["semantic"] = time_queries(service, "jawiki", semantic, "semantic")
        report["vector_search_alone"] = vector_search_alone(
            data, "jawiki", [q["query"] for q in classes["question (ja)"]]
        )
    report["projection"] = project(report, scale)
    show(report, scale)
    out = HERE / "results" / "jawiki_scale.json"
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


def project(report: dict, scale: float) -> dict:
    build, counts = report["build"], report["counts"]
    gen = counts["generation_bytes"]
    xml = report["dump"]["xml_bytes"]
    mean_chars = report["dump"]["distribution"]["length"]["mean"]
    per_article = gen / report["pages"]
    out = {
        "scale": round(scale, 2),
        **projection(build, gen, scale),
        "generation_over_xml": round(gen / xml, 3),
        "bz2_gb": round(report["dump"]["bz2_bytes"] * scale / 1e9, 1),
        "xml_gb": round(xml * scale / 1e9, 1),
        # the mean article (wikitext characters) at which 1.4M articles just fit the target
        "mean_wikitext_chars_for_target": round(
            TARGET_BYTES / FULL_PAGES / per_article * mean_chars
        ),
        "mean_wikitext_chars_here": mean_chars,
    }
    if "vectors" in report:
        from chiezo.store.embed import UNITS_UP_TO_CHUNKS

        v = report["vectors"]
        chunks = counts["chunks"] * scale
        # above UNITS_UP_TO_CHUNKS chunks the default embeds whole chunks: one vector each
        vectors = chunks if chunks > UNITS_UP_TO_CHUNKS else v["count"] * scale
        per_vector = (v["table_bytes"] + v["index_bytes"]) / max(v["count"], 1)
        out["vectors"] = round(vectors)
        out["vector_gb"] = round(vectors * per_vector / 1e9, 1)
        out["vector_cache_gb"] = round(vectors * v["cache_bytes"] / max(v["count"], 1) / 1e9, 1)
        seconds = report["embed"]["seconds"] / max(v["count"], 1) * vectors
        out["embed_synthetic_hours"] = round(seconds / 3600, 2)
        rate = report["embed"]["real_use_m_passages_per_s"]
        out["embed_real_use_m_hours_2_cores"] = round(vectors / rate / 3600, 1)
    return out


def show_distributions(real: dict, synthetic: dict) -> None:
    table = Table(title="the dump against the real excerpt (articles, ns 0)")
    for col in ("", "real excerpt", "synthetic"):
        table.add_column(col, justify="right")
    table.add_row("articles / pages", f"{real['articles']} / {real['pages']}",
                  f"{synthetic['articles']:,} / {synthetic['pages']:,}")  # fmt: skip
    for key in ("length", "links_per_article", "categories_per_article"):
        for q in ("p10", "p25", "p50", "p75", "p90", "p99", "mean"):
            table.add_row(f"{key} {q}", str(real[key].get(q)), str(synthetic[key].get(q)))
    for key in ("title_chars_mean", "redirect_share_ns0", "disambiguation_share"):
        table.add_row(key, str(real[key]), str(synthetic[key]))
    console.print(table)


def show(report: dict, scale: float) -> None:
    build, base = report["build"], report["baseline"]
    chars = report["dump"]["distribution"]["wikitext_chars"]
    proj = report["projection"]
    phases = Table(
        title=f"build of {report['pages']:,} articles ({chars / 1e6:,.0f}M wikitext chars): "
        f"{build['seconds']:,.0f} s, {build['cpu_s']:,.0f} CPU-s, peak RSS {build['peak_rss_mib']} "
        f"MiB (largest process), {build['peak_tree_rss_mib']} MiB (tree); other processes used "
        f"{build['others_cpu_s']:,.0f} CPU-s meanwhile"
    )
    for col in ("phase", "wall s", "main CPU-s", "workers CPU-s", "CPU-s/M chars",
                "baseline CPU-s/M chars", "tree RSS MiB", "1.4M: h (2 cores)"):  # fmt: skip
        phases.add_column(col, justify="right")
    base_rates = {p["phase"]: p["cpu_s_per_m_chars"] for p in base["phases"]}
    for p in build["phases"]:
        phases.add_row(
            p["phase"] + (" *" if p["phase"] in PARALLEL else ""),
            f"{p['wall_s']:,.1f}",
            f"{p['main_cpu_s']:,.1f}",
            f"{p['workers_cpu_s']:,.1f}",
            f"{p['cpu_s_per_m_chars']:.3f}",
            str(base_rates.get(p["phase"], "-")),
            str(p.get("peak_tree_rss_mib") or "-"),
            f"{p['wall_s'] * scale / 3600:.2f}",
        )
    console.print(phases)
    console.print("* parallel: " + "; ".join(f"{k}: {v}" for k, v in PARALLEL.items()))
    size_table = Table(title="generation by table and index (dbstat), top 16")
    for col in ("name", "MiB", "share", "bytes/article", "1.4M: GB"):
        size_table.add_column(col, justify="right")
    total = sum(report["sizes"].values())
    for name, size in list(report["sizes"].items())[:16]:
        size_table.add_row(
            name,
            f"{size / 2**20:,.1f}",
            f"{size / total:.1%}",
            f"{size / report['pages']:,.0f}",
            f"{size * scale / 1e9:,.1f}",
        )
    console.print(size_table)
    queries = Table(title="query latency (ms), Context.search, after a warm-up pass")
    for col in ("mode", "class", "n", "p50", "p95", "p99", "median total", "no hits", "errors"):
        queries.add_column(col, justify="right")
    for mode in ("keyword", "hybrid", "semantic"):
        for cls, r in report.get(mode, {}).items():
            queries.add_row(mode, cls, str(r["queries"]), f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}",
                            f"{r['p99_ms']:.1f}", f"{r['median_total']:,}", str(r["no_hits"]),
                            str(r["errors"] or ""))  # fmt: skip
    if "vector_search_alone" in report:
        r = report["vector_search_alone"]
        queries.add_row("usearch alone (k=200)", "question (ja)", str(r["queries"]),
                        f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}", f"{r['p99_ms']:.2f}", "", "", "")  # fmt: skip
    console.print(queries)
    summary = Table(title=f"jawiki at {report['pages']:,} articles, projected ×{scale:.1f} to 1.4M")
    for col in ("quantity", "measured", "1.4M articles", "how projected"):
        summary.add_column(col, justify="right")
    counts = report["counts"]
    gen = counts["generation_bytes"]
    rows = [
        ("dump XML (uncompressed)", f"{report['dump']['xml_bytes'] / 2**30:.2f} GiB",
         f"{proj['xml_gb']} GB", "linear in pages"),
        ("dump bz2", f"{report['dump']['bz2_bytes'] / 2**20:,.0f} MiB", f"{proj['bz2_gb']} GB",
         "linear in pages"),
        ("generation (no vectors)", f"{gen / 2**30:.2f} GiB", f"{proj['generation_gb']} GB "
         f"({'≤' if proj['generation_gb'] <= TARGET_BYTES / 1e9 else '>'} 42 GB target)",
         "linear in pages (vocabulary tables grow slower)"),
        ("generation / uncompressed XML", f"{proj['generation_over_xml']}", "same", ""),
        ("generation / wikitext char", f"{gen / chars:.2f} B",
         f"42 GB fits a mean article of ≤ {proj['mean_wikitext_chars_for_target']:,} chars",
         f"here {proj['mean_wikitext_chars_here']:,}"),
        ("generation / rendered char (docs.body)", f"{gen / counts['body_chars']:.2f} B",
         f"baseline (real excerpt) {base['report']['size_bytes'] / report['baseline_counts']['body_chars']:.2f} B",
         "the excerpt's vocabulary tables weigh more at 189 articles"),
        ("build wall (this shared machine)", f"{build['seconds'] / 60:,.1f} min",
         f"{proj['hours_as_measured']} h", f"wall × {scale:.0f}; others used "
         f"{build['others_cpu_s']:,.0f} CPU-s meanwhile"),
        ("build on 2 idle cores", "", f"{proj['hours_2_cores']} h",
         "CPU-bound: serial phases at their CPU time, parallel ones spread"),
        ("build on 16 idle cores", "", f"{proj['hours_16_cores']} h",
         "same model: 8 parsers, 8 word splitters (the code's caps)"),
        ("this machine's speed: parse + strip_code",
         f"{report['machine']['parse_strip_chars_per_cpu_s'] / 1e3:,.0f}k chars/CPU-s",
         "786k in design.md §15", "mwparserfromhell alone, same run"),
        ("build CPU", f"{build['cpu_s']:,.0f} CPU-s",
         f"{build['cpu_s'] * scale / 3600:,.1f} CPU-h", "linear"),
        ("CPU per M wikitext chars", f"{build['cpu_s'] / (chars / 1e6):.2f} CPU-s",
         f"baseline {base['cpu_s'] / (report['real']['wikitext_chars'] / 1e6):.2f}",
         "real excerpt, same run"),
        ("peak disk of the source's folder (build)", f"{build.get('peak_disk_mib', 0):,} MiB",
         f"{build.get('peak_disk_mib', 0) * 2**20 * scale / 1e9:,.0f} GB",
         f"{build.get('peak_disk_mib', 0) * 2**20 / max(gen, 1):.2f} × the generation"),
        ("peak RSS (largest process / tree)",
         f"{build['peak_rss_mib']} / {build['peak_tree_rss_mib']} MiB", "flat (bounded batches)",
         "not linear"),
        ("docs / chunks", f"{counts['docs']:,} / {counts['chunks']:,}",
         f"{counts['docs'] * scale:,.0f} / {counts['chunks'] * scale:,.0f}", "linear"),
        ("doc_links rows", f"{counts['links']:,}", f"{counts['links'] * scale:,.0f}", "linear"),
    ]  # fmt: skip
    if "vectors" in report:
        v = report["vectors"]
        rows += [
            ("vectors (SYNTHETIC)", f"{v['count']:,} (unit_chars={v['unit_chars']})",
             f"{proj['vectors']:,}", "one per chunk above 200,000 chunks (store/embed.py)"),
            ("vector bytes (table + index)",
             f"{v['bytes_per_vector_table']:.0f} + {v['bytes_per_vector_index']:.0f} B/vector",
             f"{proj['vector_gb']} GB", "linear"),
            ("embedding cache (outside the generation)",
             f"{v['cache_bytes'] / max(v['count'], 1):.0f} B/vector",
             f"{proj['vector_cache_gb']} GB", "linear"),
            ("embed step (synthetic vectors)", f"{report['embed']['seconds'] / 60:,.1f} min",
             f"{proj['embed_synthetic_hours']} h", "per vector: copy + write + HNSW + calibration"),
            ("embedding for real (use-m)", f"{report['embed']['real_use_m_passages_per_s']}/s",
             f"{proj['embed_real_use_m_hours_2_cores']:,} h", "at the measured rate, 2 cores"),
        ]  # fmt: skip
    for row in rows:
        summary.add_row(*row)
    console.print(summary)


if __name__ == "__main__":
    main()
