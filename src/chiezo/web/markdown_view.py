"""A Markdown document shown as a page: headings, lists, tables and code, never raw ``#``.

Raw HTML in a file is shown as text (a document must not script the page), images become
their alt text (a page served offline must not fetch anything, and a remote image would), and
a relative link to another file of the folder goes to that file's document page.
"""

from __future__ import annotations

import posixpath
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt
from markupsafe import Markup, escape


def render_markdown(text: str, source: str, key: str) -> Markup:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.add_render_rule("image", _image_as_text)
    md.add_render_rule("link_open", _link_rewriter(source, key))
    return Markup(md.render(text))


def _image_as_text(self, tokens, idx, options, env) -> str:
    alt = self.renderInlineAsText(tokens[idx].children or [], options, env)
    return f'<span class="image-alt">[{escape(alt or "image")}]</span>'


def _link_rewriter(source: str, key: str):
    folder = posixpath.dirname(key)

    def link_open(self, tokens, idx, options, env) -> str:
        token = tokens[idx]
        href = token.attrGet("href") or ""
        parts = urlsplit(href)
        if parts.scheme or href.startswith(("#", "/")):
            if parts.scheme in ("http", "https"):
                token.attrSet("rel", "noopener")
        elif parts.path:
            target = posixpath.normpath(posixpath.join(folder, parts.path))
            token.attrSet("href", f"/doc/{quote(source)}?key={quote(target)}")
        return self.renderToken(tokens, idx, options, env)

    return link_open
