from chiezo.core.markdown import (
    MAX_CHARS,
    chunk_sections,
    document_title,
    markdown_links,
    opening_paragraph,
    parse_sections,
    split_long,
)


def test_headings_inside_code_fences_are_not_headings():
    text = "# Setup\n\nRun this:\n\n```sh\n# install the tool\nmake install\n```\n\n## Next\nmore\n"
    sections = parse_sections(text)
    assert [s.path for s in sections] == [("Setup",), ("Setup", "Next")]
    assert "# install the tool" in sections[0].text


def test_tilde_fences_and_longer_closing_fences():
    text = "# A\n~~~~\n# not a heading\n~~~\n# still code\n~~~~\n## B\nx\n"
    assert [s.path for s in parse_sections(text)] == [("A",), ("A", "B")]


def test_unclosed_fence_runs_to_the_end_without_crashing():
    text = "# Title\n\n```python\n# comment\ndef f():\n    pass\n## also code\n"
    sections = parse_sections(text)
    assert [s.path for s in sections] == [("Title",)]
    chunks = chunk_sections(parse_sections(text))
    assert len(chunks) == 1 and "## also code" in chunks[0].text


def test_headings_in_html_comments_are_ignored():
    text = "<!--\n# English Title\n-->\n# 日本語の題\n本文\n"
    sections = parse_sections(text)
    assert document_title(sections) == "日本語の題"


def test_setext_headings():
    text = "Guide\n=====\n\nintro\n\nUsage\n-----\n\nrun it\n"
    sections = parse_sections(text)
    assert [s.path for s in sections] == [("Guide",), ("Guide", "Usage")]


def test_a_list_item_followed_by_dashes_is_not_a_heading():
    text = "# T\n\n- item\n---\nafter\n"
    assert [s.path for s in parse_sections(text)] == [("T",)]


def test_title_falls_back_to_the_highest_level_heading():
    assert document_title(parse_sections("## 所有権とは？\n\n本文\n## 次\n")) == "所有権とは？"
    assert document_title(parse_sections("no headings at all\n")) is None


def test_tiny_sibling_sections_merge_and_keep_their_headings_inline():
    text = "# Doc\n\n## A\n\nalpha\n\n## B\n\nbeta\n\n## C\n\ngamma\n"
    chunks = chunk_sections(parse_sections(text))
    assert len(chunks) == 1
    assert chunks[0].heading_path == "Doc"
    for heading in ("## A", "## B", "## C"):
        assert heading in chunks[0].text


def test_merging_stops_near_the_target_size():
    body = "x" * 500
    text = "# Doc\n" + "".join(f"\n## S{i}\n\n{body}\n" for i in range(4))
    chunks = chunk_sections(parse_sections(text))
    assert len(chunks) >= 3
    assert all(len(c.text) <= 800 + 20 for c in chunks)


def test_breadcrumbs_follow_the_heading_path():
    big = "word " * 200  # each section ~1000 chars: no merging
    text = f"# Book\n\n## Part\n\n### Chapter\n\n{big}\n\n### Other\n\n{big}\n"
    chunks = chunk_sections(parse_sections(text))
    crumbs = [c.heading_path for c in chunks]
    assert "Book > Part > Chapter" in crumbs
    assert "Book > Part > Other" in crumbs


def test_a_tiny_document_is_one_chunk():
    text = "# Doc\n\n## A\n\n### A1\n\nsmall\n\n## B\n\n### B1\n\nsmall too\n"
    assert len(chunk_sections(parse_sections(text))) == 1


def test_a_heading_without_text_stays_with_what_follows_it():
    body = "z" * 500
    text = f"# Doc\n\n## A\n\n### A1\n\n{body}\n\n## B\n\n### B1\n\n{body}\n"
    chunks = chunk_sections(parse_sections(text))
    assert len(chunks) == 2
    assert "### A1" in chunks[0].text and "## B" not in chunks[0].text
    assert chunks[1].text.startswith("## B") and "### B1" in chunks[1].text
    assert chunks[1].heading_path == "Doc > B > B1"


def test_oversized_sections_split_on_lines_with_overlap():
    lines = [f"line {i:03d} " + "y" * 60 for i in range(60)]  # ~4,300 characters
    text = "# Big\n\n" + "\n".join(lines)
    chunks = chunk_sections(parse_sections(text))
    assert len(chunks) >= 3
    assert all(len(c.text) <= MAX_CHARS for c in chunks)
    assert all(c.heading_path == "Big" for c in chunks)
    # the last lines of one piece open the next (overlap), and no line is cut in the middle
    first_last_line = chunks[0].text.splitlines()[-1]
    assert first_last_line in chunks[1].text
    for chunk in chunks:
        for line in chunk.text.splitlines():
            assert line in ("# Big", "") or line in lines


def test_a_long_unbroken_japanese_paragraph_splits_at_sentence_ends():
    sentence = "吾輩は猫である。名前はまだ無い。"
    text = sentence * 200  # 3,200 characters on one line
    pieces = split_long(text)
    assert len(pieces) >= 2
    assert all(len(p) <= MAX_CHARS for p in pieces)
    assert all(p.rstrip().endswith("。") for p in pieces[:-1])


def test_opening_paragraph_skips_headings_code_and_lists():
    text = (
        "# T\n\n```\ncode\n```\n\n- a list\n\nThe first real paragraph\ncontinues here.\n\nNext.\n"
    )
    assert opening_paragraph(parse_sections(text)) == "The first real paragraph continues here."


def test_markdown_links_exclude_images():
    text = "See [intro](intro.md#top) and ![img](pic.png) and [site](https://example.org)."
    assert markdown_links(text) == ["intro.md#top", "https://example.org"]


def test_a_tiny_preamble_leads_into_the_first_section_instead_of_standing_alone():
    body = "本文。" * 300  # a large first section
    text = f"<!--\n## English Title\n-->\n\n## 日本語の題\n\n{body}\n"
    chunks = chunk_sections(parse_sections(text))
    assert chunks[0].text.startswith("<!--")
    assert chunks[0].heading_path == "日本語の題"
    assert all(c.heading_path for c in chunks)


def test_the_continuation_lines_of_a_list_item_are_not_the_opening():
    text = (
        "# Searching\n\n1. Exact titles come first. Searching `浅草寺`\n"
        "   shows the article before longer ones.\n2. Then bm25.\n\nOrdinary prose here.\n"
    )
    assert opening_paragraph(parse_sections(text)) == "Ordinary prose here."


def test_a_heading_with_inline_html_reads_as_its_text():
    # the Rust book's translation writes a reading as ruby in a heading (ch05-01)
    text = (
        "# 構造体\n\n### フィールドのないユニット<ruby>様<rp>(</rp><rt>よう</rt><rp>)</rp>"
        '</ruby>構造体\n\n本文\n\n## `Rc<T>`は、<span class="x">参照</span>カウント\n\n本文\n'
    )
    sections = parse_sections(text)
    assert sections[1].path == ("構造体", "フィールドのないユニット様構造体")
    assert sections[2].path == ("構造体", "`Rc<T>`は、参照カウント")  # code as written
    chunks = chunk_sections(sections, merge=False)
    assert [c.heading_path for c in chunks][1] == "構造体 > フィールドのないユニット様構造体"
    # the chunk's own heading line says the same, for the model that reads it
    assert chunks[1].text.startswith("### フィールドのないユニット様構造体\n")
    assert "<" not in "".join(c.text for c in chunks).replace("`Rc<T>`", "")


def test_a_heading_that_is_markup_alone_and_a_setext_one_are_cleaned_too():
    sections = parse_sections("題の<b>太字</b>\n===\n\n本文\n\n## <br>\n\nx\n")
    assert sections[0].path == ("題の太字",) and sections[0].lines[0] == "# 題の太字"
    assert sections[1].path == ("題の太字", "(untitled)")
    assert document_title(sections) == "題の太字"


def test_an_opening_joins_soft_wrapped_japanese_lines_without_a_space():
    sections = parse_sections(
        "# 題\n\nどんな旅もどこかから始まります。\nこの章では、\nthe book\nを読む。\n"
    )
    assert opening_paragraph(sections, soft_wraps=True) == (
        "どんな旅もどこかから始まります。この章では、 the book を読む。"
    )
    # text converted from a PDF or a sheet breaks lines where the document does
    assert opening_paragraph(sections) == (
        "どんな旅もどこかから始まります。 この章では、 the book を読む。"
    )
