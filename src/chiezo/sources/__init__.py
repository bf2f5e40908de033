"""Source kinds: each turns some input into a stream of Doc records for the builder.

``KINDS`` maps the name used by ``chiezo ingest <kind>`` to the function that builds it.
"""

from __future__ import annotations

from pathlib import Path

from ..build import BuildOptions, BuildReport, GenerationBuilder
from ..config import Settings
from ..progress import Progress
from . import documents


def ingest_documents(
    settings: Settings,
    path: Path,
    name: str,
    *,
    strict: bool = False,
    options: BuildOptions | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    """Build source ``name`` from a folder of documents (Markdown, text, PDF, Office, HTML, CSV);
    converted files come from the conversion cache when their bytes did not change."""
    from .conversions import ConversionCache

    folder = documents.DocumentFolder(Path(path), strict=strict)
    builder = GenerationBuilder(
        settings,
        name,
        documents.KIND,
        input_identity=folder.identity(),
        options=options,
        progress=progress,
        expected_bytes=folder.total_bytes,
    )
    folder.cache = ConversionCache(settings.data_dir / "cache")
    try:
        with builder:
            for message in folder.warnings:  # said while scanning (links leading out...)
                builder.warn(message)
            folder.on_warning = builder.warn
            builder.start_reading(len(folder.files))
            for doc in folder.docs():
                builder.add(doc)
            report = builder.finish()
    finally:
        folder.cache.close()
    report.conversions = {"converted": folder.cache.misses, "reused": folder.cache.hits}
    return report


def ingest_wikipedia(settings: Settings, path: Path, name: str | None, **kwargs) -> BuildReport:
    """Build a ``<lang>wiki`` source from a MediaWiki XML dump (see sources/wikipedia.py)."""
    from . import wikipedia  # mwparserfromhell and multiprocessing only when needed

    return wikipedia.ingest_wikipedia(settings, path, name, **kwargs)


def ingest_geonames(settings: Settings, path: Path, name: str | None, **kwargs) -> BuildReport:
    """Build a ``geonames`` source from a GeoNames export (see sources/geonames.py)."""
    from . import geonames

    return geonames.ingest_geonames(settings, path, name, **kwargs)


def ingest_osm(settings: Settings, path: Path, name: str | None, **kwargs) -> BuildReport:
    """Build an ``osm_<region>`` source from an .osm.pbf extract (see sources/osm.py)."""
    from . import osm

    return osm.ingest_osm(settings, path, name, **kwargs)


def ingest_zim(settings: Settings, path: Path, name: str | None, **kwargs) -> BuildReport:
    """Build a ``zim_<name>`` source from a Kiwix ZIM file (see sources/zim.py)."""
    from . import zim

    return zim.ingest_zim(settings, path, name, **kwargs)


KINDS = {
    documents.KIND: ingest_documents,
    "wikipedia": ingest_wikipedia,
    "geonames": ingest_geonames,
    "osm": ingest_osm,
    "zim": ingest_zim,
}
