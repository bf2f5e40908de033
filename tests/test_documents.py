"""The ``docs`` source kind: folders of Markdown and text, and what happens with bad files and
with links out of the folder."""

import os

import pytest

from chiezo.core.errors import BuildError, InputError
from chiezo.ops import reading, searching
from chiezo.ops.requests import DocRequest, SearchRequest

from helpers import build_docs, data_file, write_files

GOOD = {
    "guide/intro.md": "---\ntitle: はじめに\ntags: [入門, guide]\naliases: [Intro]\nrank: 0.7\n"
    "version: 1.2\ndraft: false\nauthors: [Aki, Ben]\n---\n# 無視される見出し\n\n"
    "本文の最初の段落。\n\n詳しくは [使い方](../usage.md#top) と [公式](https://example.org) を参照。\n",
    "usage.md": "# 使い方\n\n## インストール\n\n手順を書く。\n\n## 実行\n\n`chiezo` を動かす。\n",
    "notes.txt": "A plain text note about search engines.\n\nSecond paragraph.\n",
    "image.png": b"\x89PNG\r\n\x1a\n\x00\x00",  # not a document suffix: ignored quietly
    ".hidden/secret.md": "# secret\n",
}


def test_front_matter_becomes_title_tags_aliases_rank_and_attributes(service, tmp_path):
    build_docs(service, write_files(tmp_path / "docs", GOOD), "d")
    doc = reading.doc(
        service,
        DocRequest.of(
            source="d",
            key="guide/intro.md",
            fields=["title", "tags", "aliases", "attrs", "rank_score", "links", "opening"],
        ),
    )
    assert doc["title"] == "はじめに"
    assert doc["tags"] == ["guide", "入門"]
    assert doc["aliases"] == ["Intro"]
    assert doc["rank_score"] == pytest.approx(0.7)
    assert doc["attrs"] == {"authors": ["Aki", "Ben"], "draft": ["false"], "version": ["1.2"]}
    assert doc["links"] == ["https://example.org", "usage.md"]
    assert doc["opening"] == "本文の最初の段落。"


def test_titles_come_from_front_matter_then_heading_then_file_name(service, tmp_path):
    build_docs(service, write_files(tmp_path / "docs", GOOD), "d")
    keys = {s["key"]: s["title"] for s in _all_docs(service, "d")}
    assert keys == {"guide/intro.md": "はじめに", "usage.md": "使い方", "notes.txt": "notes"}


def test_chunks_carry_breadcrumbs(service, tmp_path):
    body = "手順の説明。" * 150  # ~900 characters per section: no merging
    folder = write_files(
        tmp_path / "docs", {"m.md": f"# 手引き\n\n## 準備\n\n{body}\n\n## 実行\n\n{body}\n"}
    )
    build_docs(service, folder, "d")
    chunks = reading.doc(service, DocRequest.of(source="d", title="手引き", fields=["chunks"]))[
        "chunks"
    ]
    assert [c["heading_path"] for c in chunks] == ["手引き > 準備", "手引き > 実行"]


def test_a_missing_folder_is_a_clear_usage_error(service, tmp_path):
    with pytest.raises(InputError, match="no such folder") as info:
        build_docs(service, tmp_path / "nowhere", "d")
    assert info.value.exit_code == 2


def test_an_empty_folder_fails_the_build(service, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BuildError, match="0 documents"):
        build_docs(service, tmp_path / "empty", "d")


def test_bad_files_are_named_skipped_and_the_rest_is_built(service, tmp_path):
    files = dict(GOOD)
    files["binary.md"] = b"# looks like markdown\x00\x01\x02"
    files["latin1.txt"] = "caf\xe9 cr\xe8me".encode("latin-1")
    files["broken-front.md"] = "---\ntitle: [unclosed\n---\n# Still indexed\n\ntext\n"
    folder = write_files(tmp_path / "docs", files)
    os.symlink(folder / "gone.md", folder / "dangling.md")
    report = build_docs(service, folder, "d")
    warnings = "\n".join(report.warnings)
    assert "binary.md: looks binary" in warnings
    assert "latin1.txt: not valid UTF-8 (byte 0xe9 at offset 3)" in warnings
    assert "dangling.md: cannot read" in warnings
    assert "broken-front.md: invalid YAML front matter" in warnings
    assert report.docs == 4  # intro, usage, notes, broken-front (read as text)
    assert (
        reading.doc(service, DocRequest.of(source="d", key="broken-front.md", fields=["title"]))[
            "title"
        ]
        == "Still indexed"
    )


def test_strict_mode_fails_on_the_first_bad_file_and_keeps_the_current_generation(
    service, tmp_path
):
    folder = write_files(tmp_path / "docs", GOOD)
    build_docs(service, folder, "d")
    (folder / "bad.md").write_bytes(b"\xff\xfe\x00\x00")
    with pytest.raises(BuildError, match="bad.md"):
        build_docs(service, folder, "d", strict=True)
    assert service.library.get("d").doc_count == 3


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_named(service, tmp_path):
    folder = write_files(tmp_path / "docs", {**GOOD, "locked.md": "# Locked\n"})
    os.chmod(folder / "locked.md", 0)
    report = build_docs(service, folder, "d")
    assert any("locked.md: permission denied" in w for w in report.warnings)


def test_shift_jis_japanese_text_is_decoded(service, tmp_path):
    text = "# 就業規則\n\n従業員は、この規則を守らなければならない。\n"
    folder = write_files(tmp_path / "docs", {"rules.md": text.encode("cp932")})
    build_docs(service, folder, "d")
    assert (
        searching.search(service, SearchRequest.of(query="従業員", source="d")).hits[0].title
        == "就業規則"
    )


def test_a_single_file_can_be_a_source(service, tmp_path):
    path = write_files(tmp_path / "docs", GOOD) / "usage.md"
    report = build_docs(service, path, "one")
    assert report.docs == 1


@pytest.mark.slow
def test_the_rust_book_builds_with_every_chapter(service):
    folder = data_file("docs/markdown/rust-book-ja")
    report = build_docs(service, folder, "rust")
    chapters = len(list(folder.glob("*.md")))
    assert report.docs == chapters and report.warnings == []
    assert report.chunks > chapters * 10
    info = service.library.get("rust").info().to_dict()
    assert info["input"]["files"] == chapters
    doc = reading.doc(
        service, DocRequest.of(source="rust", title="所有権とは？", fields=["chunks", "key"])
    )
    assert doc["key"] == "ch04-01-what-is-ownership.md"
    assert all(c["heading_path"].startswith("所有権とは？") for c in doc["chunks"])


def test_front_matter_templates_become_attributes(service):
    build_docs(service, data_file("docs/markdown/h13-contract-templates"), "rules")
    doc = reading.doc(
        service, DocRequest.of(source="rules", title="秘密保持契約書（NDA）", fields=["attrs"])
    )
    assert doc["attrs"]["version"] == ["1.0"]
    assert doc["attrs"]["date"] == ["2025-01-20"]


def _all_docs(service, name):
    conn = service.library.get(name).conn
    return [{"key": k, "title": t} for k, t in conn.execute("SELECT key, title FROM docs")]


# -- links out of the folder -------------------------------------------------------------------


def test_links_out_of_a_docs_folder_are_not_indexed_and_said(service, tmp_path):
    outside = write_files(tmp_path / "outside", {"secret.md": "# Secret\n\nnot to be shared\n"})
    folder = write_files(tmp_path / "docs", {"inside.md": "# Inside\n\nshared\n"})
    (folder / "secret.md").symlink_to(outside / "secret.md")
    (folder / "elsewhere").symlink_to(outside, target_is_directory=True)
    (folder / "alias.md").symlink_to(folder / "inside.md")  # inside the folder: indexed
    report = build_docs(service, folder, "docs")
    assert report.docs == 2
    said = " ".join(report.warnings)
    assert "secret.md: a link to" in said and "outside the folder; not indexed" in said
    assert "elsewhere: a link to" in said
    assert searching.search(service, SearchRequest.of(query="Secret", source="docs")).total == 0


def test_a_markdown_opening_joins_its_wrapped_japanese_lines(service, tmp_path):
    # the Rust book's translation wraps its paragraphs in the editor, after 。 or mid-phrase;
    # the lines of a PDF page or a sheet's row are the document's own, and keep a space
    files = {
        "wrapped.md": "# 題\n\nどんな旅もどこかから始まります。\nこの章では、以下の\nことを説明します。\n",
        "rows.csv": "名前,住所\n佐藤,東京\n",
    }
    build_docs(service, write_files(tmp_path / "docs", files), "d")
    wrapped = reading.doc(service, DocRequest.of(source="d", key="wrapped.md", fields=["opening"]))[
        "opening"
    ]
    assert wrapped == "どんな旅もどこかから始まります。この章では、以下のことを説明します。"
    rows = reading.doc(
        service, DocRequest.of(source="d", key="rows.csv", fields=["opening", "title"])
    )
    assert rows == {"opening": "名前: 佐藤 住所: 東京", "title": "rows"}
