"""Real text for benchmarks: JaQuAD paragraphs (jawiki) and the Japanese Rust book, from
``../shared/data``. Synthetic *documents* are assembled from these real paragraphs so that
sources of any size can be built; the text itself is never generated."""

from __future__ import annotations

import glob
import json
import os
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from chiezo.core.models import Doc
from chiezo.ingest.documents import DocumentFolder

# The large real data benchmarks need stays outside the repository (the tests carry their own
# small files in tests/data). CHIEZO_SHARED_DATA names that data folder (CHIEZO_SHARED, its
# parent, is still read); the scripts name paths as SHARED / "data/...".
_SHARED = Path(os.environ.get("CHIEZO_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SHARED_DATA = Path(os.environ.get("CHIEZO_SHARED_DATA") or _SHARED / "data")
SHARED = SHARED_DATA.parent
JAQUAD = SHARED_DATA / "eval/ja/jaquad"
RUST_BOOK = SHARED_DATA / "docs/markdown/rust-book-ja"


@dataclass(frozen=True)
class Paragraph:
    title: str
    text: str


def jaquad_articles(split: str) -> list[dict]:
    articles = []
    for path in sorted(glob.glob(str(JAQUAD / split / "*.json"))):
        with open(path, encoding="utf-8") as fh:
            articles.extend(json.load(fh)["data"])
    return articles


def jaquad_paragraphs(split: str) -> list[Paragraph]:
    return [
        Paragraph(a["title"], p["context"]) for a in jaquad_articles(split) for p in a["paragraphs"]
    ]


def jaquad_questions(split: str) -> list[tuple[str, str, int]]:
    """(question, title, paragraph index within jaquad_paragraphs(split))."""
    out, index = [], 0
    for article in jaquad_articles(split):
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                out.append((qa["question"], article["title"], index))
            index += 1
    return out


def rust_book_paragraphs() -> list[Paragraph]:
    folder = DocumentFolder(RUST_BOOK)
    out = []
    for doc in folder.docs():
        for chunk in doc.chunks:
            heading = chunk.heading_path.split(" > ")[-1] if chunk.heading_path else doc.title
            out.append(Paragraph(heading, chunk.text))
    return out


def paragraph_pool() -> list[Paragraph]:
    # dev first: its questions then have their paragraph in every source size
    return jaquad_paragraphs("dev") + jaquad_paragraphs("train") + rust_book_paragraphs()


CATEGORIES = 500


def synthetic_docs(pool: list[Paragraph], n: int, seed: int = 7) -> Iterator[Doc]:
    """``n`` documents, each two real paragraphs; the first use of a title is plain, later
    ones get a number (``浅草寺 (3)``) so that exact titles exist amid many mentions; rank
    scores are skewed like page views (most documents unpopular)."""
    rng = random.Random(seed)
    used: dict[str, int] = {}
    for i in range(n):
        first = pool[i % len(pool)] if i < len(pool) else rng.choice(pool)
        second = rng.choice(pool)
        count = used.get(first.title, 0) + 1
        used[first.title] = count
        title = first.title if count == 1 else f"{first.title} ({count})"
        yield Doc(
            key=f"doc-{i}",
            title=title,
            body=f"{first.text}\n\n{second.text}",
            opening=first.text[:200],
            rank_score=rng.random() ** 4,
            # a category per source article (500 of them), so facets have something to count
            tags=[f"c{zlib.crc32(first.title.encode()) % CATEGORIES}"],
        )
