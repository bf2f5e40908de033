"""Streaming a MediaWiki XML export (pages-articles): ``.xml``, ``.xml.bz2`` (multistream
too), ``.xml.xz``, ``.xml.gz``.

Pages are yielded one at a time and their elements cleared, so memory stays flat whatever the
dump size. A dump that ends mid-page — a real failure mode of downloads — raises InputError
naming the last complete page, unless ``allow_truncated``, in which case reading stops there and
``truncated`` says so.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from chiezo.core.errors import InputError

_NS = re.compile(r"^\{[^}]*\}")


@dataclass
class Page:
    page_id: int
    title: str
    ns: int
    text: str
    redirect: str | None = None
    timestamp: str | None = None


@dataclass
class SiteInfo:
    dbname: str = ""
    base_url: str = ""
    language: str = ""
    namespaces: dict[int, str] = field(default_factory=dict)

    @property
    def article_url_prefix(self) -> str:
        """``https://ja.wikipedia.org/wiki/`` from the main page URL."""
        match = re.match(r"^(https?://[^/]+/wiki/)", self.base_url)
        return match.group(1) if match else ""


def open_dump(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    """(decompressed stream, the raw file under it — whose position tells progress); the
    caller closes both."""
    name = path.name.lower()
    try:
        raw = open(path, "rb")  # noqa: SIM115 - handed to the caller, closed in close()
    except OSError as exc:
        raise InputError(f"cannot open the dump {path}: {exc}") from exc
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw), raw  # reads every stream of a multistream file
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw), raw
    if name.endswith(".gz"):
        # typeshed has GzipFile as a BufferedIOBase only, not IO[bytes] (BZ2File, LZMAFile are)
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw)), raw
    return raw, raw


class WikiDump:
    """One pass over the pages of a dump; ``siteinfo`` is read first."""

    def __init__(self, path: Path, *, allow_truncated: bool = False):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"no such dump file: {self.path}")
        self.allow_truncated = allow_truncated
        self.truncated: str | None = None
        self.pages_read = 0
        self._stream, self._raw = open_dump(self.path)
        self._events = ET.iterparse(self._stream, events=("start", "end"))
        self._root: ET.Element | None = None  # the first element read
        self.siteinfo = self._read_siteinfo()

    def close(self) -> None:
        self._stream.close()
        self._raw.close()

    def bytes_read(self) -> int:
        """Position in the (compressed) file: progress against its size."""
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return 0

    def _next(self):
        try:
            return next(self._events)
        except ET.ParseError as exc:
            raise self._broken(exc) from exc
        except (EOFError, OSError, lzma.LZMAError) as exc:
            raise self._broken(exc) from exc

    def _broken(self, exc: Exception) -> InputError:
        where = f"after {self.pages_read:,} complete pages"
        if getattr(self, "_last_title", None):
            where += f" (the last: {self._last_title!r}, id {self._last_id})"
        return InputError(
            f"the dump {self.path.name} is malformed or truncated {where}: {exc}",
            hint="download it again, or build from the complete pages with --allow-truncated",
        )

    def _read_siteinfo(self) -> SiteInfo:
        info = SiteInfo()
        while True:
            try:
                event, elem = self._next()
            except StopIteration as exc:
                raise InputError(f"{self.path.name} is not a MediaWiki XML dump (empty)") from exc
            tag = _NS.sub("", elem.tag)
            if event == "start" and self._root is None:
                self._root = elem
                if tag != "mediawiki":
                    raise InputError(f"{self.path.name} is not a MediaWiki XML dump (root <{tag}>)")
                info.language = elem.get("{http://www.w3.org/XML/1998/namespace}lang", "")
                continue
            if event != "end":
                continue
            if tag == "dbname":
                info.dbname = (elem.text or "").strip()
            elif tag == "base":
                info.base_url = (elem.text or "").strip()
            elif tag == "namespace":
                info.namespaces[int(elem.get("key", "0"))] = (elem.text or "").strip()
            elif tag == "siteinfo":
                assert self._root is not None  # set by the first event, its start
                self._root.clear()
                return info
            elif tag == "page":
                raise InputError(f"{self.path.name} has no <siteinfo> before its pages")

    def pages(self) -> Iterator[Page]:
        page: dict = {}
        in_revision = False
        root = self._root
        assert root is not None  # _read_siteinfo read past it
        while True:
            try:
                event, elem = self._next()
            except StopIteration:
                return
            except InputError as exc:
                if self.allow_truncated:
                    self.truncated = exc.message
                    return
                raise
            tag = _NS.sub("", elem.tag)
            if event == "start":
                if tag == "revision":
                    in_revision = True
                elif tag == "page":
                    page = {}
                continue
            if tag == "title":
                page["title"] = elem.text or ""
            elif tag == "ns":
                page["ns"] = int(elem.text or 0)
            elif tag == "id" and not in_revision and "id" not in page:
                page["id"] = int(elem.text or 0)
            elif tag == "redirect":
                page["redirect"] = elem.get("title")
            elif tag == "timestamp" and in_revision:
                page["timestamp"] = elem.text
            elif tag == "text" and in_revision:
                page["text"] = elem.text or ""
            elif tag == "revision":
                in_revision = False
            elif tag == "page":
                root.clear()  # drop the finished page from the tree
                self.pages_read += 1
                self._last_title, self._last_id = page.get("title"), page.get("id")
                yield Page(
                    page_id=page.get("id", 0),
                    title=page.get("title", ""),
                    ns=page.get("ns", 0),
                    text=page.get("text", ""),
                    redirect=page.get("redirect"),
                    timestamp=page.get("timestamp"),
                )
