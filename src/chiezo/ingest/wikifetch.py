"""Fetching a Wikipedia dump: the pages-articles file (and optionally page views and
page_props) from the Wikimedia dumps site or a mirror.

* The dump date is the one given, or the newest whose articles dump is finished
  (``<wiki>/<date>/dumpstatus.json`` says ``done``).
* Downloads resume: a partial ``.part`` file continues with an HTTP Range request.
* Every file with a published checksum is verified (sha1, else md5) before it is used; a
  mismatch deletes the file and fails.
* Progress shows bytes with rate and ETA; an unreachable site is a clear error that says how
  to proceed offline (download elsewhere, pass the file).

Fetching is the only network access Chiezo makes outside a configured LLM endpoint, and only
when asked to ingest without a file.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chiezo.core.addresses import Address
from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.download import Room, download, get_json, get_text

DEFAULT_MIRROR = "https://dumps.wikimedia.org"
# Preference among the dump jobs that hold all articles in one file.
ARTICLE_JOBS = ("articlesmultistreamdump", "articlesdumprecombine", "articlesdump")


@dataclass
class WikiDownload:
    """What ``fetch_dump`` downloaded: the dump, and with ``extras`` its page views and
    page_props (a kind's fetch turns these into store/kinds.py ``Fetched``)."""

    dump: Path
    pageviews: Path | None = None
    page_props: Path | None = None
    date: str = ""
    site: str = ""  # the dumps site or mirror it came from
    index: Path | None = None  # a multistream dump's index, saved beside it


def fetch_dump(
    settings: Settings,
    language: str,
    *,
    date: str | None = None,
    mirror: str | None = None,
    extras: bool = False,
    progress: Progress | None = None,
    room: Room | None = None,
) -> WikiDownload:
    """The dump of ``language`` (the newest finished one, or of ``date``), and with ``extras``
    its page views and page_props. ``room(dump bytes)``: the space the build from it will need,
    checked with the download's own before a byte is fetched (download.py)."""
    progress = progress or NullProgress()
    base = (mirror or os.environ.get("CHIEZO_WIKI_MIRROR") or DEFAULT_MIRROR).rstrip("/")
    wiki = f"{language}wiki"
    date, status = _choose_date(base, wiki, date)
    target = settings.data_dir / "downloads" / wiki / date
    target.mkdir(parents=True, exist_ok=True)
    name, meta = _article_file(status, wiki, date)
    dump = download(
        _absolute(base, meta.get("url") or f"/{wiki}/{date}/{name}"),
        target / name,
        checksum=_checksum(meta),
        size=meta.get("size"),
        progress=progress,
        room=room,
    )
    fetched = WikiDownload(dump=dump, date=date, site=Address.parse(base).url)  # recorded
    index = _index_file(status, name)
    if index is not None:  # lets the workers of `--ray` read their own streams (wikistreams.py)
        fetched.index = _fetch_index(base, wiki, date, index, target, progress)
    if extras:
        fetched.page_props = _fetch_page_props(base, wiki, date, status, target, progress)
        fetched.pageviews = _fetch_pageviews(base, date, target, progress)
    return fetched


def _choose_date(base: str, wiki: str, date: str | None) -> tuple[str, dict]:
    if date:
        if not re.fullmatch(r"\d{8}", date):
            raise InputError(f"a dump date is YYYYMMDD, got {date!r}")
        status = get_json(f"{base}/{wiki}/{date}/dumpstatus.json")
        if _articles_done(status):
            return date, status
        raise InputError(f"the {wiki} dump of {date} has no finished articles dump on {base}")
    listing = get_text(f"{base}/{wiki}/")
    dates = sorted(set(re.findall(r'href="(\d{8})/"', listing)), reverse=True)
    for candidate in dates[:6]:
        try:
            status = get_json(f"{base}/{wiki}/{candidate}/dumpstatus.json")
        except InputError:
            continue
        if _articles_done(status):
            return candidate, status
    raise InputError(
        f"no finished {wiki} dump found on {base}",
        hint="give --date, or download the dump yourself and pass its path",
    )


def _articles_done(status: dict) -> bool:
    jobs = status.get("jobs", {})
    return any(jobs.get(job, {}).get("status") == "done" for job in ARTICLE_JOBS)


def _article_file(status: dict, wiki: str, date: str) -> tuple[str, dict]:
    jobs = status.get("jobs", {})
    for job in ARTICLE_JOBS:
        files = jobs.get(job, {}).get("files", {})
        whole = {n: m for n, m in files.items() if n.endswith((".xml.bz2", ".xml.xz", ".xml"))}
        if jobs.get(job, {}).get("status") == "done" and len(whole) == 1:
            return next(iter(whole.items()))
    raise InputError(f"the {wiki} dump of {date} lists no single pages-articles file")


def _index_file(status: dict, dump_name: str) -> tuple[str, dict] | None:
    """The index of a multistream dump, listed in the same job as the dump."""
    wanted = dump_name.removesuffix(".xml.bz2") + "-index.txt.bz2"
    for job in status.get("jobs", {}).values():
        meta = job.get("files", {}).get(wanted)
        if meta is not None and job.get("status") == "done":
            return wanted, meta
    return None


def _fetch_index(
    base: str,
    wiki: str,
    date: str,
    index: tuple[str, dict[str, Any]],  # its name, and its entry of the dump's status (JSON)
    target: Path,
    progress: Progress,
) -> Path | None:
    name, meta = index
    url = _absolute(base, meta.get("url") or f"/{wiki}/{date}/{name}")
    try:
        return download(
            url, target / name, checksum=_checksum(meta), size=meta.get("size"), progress=progress
        )
    except InputError as exc:  # the dump serves without it: pages are then sent to workers
        progress.warn(f"the multistream index was not fetched ({exc.message})")
        return None


def _fetch_page_props(
    base: str, wiki: str, date: str, status: dict[str, Any], target: Path, progress: Progress
) -> Path | None:
    files = status.get("jobs", {}).get("pagepropstable", {}).get("files", {})
    for name, meta in files.items():
        url = _absolute(base, meta.get("url") or f"/{wiki}/{date}/{name}")
        return download(
            url, target / name, checksum=_checksum(meta), size=meta.get("size"), progress=progress
        )
    progress.warn(f"the {wiki} dump of {date} has no page_props table; Wikidata ids skipped")
    return None


def _fetch_pageviews(base: str, date: str, target: Path, progress: Progress) -> Path | None:
    """The monthly pageview_complete file of the month before the dump."""
    day = dt.date(int(date[:4]), int(date[4:6]), 1) - dt.timedelta(days=1)
    month = f"{day.year}-{day.month:02d}"
    folder = f"{base}/other/pageview_complete/monthly/{day.year}/{month}"
    name = f"pageviews-{day.year}{day.month:02d}-user.bz2"
    checksum = None
    try:
        sums = get_text(f"{folder}/md5sums.txt")
        match = re.search(rf"^([0-9a-f]{{32}})\s+{re.escape(name)}$", sums, re.M)
        checksum = ("md5", match.group(1)) if match else None
    except InputError:
        progress.warn(f"no checksum published for {name}; it is used unverified")
    try:
        return download(f"{folder}/{name}", target / name, checksum=checksum, progress=progress)
    except InputError as exc:
        progress.warn(f"page views not fetched ({exc.message}); popularity from links instead")
        return None


def _checksum(meta: dict) -> tuple[str, str] | None:
    for algorithm in ("sha1", "md5"):
        if meta.get(algorithm):
            return algorithm, meta[algorithm]
    return None


def _absolute(base: str, url: str) -> str:
    return url if url.startswith(("http://", "https://")) else base + "/" + url.lstrip("/")
