"""Fetching place data: GeoNames exports and OpenStreetMap regional extracts, with the shared
resumable, verifying downloader (``download.py``).

* GeoNames (``https://download.geonames.org/export/dump/``, or ``--mirror`` /
  ``CHIEZO_GEONAMES_MIRROR``): ``<NAME>.zip`` (``cities15000``, ``JP``, ``allCountries``) and
  ``admin1CodesASCII.txt``; a country's alternate names (``alternatenames/JP.zip``: Japanese
  names of Japan's places and areas without the 700 MB ``alternateNamesV2.zip``). GeoNames
  publishes no checksums, so a fetched zip is checked for integrity instead (every member's
  CRC) and the sha256 of what was fetched is recorded beside it (``JP.zip.sha256``): a copy
  that no longer matches it (damaged on disk, cut short) is fetched again.
* OpenStreetMap extracts (Geofabrik layout: ``<region>-latest.osm.pbf`` with a ``.md5`` beside
  it; ``--mirror`` / ``CHIEZO_OSM_MIRROR``), verified against that md5.
* Before a byte is downloaded, the disk is checked for the file and the build that reads it
  (``download(room=...)``); the memory of that build is checked by the kind before fetching.
* ``refresh`` (``chiezo rebuild --fetch``): a GeoNames file kept from before is fetched again
  if the server's copy changed since (their names never change; no checksum tells).
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.download import Room, build_room, download, get_text

GEONAMES_MIRROR = "https://download.geonames.org/export/dump"
OSM_MIRROR = "https://download.geofabrik.de"


def fetch_geonames(
    settings: Settings,
    name: str,
    *,
    mirror: str | None = None,
    progress: Progress | None = None,
    refresh: bool = False,
) -> tuple[Path, Path]:
    """(the export's zip, admin1CodesASCII.txt) in ``$CHIEZO_DATA/downloads/geonames``."""
    progress = progress or NullProgress()
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise InputError(f"not a GeoNames export name: {name!r}", hint="e.g. cities15000, JP")
    base = geonames_base(mirror)
    target = _target(settings, "geonames")
    export = _fetch_zip(
        f"{base}/{name}.zip",
        target / f"{name}.zip",
        progress,
        refresh=refresh,
        room=partial(_geonames_room, settings),
    )
    admin1 = download(
        f"{base}/admin1CodesASCII.txt",
        target / "admin1CodesASCII.txt",
        progress=progress,
        refresh=refresh,
    )
    return export, admin1


def _geonames_room(settings: Settings, size: int) -> list[tuple[Path, int]]:
    """The build reads the zip's text, about 4x the zip (geonames.ingest_geonames)."""
    return [build_room(settings.corpus_dir, size * 4)]


def fetch_alternate_names(
    settings: Settings,
    country: str,
    *,
    mirror: str | None = None,
    progress: Progress | None = None,
    refresh: bool = False,
) -> Path:
    """``alternatenames/<CC>.zip``: one country's alternate names (the alternateNamesV2
    columns), in ``$CHIEZO_DATA/downloads/geonames/alternatenames`` (apart from the export of
    the same name)."""
    progress = progress or NullProgress()
    if not re.fullmatch(r"[A-Za-z]{2}", country):
        raise InputError(
            f"not a country code: {country!r}", hint="two letters, e.g. JP (ISO 3166-1)"
        )
    code = country.upper()
    url = f"{geonames_base(mirror)}/alternatenames/{code}.zip"
    target = _target(settings, "geonames/alternatenames")
    return _fetch_zip(url, target / f"{code}.zip", progress, refresh=refresh)


def geonames_base(mirror: str | None) -> str:
    """The GeoNames site a download comes from (recorded, so a refetch asks the same one)."""
    return (mirror or os.environ.get("CHIEZO_GEONAMES_MIRROR") or GEONAMES_MIRROR).rstrip("/")


def _target(settings: Settings, folder: str) -> Path:
    target = settings.data_dir / "downloads" / folder
    target.mkdir(parents=True, exist_ok=True)
    return target


def _fetch_zip(
    url: str, dest: Path, progress: Progress, *, refresh: bool = False, room: Room | None = None
) -> Path:
    """A GeoNames zip, whole (every member's CRC) and as fetched (its recorded sha256)."""
    record = dest.with_name(dest.name + ".sha256")
    if dest.exists() and record.exists() and _recorded(record) != _sha256(dest):
        dest.unlink()  # changed since it was fetched: fetch it again
        record.unlink()
    download(url, dest, progress=progress, refresh=refresh, room=room)
    try:
        _check_zip(dest)
    except InputError:
        record.unlink(missing_ok=True)
        raise
    digest = _sha256(dest)
    if not record.exists() or _recorded(record) != digest:  # new, or fetched anew (refresh)
        record.write_text(f"{digest}  {dest.name}\n", encoding="utf-8")
    return dest


def _check_zip(path: Path) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            broken = archive.testzip()
    except zipfile.BadZipFile as exc:
        path.unlink(missing_ok=True)
        raise InputError(f"{path.name} is not a valid zip; deleted, fetch again") from exc
    if broken:
        path.unlink(missing_ok=True)
        raise InputError(f"{path.name} is damaged ({broken}); deleted, fetch again")


def _recorded(record: Path) -> str:
    return record.read_text(encoding="utf-8").split(" ", 1)[0].strip()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_osm(
    settings: Settings,
    region: str,
    *,
    mirror: str | None = None,
    progress: Progress | None = None,
    room_for_build: Callable[[int], tuple[Path, int]] | None = None,
) -> Path:
    """``<region>-latest.osm.pbf`` (e.g. ``asia/japan/kanto``) verified against its ``.md5``;
    ``room_for_build(size)`` → (folder, bytes) the build from it takes, checked with the download's
    own before a byte is written (default: the plain estimate of download.build_room)."""
    progress = progress or NullProgress()
    region = region.strip("/")
    if not re.fullmatch(r"[a-z0-9_/-]+", region):
        raise InputError(f"not an extract region: {region!r}", hint="e.g. asia/japan/kanto")
    base = osm_base(mirror)
    name = f"{region.rsplit('/', 1)[-1]}-latest.osm.pbf"
    url = f"{base}/{region}-latest.osm.pbf"
    match = re.match(r"^([0-9a-f]{32})\b", get_text(url + ".md5").strip())
    if not match:
        raise InputError(f"{url}.md5 holds no md5 checksum")
    target = settings.data_dir / "downloads" / "osm"
    target.mkdir(parents=True, exist_ok=True)
    room = room_for_build or (lambda size: build_room(settings.corpus_dir, size))
    return download(
        url,
        target / name,
        checksum=("md5", match.group(1)),
        progress=progress,
        room=lambda size: [room(size)],
    )


def osm_base(mirror: str | None) -> str:
    """The extract server a download comes from (recorded, so a refetch asks the same one)."""
    return (mirror or os.environ.get("CHIEZO_OSM_MIRROR") or OSM_MIRROR).rstrip("/")
