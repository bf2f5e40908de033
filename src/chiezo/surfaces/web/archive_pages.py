"""A document of an archive source (a Kiwix ZIM) as its archive shows it: the article's own
HTML, with the pictures, styles and links it names resolved inside the same file.

Each entry is served at ``/doc/{source}/archive/{its path in the archive}``, so an article's
relative links (``../I/m/photo.jpg``, ``../-/s/style.css``, ``Georgia_on_My_Mind``) land on the
entries they name without rewriting a byte of it; a redirect entry answers 302 to its target.
The archive is the file recorded as the source's input *here* (a local build's, or the one
named importing it), never a path a document or a request names, and only while it is the
size the build read.

An archive is someone else's content: a ZIM article carries scripts (Wikipedia's own, or
anyone's in a ZIM made by hand). Every entry is sent under the sandbox the originals of
document sources get (surfaces/web/document_pages.py: a unique origin, no scripts), opened
only so far that the page still looks like itself: pictures, styles and fonts from this same
archive's entries (``'self'``) or inline. Nothing is fetched from anywhere else, and the
media type is the archive's, never sniffed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fastapi.responses import RedirectResponse, Response, StreamingResponse

from chiezo.core.errors import NotFound
from chiezo.ops.context import Context
from chiezo.ops.links import archive_href
from chiezo.store.kinds import ArchiveEntry

ARCHIVE_SANDBOX = (
    "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "font-src 'self' data:; media-src 'self'"
)
PIECE = 1 << 20  # an entry is sent in pieces of its memory, not copied whole


def archive_entry(service: Context, source: str, path: str) -> ArchiveEntry:
    """The entry at ``path`` of the archive ``source`` was built from; NotFound with the
    reason otherwise."""
    opened = service.library.get(source)
    kind = opened.kind
    if kind is None or not opened.archived:
        raise NotFound(f"{source} is not built from an archive", hint="its source keeps none")
    recorded = opened.info().input
    archive = Path(recorded.get("path") or "")
    if not recorded.get("path") or not archive.is_file():
        raise NotFound(
            f"the archive {source} was built from is not there any more",
            hint="rebuild the source if the file moved",
        )
    if recorded.get("bytes") and archive.stat().st_size != recorded["bytes"]:
        raise NotFound(
            f"the archive {source} was built from has changed since",
            hint=f"rebuild it: chiezo rebuild {source}",
        )
    entry = kind.archive_entry(archive, path) if path and "\0" not in path else None
    if entry is None:
        raise NotFound(f"{source}'s archive has no entry {path!r}")
    return entry


def archive_response(source: str, path: str, entry: ArchiveEntry) -> Response:
    """The entry as a browser may safely open it, or a redirect to the one it stands for."""
    headers = {"Content-Security-Policy": ARCHIVE_SANDBOX, "X-Content-Type-Options": "nosniff"}
    if entry.redirect is not None:
        return RedirectResponse(archive_href(source, entry.redirect), 302, headers=headers)
    view = memoryview(entry.content)
    headers["Content-Length"] = str(view.nbytes)
    media_type = entry.media_type or "application/octet-stream"
    return StreamingResponse(_pieces(view), media_type=media_type, headers=headers)


def _pieces(view: memoryview) -> Iterator[bytes]:
    for start in range(0, view.nbytes, PIECE):
        yield bytes(view[start : start + PIECE])
