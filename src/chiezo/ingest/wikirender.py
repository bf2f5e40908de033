"""Rendering Wikipedia pages, where it runs: batches of pages → the parts of their documents.

The expensive half of a Wikipedia build (mwparserfromhell, templates, tables, passages) runs
in workers — parser processes on this machine (``local_parsers``), or tasks on a Ray cluster
(cluster/wiki.py) — each set up once with the wiki's namespaces (``init_worker``) and then
given batches (``render_batch``). The builder (ingest/wikipedia.py) keeps the order.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from chiezo.core.errors import BuildError
from chiezo.core.markdown import BREADCRUMB_SEPARATOR, chunk_sections, parse_sections
from chiezo.core.models import Chunk
from chiezo.core.processes import die_with_parent, stop_processes
from chiezo.ingest.wikitext import Namespaces, page_flags, parse_article

# Passages of a few hundred characters: a 512-token embedder reads ~500 Japanese characters
# at most, and smaller passages make sharper snippets (measured in docs/design.md).
DEFAULT_CHUNK_CHARS = 500

# a page to render: (page id, title, wikitext, revision timestamp)
PageRow = tuple[int, str, str, str | None]
# the parts of one page's Doc (``render_batch``); None where its markup defeated the parser
Rendered = dict[str, Any] | None


@contextlib.contextmanager
def local_parsers(ns: Namespaces, chunk_chars: int, workers: int):
    """Parser processes on this machine: ``(submit(batch), workers)``.

    A process pool that notices a worker's death: with ``multiprocessing.Pool`` a worker killed
    mid-batch loses its batch, and the build waits for it for ever; its ``__exit__`` then hangs
    in ``_terminate_pool`` joining a task thread blocked on dead workers (a cancelled job stayed
    "running" for 19+ minutes). ``ProcessPoolExecutor`` fails every pending batch when a
    worker dies (``BrokenProcessPool``: the build fails, naming it), and on the way out
    the workers are killed and waited for a bounded time, never joined for ever."""
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        workers,
        mp_context=context,
        initializer=init_worker,
        initargs=(ns, chunk_chars, os.getpid()),
    )
    try:
        yield (lambda batch: _Rendered(_submitted(pool, batch))), workers
    finally:
        _stop_pool(pool)


def _submitted(pool: ProcessPoolExecutor, batch: list[PageRow]) -> Future[list[Rendered]]:
    try:
        return pool.submit(render_batch, batch)
    except BrokenProcessPool as exc:  # a worker died before this batch was sent
        raise _parser_died() from exc


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """End the pool at once, whether its work is done (the workers idle) or abandoned (a failed
    or cancelled build): pending batches dropped, workers killed."""
    workers = list((getattr(pool, "_processes", None) or {}).values())  # the only handle on them
    pool.shutdown(wait=False, cancel_futures=True)
    stop_processes(workers)


class _Rendered:
    """A batch on its way back; ``get()`` as ``multiprocessing``'s results and Ray's have it."""

    def __init__(self, future: Future[list[Rendered]]) -> None:
        self.future = future

    def get(self) -> list[Rendered]:
        try:
            return self.future.result()
        except BrokenProcessPool as exc:
            raise _parser_died() from exc


def _parser_died() -> BuildError:
    return BuildError(
        "a wikitext parser process ended unexpectedly (killed, or out of memory): "
        "nothing was switched in",
        hint="see the system log (dmesg) for why it ended",
    )


def default_workers() -> int:
    """One parser process per core, plus one: the main process (XML, decompression, writes)
    leaves a core partly idle. Measured on 2 cores: 3 workers read a 1,890-article dump in
    35.3 s, 2 workers in 41.9 s."""
    return min((os.cpu_count() or 1) + 1, 8)


_WORKER_NS: Namespaces | None = None
_WORKER_CHUNK_CHARS = DEFAULT_CHUNK_CHARS


def init_worker(ns: Namespaces, chunk_chars: int, parent_pid: int | None = None) -> None:
    """Set a parser process (or a cluster task) up for ``render_batch``; a local parser process
    (``parent_pid``: the builder's) ends with the builder."""
    global _WORKER_NS, _WORKER_CHUNK_CHARS
    if parent_pid is not None:
        die_with_parent(parent_pid)
    _WORKER_NS = ns
    _WORKER_CHUNK_CHARS = chunk_chars


def article_chunks(title: str, text: str, target: int) -> list[Chunk]:
    """Lead and sections in passages of about ``target`` characters (at most twice that),
    each with the article title leading its breadcrumb (浅草寺 > 歴史)."""
    chunks = chunk_sections(parse_sections(text), target=target, max_chars=2 * target)
    for chunk in chunks:
        chunk.heading_path = (
            f"{title}{BREADCRUMB_SEPARATOR}{chunk.heading_path}" if chunk.heading_path else title
        )
    return chunks


def render_batch(batch: list[PageRow]) -> list[Rendered]:
    """In a worker: wikitext → the parts of a Doc. A page whose markup defeats the
    parser comes back as None with its raw text kept by the caller."""
    out: list[Rendered] = []
    for _, title, text, _ in batch:
        try:
            article = parse_article(text, _WORKER_NS or Namespaces(), title)
        except Exception:  # noqa: BLE001 - broken markup must not stop the build
            out.append(None)
            continue
        out.append(
            {
                "text": article.text,
                "opening": article.opening,
                "categories": article.categories,
                "links": article.links,
                "point": article.point,
                "point_source": article.point_source,
                "attrs": article.attrs,
                "flags": page_flags(title, article.disambiguation),
                "chunks": [
                    (c.heading_path, c.text)
                    for c in article_chunks(title, article.text, _WORKER_CHUNK_CHARS)
                ],
            }
        )
    return out
