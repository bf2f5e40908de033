"""What the API's text parameters accept, as the regular expressions /openapi.json states.

Each mirrors the Python that parses the value (``float()``, ``str.strip()``, ``str.split()``),
so a client or a fuzzer that generates from the document produces exactly what the service
accepts. Whitespace is spelt out character by character (what ``str.isspace`` calls space)
instead of ``\\s``: regex dialects disagree on it (ECMAScript's lacks U+0085, Python's has it),
and a fuzzer generating from ``\\s`` produced values the service took for blank. An empty value
is accepted where the service treats it as absent.
"""

from __future__ import annotations

from chiezo.ops.browse import DOC_FIELDS
from chiezo.search.facets import FACETS
from chiezo.search.where import POINT_CHARS

_SPACES = "".join(f"\\u{c:04x}" for c in range(0x3001) if chr(c).isspace())
_CONTROLS = r"\u0000-\u001f\u007f"  # what search.query turns into spaces
WS = f"[{_SPACES}]"  # one space, as str.strip() sees it
NOT_WS = f"[^{_SPACES}]"
# something to search for (search.query.has_terms): neither a space nor a control character
NOT_BLANK = f"[^{_CONTROLS}{_SPACES}]"
ANY = r"[\s\S]"  # any character (a dialect's \s does not matter here)

# -90..90 and -180..180 written as plain decimals: what near= and bbox= take (filters._degrees)
LAT = r"[-+]?0*(?:90(?:\.0+)?|[1-8]?[0-9](?:\.[0-9]+)?)"
LON = r"[-+]?0*(?:180(?:\.0+)?|(?:1[0-7][0-9]|[1-9]?[0-9])(?:\.[0-9]+)?)"
POINT = rf"^$|^{WS}*{LAT}{WS}*,{WS}*{LON}{WS}*$"
# near=: a point, or an address or place name (anything but digits, dots, commas and signs:
# those are a point, and parse_near says what is wrong with one)
# (search/where.py's POINT_CHARS, its hyphen last: a literal in a character class)
NEAR = POINT + rf"|[^{_SPACES}{POINT_CHARS}]"
BOX = rf"^$|^{WS}*{LAT}{WS}*,{WS}*{LON}{WS}*,{WS}*{LAT}{WS}*,{WS}*{LON}{WS}*$"
# location= (core/here.py): LAT,LON,TAKEN_AT[,ACCURACY_M], the time ISO 8601 with its zone; the
# accuracy's bound (core/here.MAX_ACCURACY_M), whether the date exists and whether the time is
# recent are the service's to say
_TAKEN_AT = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}:?\d{2})"
_ACCURACY = r"[0-9]+(?:\.[0-9]+)?"
LOCATION = rf"^$|^{WS}*{LAT}{WS}*,{WS}*{LON}{WS}*,{WS}*{_TAKEN_AT}{WS}*(?:,{WS}*{_ACCURACY}{WS}*)?$"

# fields=title,body (empty items are skipped)
_FIELD = "(?:" + "|".join(DOC_FIELDS) + ")"
FIELD_LIST = rf"^{WS}*(?:{_FIELD}{WS}*)?(?:,{WS}*(?:{_FIELD}{WS}*)?)*$"

# facets=tag,area (search/facets.py): the same shape as fields
_FACET = "(?:" + "|".join(FACETS) + ")"
FACET_LIST = rf"^{WS}*(?:{_FACET}{WS}*)?(?:,{WS}*(?:{_FACET}{WS}*)?)*$"

# attr=name=value: something besides spaces on both sides of the first "=" (or nothing at all);
# or name>number, name>=number, name<number, name<=number (filters.parse_attr): the first of
# = < > decides which
_ATTR_NAME = f"[^=<>]*[^=<>{_SPACES}][^=<>]*"
ATTR = (
    rf"^{WS}*$|^{_ATTR_NAME}={ANY}*{NOT_WS}"
    rf"|^{_ATTR_NAME}[<>]=?{WS}*[-+]?[0-9]+(?:\.[0-9]+)?{WS}*$"
)
# feature=key=value, commas between alternatives; each stripped item holds "=" inside it
_KEY_VALUE = rf"{WS}*[^,={_SPACES}][^,]*=[^,]*[^,={_SPACES}]{WS}*"
FEATURES = rf"^(?:{_KEY_VALUE}|{WS}*)(?:,(?:{_KEY_VALUE}|{WS}*))*$"

NEAR_DOC = r"^$|^[^:]+:" + ANY + "*" + NOT_BLANK  # source:title

# within= (search/shapes.py): a box as bbox; a GeoJSON object (its own rules — valid JSON,
# closed rings, no crossings, the limits — are more than a pattern can state: the description
# says them); or source:name of an OSM admin area
WITHIN = BOX + rf"|^{WS}*\{{{ANY}*$" + rf"|^[^:{{\[]*{NOT_WS}[^:]*:{ANY}*{NOT_BLANK}"

# ISO 8601 as Python reads it (a date, or a date and time); empty: no bound
ISO_MOMENT = {
    "anyOf": [
        {"type": "string", "format": "date"},
        {"type": "string", "format": "date-time"},
        # blank: no bound (notes.parse_time strips it), as an empty form field sends it
        {"type": "string", "pattern": rf"^{WS}*$"},
    ]
}
