"""Fetching place data: GeoNames exports and OpenStreetMap regional extracts, with the shared
resumable, verifying downloader (``download.py``).

* GeoNames (``https://download.geonames.org/export/dump/``, or ``--mirror`` /
  ``CHIEZO_GEONAMES_MIRROR``): ``<NAME>.zip`` (``cities15000``, ``JP``, ``allCountries``) and
  ``admin1CodesASCII.txt``. GeoNames publishes no checksums, so a fetched zip is checked for
  integrity instead (every member's CRC).
* OpenStreetMap extracts (Geofabrik layout: ``<region>-latest.osm.pbf`` with a ``.md5`` beside
  it; ``--mirror`` / ``CHIEZO_OSM_MIRROR``), verified against that md5.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

from ..config import Settings
from ..errors import InputError
from ..progress import NullProgress, Progress
from .download import download, get_text

GEONAMES_MIRROR = "https://download.geonames.org/export/dump"
OSM_MIRROR = "https://download.geofabrik.de"


def fetch_geonames(
    settings: Settings, name: str, *, mirror: str | None = None, progress: Progress | None = None
) -> tuple[Path, Path]:
    """(the export's zip, admin1CodesASCII.txt) in ``$CHIEZO_DATA/downloads/geonames``."""
    progress = progress or NullProgress()
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise InputError(f"not a GeoNames export name: {name!r}", hint="e.g. cities15000, JP")
    base = (mirror or os.environ.get("CHIEZO_GEONAMES_MIRROR") or GEONAMES_MIRROR).rstrip("/")
    target = settings.data_dir / "downloads" / "geonames"
    target.mkdir(parents=True, exist_ok=True)
    export = download(f"{base}/{name}.zip", target / f"{name}.zip", progress=progress)
    try:
        with zipfile.ZipFile(export) as archive:
            broken = archive.testzip()
    except zipfile.BadZipFile as exc:
        export.unlink(missing_ok=True)
        raise InputError(f"{export.name} is not a valid zip; deleted, fetch again") from exc
    if broken:
        export.unlink(missing_ok=True)
        raise InputError(f"{export.name} is damaged ({broken}); deleted, fetch again")
    admin1 = download(f"{base}/admin1CodesASCII.txt", target / "admin1CodesASCII.txt",
                      progress=progress)  # fmt: skip
    return export, admin1


def fetch_osm(
    settings: Settings, region: str, *, mirror: str | None = None, progress: Progress | None = None
) -> Path:
    """``<region>-latest.osm.pbf`` (e.g. ``asia/japan/kanto``) verified against its ``.md5``."""
    progress = progress or NullProgress()
    region = region.strip("/")
    if not re.fullmatch(r"[a-z0-9_/-]+", region):
        raise InputError(f"not an extract region: {region!r}", hint="e.g. asia/japan/kanto")
    base = (mirror or os.environ.get("CHIEZO_OSM_MIRROR") or OSM_MIRROR).rstrip("/")
    name = f"{region.rsplit('/', 1)[-1]}-latest.osm.pbf"
    url = f"{base}/{region}-latest.osm.pbf"
    match = re.match(r"^([0-9a-f]{32})\b", get_text(url + ".md5").strip())
    if not match:
        raise InputError(f"{url}.md5 holds no md5 checksum")
    target = settings.data_dir / "downloads" / "osm"
    target.mkdir(parents=True, exist_ok=True)
    return download(url, target / name, checksum=("md5", match.group(1)), progress=progress)
