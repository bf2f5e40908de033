"""A Markdown document shown as a page: headings, lists, tables and code, never raw ``#``.

Raw HTML in a file is shown as text (a document must not script the page), except what a
reader should never see as text: HTML comments are left out (a translation such as the Rust
book keeps its English original in them), wrapper tags that carry only a class (``<span
class="filename">``) leave just their text, and a few formatting elements without attributes
(ruby readings, superscripts) are kept as themselves. Images become their alt text (a page
served offline must not fetch anything, and a remote image would), and a relative link to
another file of the folder goes to that file's document page.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup, escape

# Elements kept as themselves, written again without their attributes (so nothing a file
# writes can run or style the page), and wrappers whose tags are left out (their text stays).
KEPT_ELEMENTS = {
    "ruby",
    "rt",
    "rp",
    "sup",
    "sub",
    "b",
    "i",
    "em",
    "strong",
    "code",
    "kbd",
    "br",
    "small",
    "mark",
    "s",
    "u",
    "del",
    "ins",
}
UNWRAPPED_ELEMENTS = {"span", "font"}
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)(?:\s[^<>]*)?/?>\Z")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
# A render rule as markdown-it calls it: bound to the HTML renderer, given the token stream.
RenderRule = Callable[[RendererHTML, Sequence[Token], int, OptionsDict, EnvType], str]


def render_markdown(text: str, source: str, key: str) -> Markup:
    md = _parser(source, key)
    md.add_render_rule("html_block", _html_block(_parser(source, key).disable("html_block")))
    return Markup(md.render(text))


def _parser(source: str, key: str) -> MarkdownIt:
    """Raw HTML is parsed (never passed through: see the html rules) so that comments can be
    told from text."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.add_render_rule("image", _image_as_text)
    md.add_render_rule("link_open", _link_rewriter(source, key))
    md.add_render_rule("html_inline", _html_inline)
    md.add_render_rule("softbreak", _softbreak)
    return md


# Japanese and Chinese characters: a line break between two of them is a writer's wrap, and a
# browser draws a newline in a paragraph as a space (Chromium: 道路交通法⏎施行令 shows as
# "道路交通法 施行令"), a space the text does not have.
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")


def _softbreak(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A line break inside a paragraph: nothing between two Japanese characters, else the
    newline CommonMark keeps (a space in the browser, as between English words)."""
    before = tokens[idx - 1].content[-1:] if idx > 0 else ""
    after = tokens[idx + 1].content[:1] if idx + 1 < len(tokens) else ""
    return "" if _CJK.match(before) and _CJK.match(after) else "\n"


def _html_block(lines: MarkdownIt) -> RenderRule:
    """A block of raw HTML without its comments; what is left is read again as Markdown
    lines (``lines`` parses no HTML blocks), so its tags go through ``_html_inline`` like
    any other: a ``<script>`` line shows as the text ``<script>``."""

    def html_block(
        self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
    ) -> str:
        rest = _COMMENT.sub("", tokens[idx].content)
        return lines.render(rest, env) if rest.strip() else ""

    return html_block


def _html_inline(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A tag within text: a comment is left out, a kept element written again bare, an
    unwrapped one left out (its text stays), anything else shown as the text it is."""
    content = tokens[idx].content
    if content.startswith("<!--"):
        return ""
    tag = _TAG.match(content)
    name = tag.group(2).lower() if tag else ""
    if tag and name in KEPT_ELEMENTS:
        return f"<{tag.group(1)}{name}>"
    return "" if name in UNWRAPPED_ELEMENTS else str(escape(content))


def _image_as_text(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    alt = self.renderInlineAsText(tokens[idx].children or [], options, env)
    return f'<span class="image-alt">[{escape(alt or "image")}]</span>'


def _link_rewriter(source: str, key: str) -> RenderRule:
    folder = posixpath.dirname(key)

    def link_open(
        self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
    ) -> str:
        token = tokens[idx]
        # markdown-it types an attribute as str | int | float; an href is always text
        href = str(token.attrGet("href") or "")
        parts = urlsplit(href)
        if parts.scheme or href.startswith(("#", "/")):
            if parts.scheme in ("http", "https"):
                token.attrSet("rel", "noopener")
        elif parts.path:
            target = posixpath.normpath(posixpath.join(folder, parts.path))
            token.attrSet("href", f"/doc/{quote(source)}?key={quote(target)}")
        return self.renderToken(tokens, idx, options, env)

    return link_open
