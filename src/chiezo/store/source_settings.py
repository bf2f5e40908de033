"""What a user decides about a source, apart from how it was built: kept beside its generations
(``<data>/corpus/<name>/settings.json``), so a rebuild or a rollback keeps it.

* ``in_default`` — whether a search of "all sources" includes it. The bundled samples (`make
  run`'s guide and Chiezo's own docs) are left out: tried as a new user would, 3 of the top 5
  for 浅草寺 and the first hit for 「夏目漱石はいつ生まれましたか」 were Chiezo's own docs.
  A source left out is still searched when named, and the hits' notes say which were left
  out.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

FILE = "settings.json"


@dataclass(frozen=True)
class SourceSettings:
    in_default: bool = True


def read(directory: Path) -> SourceSettings:
    """The source's settings; the defaults where none were written or the file is unreadable
    (a hand-edited file must not stop the library from listing the source)."""
    try:
        data = json.loads((directory / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return SourceSettings()
    in_default = data.get("in_default", True) if isinstance(data, dict) else True
    return SourceSettings(in_default=in_default is not False)


def write(directory: Path, settings: SourceSettings) -> None:
    """Atomically: a reader sees the old file or the new one."""
    temporary = directory / f".{FILE}.{os.getpid()}"
    temporary.write_text(json.dumps(asdict(settings)), encoding="utf-8")
    os.replace(temporary, directory / FILE)
