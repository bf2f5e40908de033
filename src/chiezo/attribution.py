"""Whose data a source is and under which licence: the line shown under every document.

Public dumps come with obligations (Wikipedia: CC BY-SA with attribution; OpenStreetMap: ODbL,
"© OpenStreetMap contributors"; GeoNames: CC BY 4.0); the line is derived from the source's
kind and the input identity recorded at build time, so it needs no configuration.
"""

from __future__ import annotations

from typing import Any


def attribution(info: dict[str, Any]) -> dict[str, str | None]:
    """``{"text", "licence", "url"}`` for a source's ``info()``."""
    kind = info.get("kind", "")
    given = info.get("input") or {}
    if kind == "wikipedia":
        wiki = given.get("dbname") or info.get("name", "")
        language = (given.get("language") or info.get("language") or "").strip()
        date = given.get("dump_date")
        dated = f", dump {date[:4]}-{date[4:6]}-{date[6:]}" if date and len(date) == 8 else ""
        return {"text": f"Wikipedia contributors ({wiki}{dated})",
                "licence": "CC BY-SA 4.0",
                "url": f"https://{language or 'www'}.wikipedia.org/"}  # fmt: skip
    if kind == "osm":
        return {"text": "© OpenStreetMap contributors", "licence": "ODbL 1.0",
                "url": "https://www.openstreetmap.org/copyright"}  # fmt: skip
    if kind == "geonames":
        return {"text": "GeoNames", "licence": "CC BY 4.0", "url": "https://www.geonames.org/"}
    if kind == "zim":
        who = given.get("creator") or given.get("publisher") or given.get("title") or "ZIM file"
        described = given.get("title") if given.get("title") and given.get("title") != who else ""
        text = f"{who}" + (f" — {described}" if described else "")
        return {"text": text, "licence": given.get("license") or None, "url": None}
    if kind == "notes":
        return {"text": "your notes", "licence": None, "url": None}
    path = given.get("path")
    return {"text": f"your documents ({path})" if path else "your documents", "licence": None,
            "url": None}  # fmt: skip
