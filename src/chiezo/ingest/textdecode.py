"""One text-decoding policy for every file a source reads (Markdown, text, HTML, CSV/TSV,
place tables): UTF-8 with or without BOM; else CP932 (Shift_JIS as Windows writes it —
Japanese CSV exports usually are) when the text it gives is Japanese; else what
charset-normalizer finds. Binary files and undecodable bytes raise ``Unreadable`` with the
reason, which the build reports against the file.
"""

from __future__ import annotations

from pathlib import Path

MAX_FILE_BYTES = 50 * 2**20
# Below this many bytes an encoding guess is noise: charset-normalizer reads the 11 Latin-1
# bytes "caf\xe9 cr\xe8me" as Arabic presentation forms.
MIN_GUESS_BYTES = 256


class Unreadable(Exception):
    """The file cannot be read or converted; the message says why."""


def read_text(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of the file at ``path`` under the policy above."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise Unreadable(
                f"{size / 2**20:,.0f} MiB is larger than the {max_bytes // 2**20} MiB limit"
            )
        data = path.read_bytes()
    except PermissionError as exc:
        raise Unreadable("permission denied") from exc
    except OSError as exc:
        raise Unreadable(f"cannot read ({exc.strerror or exc})") from exc
    return decode_bytes(data)


def decode_bytes(data: bytes) -> str:
    """``data`` as text under the policy above."""
    if b"\x00" in data[:8192]:
        raise Unreadable("looks binary (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    legacy = _japanese_legacy(data)
    if legacy is not None:
        return legacy
    guessed = _guessed(data)
    if guessed is not None:
        return guessed
    raise Unreadable(
        f"not valid UTF-8 (byte 0x{data[first_bad]:02x} at offset {first_bad}), "
        "and no other encoding fits"
    )


def _japanese_legacy(data: bytes) -> str | None:
    """CP932 only when the result is Japanese: Latin-1 bytes often decode as CP932 too, into
    half-width katakana nobody wrote."""
    try:
        text = data.decode("cp932")
    except UnicodeDecodeError:
        return None
    japanese = sum(1 for ch in text if "\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff")
    return text if japanese >= max(2, len(text) // 50) else None


def _guessed(data: bytes) -> str | None:
    if len(data) < MIN_GUESS_BYTES:
        return None
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return None
    best = from_bytes(data).best()
    return str(best) if best is not None else None
